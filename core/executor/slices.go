package executor

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/core/plan"
)

// Sliced calls: large device calls whose GPU lanes run as programs of many thread
// blocks, each block running the lane's whole op list on its own slice of every copy
// and reduction, with its own word of every counter. A copy engine moves one piece
// of a pipeline at a time, and a stream wait that is not yet met when its stream
// reaches it notices the signal tens of µs late (RESULTS.md, session 20): a chain of
// small pieces pays both at every hop. In a sliced program the blocks' copies run on
// the SMs and every wait spins in its block, so a piece moves as soon as its signal
// lands: NCCL's way (its kernels' channels each move a slice of every step).
//
// Why blocks need no barrier between them: every region of every rank's buffers that
// an op writes is, where any other op touches it, touched with exactly the same
// offset and length (sliceable checks the whole plan, every rank's lanes, at the
// call's sizes), and block b of every op takes the same part of an extent: the
// bytes [lo, hi) that slice_bounds (kernels/program.cu) gives. So block b's ops only
// ever touch what block b's ops wrote, on every rank, and the blocks run G copies of
// the plan, each on its slice, ordered by their own signals: block b's signal is
// written into word b of the peer's counter and block b's wait watches word b of its
// own. Host waits (where the lanes do not wait on the device) watch every word.
//
// Slicing pays where a pipeline's hops cost more than its copies: a chain of 4 GPUs
// in 32 pieces moved 1 GiB in 3.55-3.62 ms sliced against 3.77-3.86 in its best
// unsliced form (4 x H100; RESULTS.md, session 21). Where one copy engine's copy
// moves a whole block, the SMs' copies are slower (0.88-0.94x of it between two
// GPUs), so calls are sliced where their caller asks (Call.Sliced: the built-in
// broadcast chain's rule, core/collective) or, for measuring and tests, every
// sliceable call from UCXGO_SLICED_MIN_BYTES.
//
// Every rank decides alike: the decision depends on the call (its request), the
// plan, the sizes and the knobs, and goes into the call's fingerprint, so ranks
// whose knobs differ fail the call with ErrMismatch instead of waiting for words
// nobody writes.

const (
	// maxSlices is the most blocks a sliced program runs on: each counter has a word
	// for each.
	maxSlices = 64
	// sliceWordBytes is the distance between a counter's words: a sharedWord each,
	// the value and, after it, the count of its sleepers.
	sliceWordBytes = 16
	// counterBytes is the room of one counter in a context's segment: its words,
	// one per slice (word 0 the counter of unsliced calls and host memory), a
	// multiple of the cache line.
	counterBytes = maxSlices * sliceWordBytes
	// sliceAlign: every slice but an extent's last starts and ends on a multiple of
	// it (every element size divides it; kernels/program.cu's slice_bounds).
	sliceAlign = 16
	// defaultSlicedBlocks is how many blocks a sliced program runs on: 32 and 64
	// moved the chain alike (64 MiB-1 GiB, 4 x H100), 16 less.
	defaultSlicedBlocks = 32
	// neverSliced: UCXGO_SLICED_MIN_BYTES's default, no call that large.
	neverSliced = math.MaxUint64
)

var (
	// slicedBlocks is defaultSlicedBlocks, or UCXGO_SLICED_BLOCKS (0 or 1 turns
	// sliced calls off), at most maxSlices.
	slicedBlocks = int(min(envBytes("UCXGO_SLICED_BLOCKS", defaultSlicedBlocks), maxSlices))
	// slicedMinBytes, from UCXGO_SLICED_MIN_BYTES: every sliceable device call at
	// least this large is sliced, asked or not.
	slicedMinBytes = envBytes("UCXGO_SLICED_MIN_BYTES", neverSliced)
)

// counterOffset is where counter k's first word sits in a context's segment.
func counterOffset(k uint64) uint64 { return k * counterBytes }

// at is the counter's word of slice b, w being its first.
func (w sharedWord) at(b int) sharedWord {
	off := uintptr(b) * sliceWordBytes
	return sharedWord{v: (*uint64)(unsafe.Add(unsafe.Pointer(w.v), off)), waiters: (*uint32)(unsafe.Add(unsafe.Pointer(w.waiters), off))}
}

// slicesFor is how many blocks c's device programs run on: slicedBlocks for a device
// call with programs on that asks for it (or is at least slicedMinBytes), with fixed
// sizes and a sliceable plan; else 0 (an unsliced call).
func (x *Executor) slicesFor(c Call, l *plan.Layout) uint8 {
	if c.Memory != MemoryCUDA || !devicePrograms || slicedBlocks < 2 || c.Blocks != nil ||
		!c.Sliced && max(c.Send.Bytes, c.Recv.Bytes) < slicedMinBytes {
		return 0
	}
	k := layoutKey{c.Plan, l.InputBytes, l.OutputBytes}
	ok, seen := x.sliceables[k]
	if !seen {
		ok = sliceable(c.Plan, l.InputBytes, l.OutputBytes)
		if x.sliceables == nil || len(x.sliceables) >= maxLayouts {
			x.sliceables = make(map[layoutKey]bool)
		}
		x.sliceables[k] = ok
	}
	if !ok {
		return 0
	}
	return uint8(slicedBlocks)
}

// access is one op's touch of a rank's buffer.
type access struct {
	span  plan.Span
	write bool
}

