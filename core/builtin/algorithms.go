package builtin

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ucxx-go/ucxx-go/core/plan"
)

// Options are a generator's parameters. The zero value asks for defaults: one
// lane, one chunk per lane, root 0, 8 peers per lane, byte alignment,
// out-of-place.
type Options struct {
	// InPlace selects the in-place variant (docs/plan-format.md section 9):
	// allreduce, alltoall and broadcast with one buffer; allgather with the send
	// buffer at the receive buffer + rank·sendBytes; reducescatter with the
	// receive buffer at the send buffer + rank·recvBytes.
	InPlace bool
	// Lanes is how many independent lanes (thread blocks) share the data: each
	// rank's data is split into Lanes parts handled in parallel. 0 means 1.
	Lanes int
	// Chunks is the pipeline depth of "ring", "chain" and "tree": each lane's part
	// of a block is cut into Chunks pieces, each forwarded as soon as it is ready.
	// Ignored by the others. 0 means 1.
	Chunks int
	// Root is the root rank of "broadcast" and "reduce" plans (a plan is made for
	// one root). Ignored by the others.
	Root int
	// PeersPerLane bounds how many peers one lane of an all-pairs algorithm
	// talks to, 1..8 (MSCCL++ 0.9's limits: 8 channels per op, 16 remote
	// buffers per lane, two per peer); 0 means 8. Ranks with more peers use
	// ceil((n-1)/PeersPerLane) lanes per data lane. Smaller values exist to
	// test the multi-group shape at small n.
	PeersPerLane int
	// Alignment is the plan's buffer_alignment in bytes; 0 means 1 (the caller
	// enforces the element size). MSCCL++ 0.9's own kernels need every chunk to
	// be a multiple of 16 bytes (their reductions index 16-byte vectors by
	// offset/16); a plan for 0.9 itself should say 16.
	Alignment int
}

// MaxPeersPerLane is the most peers one lane of an all-pairs plan talks to.
const MaxPeersPerLane = 8

// ErrOptions is wrapped by the error of a generator given options it cannot use.
var ErrOptions = errors.New("builtin: bad options")

func (o Options) norm() Options {
	if o.Lanes == 0 {
		o.Lanes = 1
	}
	if o.Chunks == 0 {
		o.Chunks = 1
	}
	if o.PeersPerLane == 0 {
		o.PeersPerLane = MaxPeersPerLane
	}
	if o.Alignment == 0 {
		o.Alignment = 1
	}
	return o
}

// Algorithm describes one built-in collective algorithm.
type Algorithm struct {
	Collective string // the plan's "collective": "allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce"
	Name       string // "allpairs", "ring", "chain", "tree", "direct", "pairwise"
	InPlace    bool   // has an in-place variant
	OutOfPlace bool   // has an out-of-place variant
	Rooted     bool   // uses Options.Root
	Pipelined  bool   // uses Options.Chunks
	Grouped    bool   // uses Options.PeersPerLane
	Summary    string

	// chunks returns the input, output and scratch chunk counts of rank r.
	chunks func(n, r int, o Options) (in, out, scratch int)
	// lanes returns the most lanes a rank has.
	lanes func(n int, o Options) int
	build func(b *builder, o Options)
}

// Key returns "collective.name", the form Names lists and Lookup takes apart.
func (a Algorithm) Key() string { return a.Collective + "." + a.Name }

