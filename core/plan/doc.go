// Package plan reads and validates MSCCL++ execution plans: the JSON files the
// MSCCL++ DSL (mscclpp.language) emits for collectives such as allreduce, in the
// format MSCCL++ 0.9's executor loads (docs/plan-format.md, read at tag v0.9.0,
// commit ed565ceb). Plans written for MSCCL++ load unchanged; this package turns one
// into a Plan that an executor can run without further checks, and computes the
// byte layout of a call the way 0.9 does (Layout).
//
// # Reading
//
// Parse (and Load, from an io.Reader) decodes the text as MSCCL++'s parser does:
// the same required fields and defaults, keys matched exactly, unknown fields
// ignored at every level (so additive extensions of our own load in MSCCL++ too),
// a repeated key's last value winning. Then it validates everything an executor
// will index with or wait on, and fails with a *PlanError (rank, lane, op, JSON
// path, message) wrapping one sentinel:
//
//   - ErrMalformed: not JSON or not UTF-8; a required field missing or of the wrong
//     type; an unknown channel or buffer type; gpus[r].id != r or
//     threadblocks[t].id != t (0.9 builds ops by position but channels by id); an op
//     whose refs, channel type or fields do not fit its kind (a put without a remote
//     destination, a rre over port channels, packets outside scratch or in a
//     non-"LL" plan, barrier_id or semaphore_ids or iter_context on an op that does
//     not own them, which 0.9 would store over the op's channel and buffer fields);
//     a ref with both a type and a buffer_id; a pipeline nested or empty.
//   - ErrUnsupportedOp: an op name 0.9 rejects (unknown, "gstore" and "gstorepkt"
//     from v0.10.0, "glre" from the DSL), an unknown reduce_op, pws or pwsf on a
//     memory channel (0.9 drops the signal), get on a port channel (0.9 has none).
//   - ErrOutOfRange: any id or chunk range outside what it names: channel peers
//     (and a channel to itself), lane channel and remote-buffer lists, op
//     channel_ids, buffer_id, switch_channel_id, semaphore_ids, barrier_id, index +
//     size beyond the buffer's chunk count (the owner's for remote refs, every
//     group member's for switch refs), remote buffers of missing ranks or of the
//     rank itself or of a scratch buffer the owner lacks; and the values 0.9
//     divides by: input_chunks or output_chunks 0, buffer_alignment 0, a ref of
//     size 0, tbg_size 0, unit_size 0.
//   - ErrLimit: a count above the limits of limits.go.
//   - ErrUnmatched: synchronisation that cannot complete. Memory and port channels
//     must pair up: MSCCL++ pairs the k-th channel of a type from A to B with the
//     k-th from B to A, and a channel without a pair is rejected. Each channel must
//     be signalled (signal, rlxsignal, pws, pwsf) as often as its pair waits (wait,
//     rlxwait), at lane level and in each pipeline context. All barrier ops with one
//     id must agree on num_threadblocks n, and unless n is 1, exactly n lanes must
//     reach the id, equally often. A semaphore that no op of its rank releases (at
//     lane level or in a pipeline) may be acquired at lane level at most init_value
//     times: 0.9's acquire that reads 0 or less spins until a release, so the first
//     call would hang. Ranks must list shared NVLS groups in the same order. Cycles
//     of waits are not detected (two lanes each acquiring the semaphore the other
//     releases after, barriers met in opposite orders), nor semaphores that run out
//     over calls (they are not reset between executions).
//
// Validation also requires per-thread work to fit num_threads_per_block, port data
// ops to name one channel per destination whose peer owns that destination, waits
// to name a channel once, a put's sources and destinations (and a reduction's
// operands) to have equal sizes, and a pipeline's windowed inner refs to cover its
// num_chunks.
//
// # Fixtures
//
// testdata/mscclpp-v0.9.0 holds 60 plans the v0.9.0 DSL emits. The 34 that the
// real 0.9 parser loads load here. The others fail as 0.9 does, by class:
//   - 22 unit tests with input_chunks or output_chunks 0 (emitter tests on
//     TestCollective): 0.9 dies of SIGFPE; ErrOutOfRange. With the counts repaired,
//     six of them would still fail with ErrUnmatched, since they would hang or leave
//     semaphores unbalanced under 0.9's pairing (one-way channels in flush_test,
//     flush_fuse_test and reduce_copy_send_packet_test; two pws against one wait;
//     signals on channels 0-1 but waits on 2-3 in the two signal_wait fuse tests).
//   - reduce_send_test and tbg_reduce_send_test: the 0.9 DSL writes res without
//     channel_type, which 0.9 rejects ("Invalid channel type"); ErrMalformed.
//   - switch_broadcast_test and switch_reduce_test: unfused gstore and glre, which
//     0.9 does not accept ("Invalid operation type"); ErrUnsupportedOp.
//
// # Limits
//
// Plans are untrusted input; every count is bounded (limits.go): MaxPlanBytes 64
// MiB of text, MaxDepth 64, MaxRanks 1024, MaxLanes 1024 per rank, MaxOpsPerLane 64
// (counting pipelines' inner ops; 0.9's own limit), MaxChunks 2^20 per buffer,
// MaxRankChannels 4096 per type, MaxSwitchChannels 64, MaxRemoteBuffers and
// MaxSemaphores 4096, and 0.9's unchecked array sizes: 16 channels and 16 remote
// buffers per type per lane, 8 channel ids and 10 refs per list per op, 16
// barriers, 16 semaphore ids per op, 1024 threads per block. A layout allows at most
// MaxPipelineIterations (65535, what 0.9's uint16 counter holds).
//
// # Byte layout
//
// Plan.Layout computes, for one rank and the call's input and output sizes, what
// 0.9's loadExecutionPlan does: the message-size check (CheckMessageSize), the
// chunk size C (one C for all three buffers), each ref's offset index·C and length
// size·C split among its thread-block group, the scratch size, 0.9's scratch slots
// for reuse_resources plans, pipeline iteration counts and windows (Window), and
// packet regions at twice the offset (PacketSpan). It then checks that every byte
// each op touches lies inside its buffer. testdata/golden holds the real 0.9
// parser's numbers for every loading fixture at many sizes, with the generator.
// InPlaceConvention and Plan.CheckBuffers say how an in-place call's buffers alias
// (allgather: the send buffer is the receive buffer's slot rank; reducescatter:
// the reverse; others: one buffer) and check a call against it.
//
// # Where this package differs from MSCCL++ 0.9
//
//   - Beyond what 0.9 rejects, Parse refuses plans that 0.9 loads but crashes on
//     (division by zero), corrupts memory with (ids past its fixed arrays, refs past
//     their buffers, fields stored over a union), hangs on (unpaired channels,
//     unbalanced waits, unreachable barriers, semaphores acquired past their initial
//     value with no release, more per-thread items than threads),
//     or misreads (a lane listing a remote buffer for an access type the buffer
//     lacks gets 0.9's index 0; pws on a memory channel; a port put whose channel
//     leads to another rank than its destination's owner; packets in a Simple
//     plan's unsized scratch). It also refuses a few forms the DSL never writes and
//     whose meaning is doubtful: a rank-level channel or a lane channel list of
//     type "none", a remote buffer with no or repeated access types, refs on ops
//     that take none, channel_ids without a channel_type, an unknown reduce_op,
//     min_message_size above max_message_size.
//   - Layout computes in 64 bits, where 0.9 truncates offsets to 32 bits (buffers
//     over 4 GiB); splits refs with fewer alignment units than group slices with
//     MSCCL++'s later formula (empty slices) where 0.9's overlap; gives empty spans
//     for zero-byte messages, where 0.9 divides by zero; sizes scratch from the
//     message sizes rather than the sizes of the allocations around the buffers; adds
//     no constant offsets (remote refs are relative to the peer's own buffer); and
//     checks the input and output chunk sizes agree even for a plan without refs
//     (0.9 checks only when it computes a ref).
//   - Numbers must be integers or integral floats; 0.9 would truncate 2.5 and take
//     true as 1.
//
// # What an executor consumes
//
// A Plan is read-only after Parse and safe for concurrent use, as is a Layout. For
// rank r, Plan.Ranks[r] gives the chunk counts, the rank-level channels (Channel:
// peer, ordinal among channels to that peer, index of the paired channel on the
// peer), switch channels, remote buffers (owner, buffer type, access types and
// 0.9's per-access index, the order peers' memory is exchanged in), semaphores with
// initial values, and the lanes. A Lane holds its channel and remote-buffer lists
// (rank-level indices) and its Ops in order; an Op has its OpCode, channel type,
// lane-local channel ids, Src and Dst BufferRefs (already resolved to buffer type,
// owner rank, rank-level remote buffer or switch channel, and whether the op
// treats it as a packet region), thread-block group, barrier, semaphore ids,
// pipeline context and inner ops, and reduce op. Plan.Layout(r, in, out) gives
// each op's byte Spans (Layout.Lanes, parallel to Lane.Ops), scratch sizes and
// pipeline iteration counts; Layout.Window gives a pipeline window.
//
// Semantics are in docs/plan-format.md section 7.3. Where 0.9's kernel departs from
// what a plan asks for, the intended meaning is the one to implement: get copies
// Src[i] to Dst[i] (0.9 swaps their offsets), flush completes the port channels'
// earlier transfers (0.9's is a no-op), pwsf flushes after its signal (0.9: as
// pws), reduce_op is honoured (0.9 always sums), and a memory put's sources each
// keep their own buffer type (0.9 takes Src[0]'s for all).
package plan
