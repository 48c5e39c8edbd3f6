package collective

import (
	"fmt"
	"sync"

	"github.com/ucxx-go/ucxx-go/core/builtin"
	"github.com/ucxx-go/ucxx-go/core/executor"
	"github.com/ucxx-go/ucxx-go/core/plan"
)

// The plan registry: which execution plan runs a collective call. Users' selectors
// are asked first (newest first), then users' plans (newest first: the first whose
// collective, rank count, in-place form and message-size range fit), then the
// built-ins (core/builtin), made on first use and kept. What MSCCL++ users asked for
// in its issue 556: their own plans and selection rules beside the library's.

// Request is what a plan is chosen for.
type Request struct {
	// Collective is the plan's "collective": allreduce, allgather, reducescatter,
	// broadcast, reduce, alltoall.
	Collective string
	// Bytes is the message size as MSCCL++ selects by it: the receive buffer's for
	// allgather, the send buffer's otherwise.
	Bytes   uint64
	InPlace bool
	Ranks   int
	Root    int
	// ElementBytes is the size of the call's elements.
	ElementBytes uint64
	// CoresPerRank is, for host memory, the fewest CPUs any rank may use divided by
	// the rank count (at least 1): the same on every rank (bootstrap agrees on it).
	// 0 for device memory, whose lanes are CUDA streams, not cores.
	CoresPerRank int
	// Memory is where the call's buffers are (every rank's the same kind: the
	// executor refuses a call whose ranks differ).
	Memory executor.Memory
}

// Selector picks a plan for a request, or returns nil to leave it to the rest.
// Every rank must pick the same plan for the same request (the ranks compare).
type Selector func(Request) *plan.Plan

// Registry holds the plans collectives choose from. The zero value has only the
// built-ins. It is safe for concurrent use.
type Registry struct {
	mu        sync.Mutex
	selectors []Selector
	plans     []*plan.Plan
	builtins  map[builtinKey]*plan.Plan
}

type builtinKey struct {
	collective, name string
	ranks            int
	o                builtin.Options
}

// Register adds a user plan: calls whose collective, rank count, in-place form and
// size fit it run it (the newest registered first).
func (g *Registry) Register(p *plan.Plan) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.plans = append([]*plan.Plan{p}, g.plans...)
}

// RegisterSelector adds a selector, asked before every plan (the newest first).
func (g *Registry) RegisterSelector(s Selector) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.selectors = append([]Selector{s}, g.selectors...)
}

// userPlan returns the user's plan for r, or nil.
func (g *Registry) userPlan(r Request) *plan.Plan {
	g.mu.Lock()
	sels, plans := g.selectors, g.plans
	g.mu.Unlock()
	for _, s := range sels {
		if p := s(r); p != nil {
			return p
		}
	}
	for _, p := range plans {
		if p.Collective == r.Collective && len(p.Ranks) == r.Ranks && p.InPlace == r.InPlace &&
			r.Bytes >= p.MinMessageBytes && r.Bytes <= p.MaxMessageBytes {
			return p
		}
	}
	return nil
}