var algorithms = []Algorithm{
	{
		Collective: "allreduce", Name: "allpairs", InPlace: true, OutOfPlace: true, Grouped: true,
		Summary: "for small messages: every rank puts block j of its input into rank j's scratch, " +
			"each rank reduces its own block and puts it into every peer's output; " +
			"2 hops, (n-1)/n of the message sent per rank twice",
		chunks: func(n, r int, o Options) (int, int, int) {
			k := o.Lanes * groups(n, o.PeersPerLane)
			return n * k, n * k, (n - 1) * k
		},
		lanes: groupedLanes,
		build: allReduceAllPairs,
	},
	{
		Collective: "allreduce", Name: "direct", InPlace: true, OutOfPlace: true, Grouped: true,
		Summary: "for the smallest messages: every rank puts its whole input into every peer's scratch " +
			"and reduces all n copies itself; 1 hop, no stores into peers' buffers, the message sent n-1 times",
		chunks: func(n, r int, o Options) (int, int, int) {
			k := o.Lanes * groups(n, o.PeersPerLane)
			return k, k, (n - 1) * k
		},
		lanes: groupedLanes,
		build: allReduceDirect,
	},
	{
		Collective: "allreduce", Name: "ring", InPlace: true, OutOfPlace: true, Pipelined: true,
		Summary: "for large messages: reduce-scatter then allgather around the ring r -> r+1, " +
			"each block in Chunks pieces forwarded as they are ready, partials received in scratch",
		chunks: func(n, r int, o Options) (int, int, int) {
			k := o.Lanes * o.Chunks
			return n * k, n * k, (n - 1) * k
		},
		lanes: func(n int, o Options) int { c, _ := ringSegments(n, o.Chunks, false); return o.Lanes * c },
		build: allReduceRing,
	},
	{
		Collective: "allgather", Name: "allpairs", InPlace: true, OutOfPlace: true, Grouped: true,
		Summary: "every rank puts its block into every peer's output slot",
		chunks: func(n, r int, o Options) (int, int, int) {
			return o.Lanes, n * o.Lanes, 0
		},
		lanes: groupedLanes,
		build: allGatherAllPairs,
	},
	{
		Collective: "reducescatter", Name: "allpairs", InPlace: true, OutOfPlace: true, Grouped: true,
		Summary: "every rank puts block j of its input into rank j's scratch; each rank reduces its block",
		chunks: func(n, r int, o Options) (int, int, int) {
			k := o.Lanes * groups(n, o.PeersPerLane)
			return n * k, k, (n - 1) * k
		},
		lanes: groupedLanes,
		build: reduceScatterAllPairs,
	},
	{
		Collective: "alltoall", Name: "pairwise", InPlace: true, OutOfPlace: true, Grouped: true,
		Summary: "block j of rank i goes to block i of rank j, each rank putting to every peer at once " +
			"(in place: through the receiver's scratch)",
		chunks: func(n, r int, o Options) (int, int, int) {
			s := 0
			if o.InPlace {
				s = (n - 1) * o.Lanes
			}
			return n * o.Lanes, n * o.Lanes, s
		},
		lanes: groupedLanes,
		build: allToAllPairwise,
	},
	{
		Collective: "broadcast", Name: "chain", InPlace: true, OutOfPlace: true, Rooted: true, Pipelined: true,
		Summary: "root's input to every rank's output along the chain root, root+1, ..., pipelined in Chunks pieces",
		chunks: func(n, r int, o Options) (int, int, int) {
			return o.Lanes * o.Chunks, o.Lanes * o.Chunks, 0
		},
		lanes: treeLanes,
		build: func(b *builder, o Options) { broadcastTree(b, o, 1) },
	},
	{
		Collective: "broadcast", Name: "tree", InPlace: true, OutOfPlace: true, Rooted: true, Pipelined: true,
		Summary: "root's input to every rank's output down a binary tree (rank root+v has children " +
			"root+2v+1, root+2v+2), pipelined in Chunks pieces",
		chunks: func(n, r int, o Options) (int, int, int) {
			return o.Lanes * o.Chunks, o.Lanes * o.Chunks, 0
		},
		lanes: treeLanes,
		build: func(b *builder, o Options) { broadcastTree(b, o, 2) },
	},
	{
		Collective: "reduce", Name: "chain", InPlace: true, OutOfPlace: true, Rooted: true, Pipelined: true,
		Summary: "partial sums along the chain root+n-1, ..., root+1 into the root's output, pipelined in " +
			"Chunks pieces (received in scratch; other ranks' outputs are not touched)",
		chunks: func(n, r int, o Options) (int, int, int) {
			return reduceTreeChunks(n, r, o, 1)
		},
		lanes: treeLanes,
		build: func(b *builder, o Options) { reduceTree(b, o, 1) },
	},
	{
		Collective: "reduce", Name: "tree", InPlace: true, OutOfPlace: true, Rooted: true, Pipelined: true,
		Summary: "partial sums up the binary tree of broadcast.tree into the root's output, pipelined in " +
			"Chunks pieces (received in scratch; other ranks' outputs are not touched)",
		chunks: func(n, r int, o Options) (int, int, int) {
			return reduceTreeChunks(n, r, o, 2)
		},
		lanes: treeLanes,
		build: func(b *builder, o Options) { reduceTree(b, o, 2) },
	},
	{
		Collective: "reduce", Name: "direct", InPlace: true, OutOfPlace: true, Rooted: true, Grouped: true,
		Summary: "every rank puts its input into the root's scratch; the root reduces into its output " +
			"(other ranks' outputs are not touched)",
		chunks: func(n, r int, o Options) (int, int, int) {
			k := o.Lanes * groups(n, o.PeersPerLane)
			s := 0
			if r == o.Root {
				s = (n - 1) * k
			}
			return k, k, s
		},
		lanes: groupedLanes,
		build: reduceDirect,
	},
}

