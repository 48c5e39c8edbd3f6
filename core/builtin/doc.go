// Package builtin generates the library's built-in collective algorithms as MSCCL++
// 0.9 execution plans (docs/plan-format.md): the same JSON the MSCCL++ DSL emits,
// which core/plan reads and MSCCL++ 0.9 itself would load. Every generator returns
// the JSON text and the *plan.Plan that plan.Parse makes of it, so a built-in is
// validated before anyone runs it; testdata holds golden copies (go test -update
// rewrites them) so that any change in the output is seen in review.
//
// # Algorithms
//
// Algorithms lists them; Names gives their keys; Generate(collective, name, n, o)
// or the named functions (AllReduceRing...) make a plan for n ranks (2 and up; one
// rank is the caller's copy). Per rank, with K = Lanes·Q, Q = ceil((n-1)/g),
// g = PeersPerLane (8 unless set), c = Chunks, L = Lanes:
//
//	collective.name          input chunks   output chunks  scratch chunks
//	allreduce.allpairs       n·K            n·K            (n-1)·K
//	allreduce.ring           n·L·c          n·L·c          (n-1)·L·c
//	allgather.allpairs       L              n·L            0
//	reducescatter.allpairs   n·K            K              (n-1)·K
//	alltoall.pairwise        n·L            n·L            (n-1)·L in place, else 0
//	broadcast.chain          L·c            L·c            0
//	broadcast.tree           L·c            L·c            0
//	reduce.chain             L·c            L·c            2·L·c inside the chain, L·c at the root, 0 at its end
//	reduce.tree              L·c            L·c            3·L·c inside the tree, 2·L·c at the root, 0 at leaves
//	reduce.direct            K              K              (n-1)·K at the root, else 0
//
// Algorithm.Lanes gives the lanes of the busiest rank (Lanes·Q for the all-pairs
// ones and reduce.direct's root, Lanes·segments for the ring and the chains and
// trees).
// A call's send and receive sizes must be multiples of the input and output chunk
// counts times the element size (Algorithm.Chunks): chunks then never split an
// element. Plans say buffer_alignment 1 unless Options.Alignment says otherwise,
// and leave min_message_size and max_message_size at their defaults.
//
// Plans are named "ucxxgo.<collective>.<name>.n<n>[.root<r>][.c<c>][.l<L>][.g<g>]
// [.a<alignment>].<inplace|outofplace>" (Algorithm.PlanName), for example
// "ucxxgo.allreduce.ring.n4.c2.inplace".
//
// # Shape
//
// Only memory channels, protocol "Simple", and ops MSCCL++ 0.9 runs as the plan
// means them: put (one source buffer type per op), copy, re, res (with its
// channel_type), signal, wait, rlxsignal, rlxwait, nop, barrier. No get (0.9
// swaps its offsets), no pws on memory channels, no tbg_info (0.9 splits refs
// with fewer alignment units than slices wrongly, and a byte-granular split could
// cut an element), no packets, no references to a peer's input buffer (0.9 adds the local
// send buffer's offset in its allocation to them, which in-place allgather makes
// differ between ranks).
//
// Every channel end belongs to one lane, and channels are made in pairs (the k-th
// channel from A to B pairs with the k-th from B to A in 0.9), so the lanes at the
// two ends of a channel are fixed by construction. Each lane's limits are those of
// 0.9: at most 64 ops, 16 channels and 16 remote buffers, 8 channels per op, 10
// references per list. Algorithms whose work per lane grows with n split it:
// all-pairs ranks use a lane per group of at most 8 peers, the ring, chains and
// trees cut long sequences of steps into segment lanes.
//
// # Synchronisation between calls
//
// The executor is assumed to run a rank's calls one after another: a call's lanes
// start after every lane of the rank's previous call has ended. Each lane starts
// with a relaxed handshake: rlxsignal on every channel it has,
// rlxwait on all of them, nop. So when a lane's rlxwait on a channel
// returns, the rank at the other end has finished the previous call: its own reads
// of its scratch and output, and every wait for stores into them. A lane stores
// into a peer's buffers only after its handshake with that peer, so no store of
// this call can land in a buffer the peer still uses for the previous one, and
// none can land before the peer's caller has handed in its buffers. Data is
// pushed, never pulled, so a rank's input is read only by the rank itself and is
// free once the rank returns. Every rank waits, before it returns, for the signal
// that follows each store into its own buffers. So the end needs nothing more:
// the next call's handshake covers it. Signal and wait counts balance on every
// channel within a call (plan.Parse checks), so the counters, which persist
// across calls, start each call level.
package builtin