// builtin returns the built-in plan of an algorithm, generating it on first use.
func (g *Registry) builtin(collective, name string, ranks int, o builtin.Options) (*plan.Plan, error) {
	k := builtinKey{collective, name, ranks, o}
	g.mu.Lock()
	p := g.builtins[k]
	g.mu.Unlock()
	if p != nil {
		return p, nil
	}
	_, p, err := builtin.Generate(collective, name, ranks, o)
	if err != nil {
		return nil, fmt.Errorf("collective: built-in %s.%s for %d ranks: %w", collective, name, ranks, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.builtins == nil {
		g.builtins = make(map[builtinKey]*plan.Plan)
	}
	if q := g.builtins[k]; q != nil {
		return q, nil
	}
	g.builtins[k] = p
	return p, nil
}

// alltoallv returns the built-in alltoallv plan for ranks, made on first use.
func (g *Registry) alltoallv(ranks int) (*plan.Plan, error) {
	k := builtinKey{"alltoallv", "pairwise", ranks, builtin.Options{}}
	g.mu.Lock()
	p := g.builtins[k]
	g.mu.Unlock()
	if p != nil {
		return p, nil
	}
	_, p, err := builtin.AllToAllV(ranks)
	if err != nil {
		return nil, fmt.Errorf("collective: built-in alltoallv for %d ranks: %w", ranks, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.builtins == nil {
		g.builtins = make(map[builtinKey]*plan.Plan)
	}
	g.builtins[k] = p
	return p, nil
}

// The built-ins' size thresholds (measured: benchmarks/collectives).
const (
	// directMaxBytes: allreduce messages up to this size take direct (1 step: every
	// rank reduces all n inputs itself). Measured against all-pairs on 32 cores
	// (go test -bench AllReduceSmallRanks ./core/executor, 2 x H200 host): direct
	// 1.5-2.3x faster to 16 KiB at 2, 4 and 8 ranks, even to 1.1x at 64 KiB.
	directMaxBytes = 64 << 10
	// allPairsMaxBytes: allreduce messages up to this size take all-pairs (2 steps),
	// larger ones the ring (2(n-1) steps, each rank moving 2(n-1)/n of the message).
	allPairsMaxBytes = 256 << 10
	// pipelineMinBytes: ring and chain messages from this size are cut into
	// pipelineChunks pieces per block.
	pipelineMinBytes = 4 << 20
	pipelineChunks   = 4
	// lanesMinBytes: ring messages from this size run on up to maxLanes lanes
	// (goroutines) per rank where every rank has that many cores: measured on 16
	// cores (go test -bench AllReduceLargeLanes ./core/executor), 4 lanes move 1.7-1.8x
	// the bytes of one at 4 MiB and 2 ranks, 3.1x at 16 MiB; 1.6-1.7x at 16 MiB and 4
	// ranks; nothing at 1 MiB; fewer than 4 cores a rank (8 ranks on 16) lose.
	lanesMinBytes = 4 << 20
	maxLanes      = 4
	// deviceDirectMaxBytes: on device memory, allreduce messages up to this size
	// take direct, larger ones all-pairs; neither is pipelined nor given lanes.
	// Measured on 4 x H100, one rank a GPU, per call with a synchronize
	// (benchmarks/results/session15/device_plans/): direct 114-162 µs to 4 MiB
	// against all-pairs' 133-165 and the ring's 156-177; at 16 MiB-256 MiB
	// all-pairs 246 / 478 / 1,462 µs against direct's 306 / 892 / 3,120 and the
	// host rule's pipelined ring 491 / 744 / 1,773 (each pipeline chunk is a copy,
	// a signal and a wait the host queues); more lanes lost at every size but
	// 256 MiB (within 5%).
	deviceDirectMaxBytes = 4 << 20
	// devicePipelineMinBytes: on device memory, broadcasts among more than 2 ranks
	// (chains to 4 ranks, trees above) from this size are cut into
	// devicePipelineChunks pieces: each hop of a piece (the parent's copy, its signal,
	// the child's wait) costs 10-20 µs of the pipeline beyond its bytes, so a deeper
	// pipeline pays only at large sizes. Measured on 4 x H200 with chains, one rank a
	// GPU, in place, per call, 2-3 runs (benchmarks/results/session19/4xh200/
	// broadcast_chunks/): 4 / 8 / 16 pieces 498 / 464 / 517 µs at 96 MiB, 1,985 /
	// 1,503 / 1,696 at 384 MiB, 2,333-2,844 / 1,998-2,171 / 2,062-2,388 at 512 MiB,
	// 4,549-4,776 / 3,823-4,117 / 3,847-4,211 at 1 GiB; on 2 ranks (no hop in between)
	// 4-16 pieces change nothing. 3 ranks and trees were not measured.
	devicePipelineMinBytes = 64 << 20
	devicePipelineChunks   = 8
	// deviceDeepPipelineMinBytes: device chains (3-4 ranks) from this size are cut
	// into deviceDeepPipelineChunks pieces, and every device chain from
	// devicePipelineMinBytes runs sliced (executor.Call.Sliced: the SMs copy, a
	// block's waits spin in it, so a hop costs µs, not tens). Measured on 4 x H100,
	// one rank a GPU, in place, 2 alternating runs (RESULTS.md, session 21; µs, 32
	// blocks, sliced / best unsliced / NCCL): 64 MiB 8 pieces 333-344 / 355-368 /
	// 348-374; 256 MiB 32 pieces 947-1,003 / 1,036-1,196 / 919-965; 1 GiB 32 pieces
	// 3,547-3,625 / 3,770-3,860 / 3,145-3,260 (16 pieces 3,763-3,816).
	deviceDeepPipelineMinBytes = 256 << 20
	deviceDeepPipelineChunks   = 32
	// deviceProgramWaitsMinBytes: device chains from this size run unsliced, with
	// their signals and waits in programs (executor.Call.ProgramWaits: the copy
	// engines copy, a wait spins in a kernel). One rank a GPU, 4 ranks, 32 pieces, µs
	// a call, waits-only / sliced: 1 GiB on 4 x H200 3,451, 3,376 / 3,640, 3,859
	// (RESULTS.md, session 22), 3,456, 3,362 / 3,490, 3,565 and 3,942, 3,445, 3,580 /
	// 3,568, 3,591, 3,567 (session 26: medians 3,451 / 3,568, NCCL's 3,140), on 4 x
	// H100 3,691, 3,384, 3,425 / 3,589, 3,531, 3,529 (session 23: a tie); at 256 MiB
	// waits lost on both (H100 1,033-1,079 / 979-989, H200 1,018-1,060 / 921-938).
	deviceProgramWaitsMinBytes = 1 << 30
	// deviceMidSlicedMinBytes to deviceMidSlicedMaxBytes: on device memory among
	// more than 2 ranks, allgather, alltoall and chain broadcasts of these sizes run
	// sliced (executor.Call.Sliced): each hop then costs µs in a spinning block
	// instead of a stream wait's tens, which sets these sizes' time; from 64 MiB the
	// copy engines' copies win. Measured on 4 x H200, one rank a GPU, stream-ordered
	// calls, A/B in 3 alternating rounds (RESULTS.md, session 27; µs a call with a
	// synchronize each, then with ten in flight, sliced / not): allgather 512 KiB
	// 64-71 / 67-71 and 38-47 / 74-76, 8 MiB 84-87 / 90-92 and 56-66 / 57-84;
	// broadcast 512 KiB 58-60 / 52-72 and 28-36 / 37-144, 8 MiB 96-101 / 101-112 and
	// 61-71 / 73-79; alltoall 512 KiB 66-80 / 62-82 and 43-52 / 67-71, 8 MiB 85-90 /
	// 88-90 and 57-63 / 67-128. Not sliced: reduce-scatter (a call with a synchronize
	// 5-10% slower sliced at 128 KiB-8 MiB), allreduce (no gain), 128 KiB (broadcast
	// and alltoall a call slower), 2 ranks (broadcast 128 KiB-2 MiB 38-69 / 32-36).
	deviceMidSlicedMinBytes = 512 << 10
	deviceMidSlicedMaxBytes = 16 << 20
	// devicePairSlicedMinBytes to devicePairSlicedMaxBytes: on device memory between 2
	// ranks, every collective of these sizes runs sliced, allreduces and broadcasts to
	// devicePairSlicedWideMaxBytes. Measured on 2 x H100, one rank a GPU, stream-ordered
	// calls, 3 alternating rounds (RESULTS.md, session 28; µs, ten in flight, sliced /
	// not): allgather 4 MiB 28-38 / 40-77, 8 MiB 37-42 / 55-65; allreduce 4 MiB 35-46 /
	// 50-69, 8 MiB 50-53 / 57-65, 16 MiB 78-80 / 84-145; alltoall 4 MiB 27-37 / 33-46,
	// 8 MiB 34-43 / 35-55; broadcast 4 MiB 40-47 / 45-52, 8 MiB 47-50 / 53-58, 16 MiB
	// 70-72 / 76-79; reduce-scatter 4 MiB 29-38 / 40-60, 8 MiB 34-46 / 40-62; a call with
	// a synchronize within a few µs either way. Not sliced: 2 MiB and less (mixed; a
	// broadcast of 128 KiB-2 MiB slower a call, session 27), allgather, alltoall and
	// reduce-scatter from 16 MiB (a call 5-25% slower, in flight no gain), 32 MiB (no
	// gain).
	devicePairSlicedMinBytes     = 4 << 20
	devicePairSlicedMaxBytes     = 8 << 20
	devicePairSlicedWideMaxBytes = 16 << 20
)

// choice is a built-in algorithm with its options; sliced asks for sliced device
// programs (executor.Call.Sliced), programWaits for waits-only ones
// (executor.Call.ProgramWaits).
type choice struct {
	name         string
	o            builtin.Options
	sliced       bool
	programWaits bool
}

// builtinChoice picks the built-in algorithm for a request. It depends on the
// request alone, so every rank picks the same.
func builtinChoice(r Request) choice {
	o := builtin.Options{InPlace: r.InPlace, Root: r.Root}
	switch r.Collective {
	case "allreduce":
		if r.Memory == executor.MemoryCUDA {
			if r.Bytes <= deviceDirectMaxBytes {
				return choice{name: "direct", o: o, sliced: midSliced(r)}
			}
			return choice{name: "allpairs", o: o, sliced: midSliced(r)}
		}
		if r.Bytes <= directMaxBytes {
			return choice{name: "direct", o: o}
		}
		if r.Bytes <= allPairsMaxBytes {
			return choice{name: "allpairs", o: o}
		}
		if r.Bytes >= pipelineMinBytes {
			o.Chunks = pipelineChunks
		}
		if r.Bytes >= lanesMinBytes && r.CoresPerRank >= maxLanes {
			o.Lanes = maxLanes
		}
		return choice{name: "ring", o: o}
	case "broadcast":
		deep := r.Memory == executor.MemoryCUDA && r.Ranks > 2 && r.Bytes >= devicePipelineMinBytes
		switch {
		case deep && r.Ranks <= 4 && r.Bytes >= deviceDeepPipelineMinBytes:
			o.Chunks = deviceDeepPipelineChunks
		case deep:
			o.Chunks = devicePipelineChunks
		case r.Bytes >= pipelineMinBytes:
			o.Chunks = pipelineChunks
		}
		if r.Ranks <= 4 {
			waits := deep && r.Bytes >= deviceProgramWaitsMinBytes
			return choice{name: "chain", o: o, sliced: (deep && !waits) || midSliced(r), programWaits: waits}
		}
		return choice{name: "tree", o: o} // (sliced trees: not measured)
	case "reduce":
		return choice{name: "direct", o: o}
	case "alltoall":
		return choice{name: "pairwise", o: o, sliced: midSliced(r)}
	case "allgather":
		return choice{name: "allpairs", o: o, sliced: midSliced(r)}
	}
	return choice{name: "allpairs", o: o, sliced: midSliced(r)} // reduce-scatter
}

// midSliced reports whether a device call is of the sizes that run sliced: among
// more than 2 ranks allgather, alltoall and chain broadcasts from
// deviceMidSlicedMinBytes to deviceMidSlicedMaxBytes; between 2 ranks every
// collective from devicePairSlicedMinBytes to devicePairSlicedMaxBytes, allreduce and
// broadcast to devicePairSlicedWideMaxBytes. (Reduce never asks.)
func midSliced(r Request) bool {
	if r.Memory != executor.MemoryCUDA {
		return false
	}
	if r.Ranks == 2 {
		most := uint64(devicePairSlicedMaxBytes)
		if r.Collective == AllReduce || r.Collective == Broadcast {
			most = devicePairSlicedWideMaxBytes
		}
		return r.Bytes >= devicePairSlicedMinBytes && r.Bytes <= most
	}
	if r.Collective == AllReduce || r.Collective == ReduceScatter {
		return false
	}
	return r.Ranks > 2 && r.Bytes >= deviceMidSlicedMinBytes && r.Bytes <= deviceMidSlicedMaxBytes
}

// errNoPlan: no plan for a collective (an unknown one).
func errNoPlan(r Request) error {
	return fmt.Errorf("collective: no plan for %s on %d ranks: %w", r.Collective, r.Ranks, executor.ErrUnsupported)
}