// reduceTreeChunks: a leaf needs no scratch, the root one slot per child, the
// others one more for their partial sums.
func reduceTreeChunks(n, r int, o Options, fanout int) (in, out, scratch int) {
	k := o.Lanes * o.Chunks
	v := (r - o.Root + n) % n
	switch {
	case fanout*v+1 >= n:
		return k, k, 0
	case v == 0:
		return k, k, fanout * k
	}
	return k, k, (fanout + 1) * k
}

func groupedLanes(n int, o Options) int { return o.Lanes * groups(n, o.PeersPerLane) }

// maxPlanOps bounds the ops a generator will build, counting 64 per lane: at
// some 100 bytes of JSON each, plan.MaxPlanBytes of text holds fewer, and
// plan.Parse would refuse the text anyway.
const maxPlanOps = plan.MaxPlanBytes / 64

// Algorithms returns the table of built-in algorithms.
func Algorithms() []Algorithm { return append([]Algorithm(nil), algorithms...) }

// Names returns the keys ("collective.name") of the built-in algorithms.
func Names() []string {
	var s []string
	for _, a := range algorithms {
		s = append(s, a.Key())
	}
	return s
}

// Lookup returns the algorithm of a collective by name.
func Lookup(collective, name string) (Algorithm, bool) {
	for _, a := range algorithms {
		if a.Collective == collective && a.Name == name {
			return a, true
		}
	}
	return Algorithm{}, false
}

// Generate makes the plan of algorithm collective.name for n ranks.
//
// Errors: ErrOptions wrapped (unknown algorithm, bad n or options); a plan that
// plan.Parse rejects (a bug, or limits exceeded at very large n or Chunks).
func Generate(collective, name string, n int, o Options) ([]byte, *plan.Plan, error) {
	a, ok := Lookup(collective, name)
	if !ok {
		return nil, nil, fmt.Errorf("%w: no built-in %s.%s", ErrOptions, collective, name)
	}
	return a.Generate(n, o)
}

func (a Algorithm) check(n int, o Options) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrOptions, a.Key(), fmt.Sprintf(format, args...))
	}
	switch {
	case n < 2 || n > plan.MaxRanks:
		return bad("%d ranks, want 2..%d (one rank is the caller's copy)", n, plan.MaxRanks)
	case o.InPlace && !a.InPlace, !o.InPlace && !a.OutOfPlace:
		return bad("no variant with in-place %t", o.InPlace)
	case o.Lanes < 1:
		return bad("%d lanes", o.Lanes)
	case o.Chunks < 1:
		return bad("%d chunks", o.Chunks)
	case o.PeersPerLane < 1 || o.PeersPerLane > MaxPeersPerLane:
		return bad("%d peers per lane, want 1..%d", o.PeersPerLane, MaxPeersPerLane)
	case o.Alignment < 1 || o.Alignment > plan.MaxBufferAlignment:
		return bad("alignment %d", o.Alignment)
	case a.Rooted && (o.Root < 0 || o.Root >= n):
		return bad("root %d of %d ranks", o.Root, n)
	}
	in, out, scratch := a.chunks(n, o.Root, o)
	if max(in, out, scratch) > plan.MaxChunks {
		return bad("%d chunks per buffer, more than %d", max(in, out, scratch), plan.MaxChunks)
	}
	if lanes := a.lanes(n, o); lanes > plan.MaxLanes || n*lanes*plan.MaxOpsPerLane > maxPlanOps {
		return bad("%d lanes per rank: more than a plan holds", lanes)
	}
	return nil
}

// Chunks returns the input and output chunk counts of every rank of the plan
// Generate makes with these options: a call's send and receive sizes must be
// multiples of in·e and out·e bytes for element size e (and of the alignment),
// with send/in == recv/out. For allgather out = n·in, for reducescatter
// in = n·out, for the others in == out.
func (a Algorithm) Chunks(n int, o Options) (in, out int) {
	in, out, _ = a.chunks(n, o.Root, o.norm())
	return in, out
}

// Lanes returns how many lanes (thread blocks) the busiest rank of the plan has:
// what an executor runs concurrently for it.
func (a Algorithm) Lanes(n int, o Options) int { return a.lanes(n, o.norm()) }