// bufferKey names a rank's buffer.
type bufferKey struct {
	rank int
	buf  plan.BufferType
}

// sliceable reports whether p's calls of these sizes may run sliced: every op of
// every rank is one a device program runs (copies, puts, gets, reductions, signals,
// waits, and barriers, semaphores and nops, which the lanes take on the host), and
// any two extents of one buffer of which one is written are the same or disjoint.
func sliceable(p *plan.Plan, in, out uint64) bool {
	touched := make(map[bufferKey][]access)
	for q := range p.Ranks {
		l, err := p.Layout(q, in, out)
		if err != nil {
			return false
		}
		for li := range p.Ranks[q].Lanes {
			ops := p.Ranks[q].Lanes[li].Ops
			for oi := range ops {
				if !collectAccesses(l, &ops[oi], &l.Lanes[li][oi], nil, 0, touched) {
					return false
				}
			}
		}
	}
	for _, as := range touched {
		if !consistentExtents(as) {
			return false
		}
	}
	return true
}

// collectAccesses adds op's touches (pipelines: every iteration's) to touched; false
// for an op a sliced program cannot run.
func collectAccesses(l *plan.Layout, op *plan.Op, ol *plan.OpLayout, pipe *plan.Op, it uint64, touched map[bufferKey][]access) bool {
	span := func(refs []plan.BufferRef, spans []plan.Span, i int) plan.Span {
		sp := spans[i]
		if pipe != nil && op.Code.Windowed() {
			sp = l.Window(pipe, &refs[i], sp, it)
		}
		return sp
	}
	add := func(ref *plan.BufferRef, sp plan.Span, write bool) {
		if sp.Length == 0 {
			return
		}
		k := bufferKey{ref.Rank, ref.Buffer} // the owner (Parse resolved remote refs)
		touched[k] = append(touched[k], access{sp, write})
	}
	// copied adds a copy of n bytes from s to d (a put's length is its destination's,
	// a get's and a copy's their source's, as gpuOp moves them).
	copied := func(src, dst *plan.BufferRef, s, d plan.Span, n uint64) {
		s.Length, d.Length = n, n
		add(src, s, false)
		add(dst, d, true)
	}
	switch op.Code {
	case plan.OpNop, plan.OpFlush, plan.OpBarrier, plan.OpSemAcquire, plan.OpSemRelease,
		plan.OpSignal, plan.OpRelaxedSignal, plan.OpWait, plan.OpRelaxedWait:
		return true
	case plan.OpPut, plan.OpPutWithSignal, plan.OpPutWithSignalAndFlush:
		for i := range op.Dst {
			d := span(op.Dst, ol.Dst, i)
			copied(&op.Src[i], &op.Dst[i], span(op.Src, ol.Src, i), d, d.Length)
		}
		return true
	case plan.OpGet:
		for i := range op.Src {
			s := span(op.Src, ol.Src, i)
			copied(&op.Src[i], &op.Dst[i], s, span(op.Dst, ol.Dst, i), s.Length)
		}
		return true
	case plan.OpCopy:
		s := span(op.Src, ol.Src, 0)
		copied(&op.Src[0], &op.Dst[0], s, span(op.Dst, ol.Dst, 0), s.Length)
		return true
	case plan.OpReduce, plan.OpReduceSend, plan.OpReadReduce, plan.OpReadReduceSend:
		// As gpuReduce: n is the first source's length; every source, dst[0] and the
		// sends' destinations are n bytes.
		n := span(op.Src, ol.Src, 0).Length
		for k := range op.Src {
			sp := span(op.Src, ol.Src, k)
			sp.Length = n
			add(&op.Src[k], sp, false)
		}
		for k := range op.Dst {
			if k > 0 && op.Code != plan.OpReduceSend && op.Code != plan.OpReadReduceSend {
				break
			}
			sp := span(op.Dst, ol.Dst, k)
			sp.Length = n
			add(&op.Dst[k], sp, true)
		}
		return true
	case plan.OpPipeline:
		for i := uint64(0); i < ol.Iterations; i++ {
			for j := range op.Ops {
				if !collectAccesses(l, &op.Ops[j], &ol.Ops[j], op, i, touched) {
					return false
				}
			}
		}
		return true
	}
	return false // packets, multicast: not on device programs
}

// consistentExtents reports whether every written extent among as is, where it meets
// any other, the same extent.
func consistentExtents(as []access) bool {
	var writes []plan.Span
	for _, a := range as {
		if a.write {
			writes = append(writes, a.span)
		}
	}
	if len(writes) == 0 {
		return true
	}
	slices.SortFunc(writes, func(a, b plan.Span) int {
		return cmp.Or(cmp.Compare(a.Offset, b.Offset), cmp.Compare(a.Length, b.Length))
	})
	// Distinct written extents must not overlap.
	u := writes[:1]
	for _, w := range writes[1:] {
		last := u[len(u)-1]
		if w == last {
			continue
		}
		if w.Offset < last.End() {
			return false
		}
		u = append(u, w)
	}
	// A read meeting a written extent must be that extent.
	for _, a := range as {
		if a.write {
			continue
		}
		i := sort.Search(len(u), func(i int) bool { return u[i].Offset >= a.span.Offset })
		for j := max(i-1, 0); j < len(u) && u[j].Offset < a.span.End(); j++ {
			if u[j].End() > a.span.Offset && u[j] != a.span {
				return false
			}
		}
	}
	return true
}