// PlanName returns the name the plan gets:
// "ucxxgo.<collective>.<name>.n<n>[.root<r>][.c<chunks>][.l<lanes>][.g<peers>][.a<alignment>].<inplace|outofplace>",
// with c for pipelined algorithms always, and l, g, a only when not the default.
func (a Algorithm) PlanName(n int, o Options) string {
	o = o.norm()
	var s strings.Builder
	fmt.Fprintf(&s, "ucxxgo.%s.%s.n%d", a.Collective, a.Name, n)
	if a.Rooted {
		fmt.Fprintf(&s, ".root%d", o.Root)
	}
	if a.Pipelined {
		fmt.Fprintf(&s, ".c%d", o.Chunks)
	}
	if o.Lanes != 1 {
		fmt.Fprintf(&s, ".l%d", o.Lanes)
	}
	if a.Grouped && o.PeersPerLane != MaxPeersPerLane {
		fmt.Fprintf(&s, ".g%d", o.PeersPerLane)
	}
	if o.Alignment != 1 {
		fmt.Fprintf(&s, ".a%d", o.Alignment)
	}
	if o.InPlace {
		s.WriteString(".inplace")
	} else {
		s.WriteString(".outofplace")
	}
	return s.String()
}

// Generate makes the algorithm's plan for n ranks: its JSON text and the plan
// plan.Parse makes of it.
//
// Errors: as the package-level Generate.
func (a Algorithm) Generate(n int, o Options) ([]byte, *plan.Plan, error) {
	o = o.norm()
	if err := a.check(n, o); err != nil {
		return nil, nil, err
	}
	b := newBuilder(a.PlanName(n, o), a.Collective, n, o.InPlace, o.Alignment)
	for r, rk := range b.ranks {
		rk.in, rk.out, rk.scratch = a.chunks(n, r, o)
	}
	a.build(b, o)
	b.handshakes()
	return b.marshal()
}

// The generators by name.

// AllReduceAllPairs is Generate("allreduce", "allpairs", n, o).
func AllReduceAllPairs(n int, o Options) ([]byte, *plan.Plan, error) {
	return Generate("allreduce", "allpairs", n, o)
}

// AllReduceDirect is Generate("allreduce", "direct", n, o).
func AllReduceDirect(n int, o Options) ([]byte, *plan.Plan, error) {
	return Generate("allreduce", "direct", n, o)
}

// AllReduceRing is Generate("allreduce", "ring", n, o).
func AllReduceRing(n int, o Options) ([]byte, *plan.Plan, error) {
	return Generate("allreduce", "ring", n, o)
}

// AllGatherAllPairs is Generate("allgather", "allpairs", n, o).
func AllGatherAllPairs(n int, o Options) ([]byte, *plan.Plan, error) {
	return Generate("allgather", "allpairs", n, o)
}

// ReduceScatterAllPairs is Generate("reducescatter", "allpairs", n, o).
func ReduceScatterAllPairs(n int, o Options) ([]byte, *plan.Plan, error) {
	return Generate("reducescatter", "allpairs", n, o)
}

// AllToAllPairwise is Generate("alltoall", "pairwise", n, o).
func AllToAllPairwise(n int, o Options) ([]byte, *plan.Plan, error) {
	return Generate("alltoall", "pairwise", n, o)
}

// BroadcastChain is Generate("broadcast", "chain", n, o).
func BroadcastChain(n int, o Options) ([]byte, *plan.Plan, error) {
	return Generate("broadcast", "chain", n, o)
}

// BroadcastTree is Generate("broadcast", "tree", n, o).
func BroadcastTree(n int, o Options) ([]byte, *plan.Plan, error) {
	return Generate("broadcast", "tree", n, o)
}

// ReduceDirect is Generate("reduce", "direct", n, o).
func ReduceDirect(n int, o Options) ([]byte, *plan.Plan, error) {
	return Generate("reduce", "direct", n, o)
}

// ReduceChain is Generate("reduce", "chain", n, o).
func ReduceChain(n int, o Options) ([]byte, *plan.Plan, error) {
	return Generate("reduce", "chain", n, o)
}

// ReduceTree is Generate("reduce", "tree", n, o).
func ReduceTree(n int, o Options) ([]byte, *plan.Plan, error) {
	return Generate("reduce", "tree", n, o)
}

// AllToAllV is the pairwise alltoall with per-call block sizes (alltoallv): the
// out-of-place plan, one lane, marked "ucxxgo_variable_blocks" so that chunk j of
// each rank's input and output is block j with the offset and size each call
// gives (plan/variable.go). Named "ucxxgo.alltoallv.pairwise.n<n>".
func AllToAllV(n int) ([]byte, *plan.Plan, error) {
	a, _ := Lookup("alltoall", "pairwise")
	o := Options{}.norm()
	if err := a.check(n, o); err != nil {
		return nil, nil, err
	}
	b := newBuilder(fmt.Sprintf("ucxxgo.alltoallv.pairwise.n%d", n), "alltoallv", n, false, o.Alignment)
	b.variable = true
	for r, rk := range b.ranks {
		rk.in, rk.out, rk.scratch = a.chunks(n, r, o)
	}
	a.build(b, o)
	b.handshakes()
	return b.marshal()
}
