package plan

import (
	"fmt"
	"math/bits"
)

// Chunk-to-byte arithmetic, as MSCCL++ 0.9's execution_plan.cc computes it when it
// builds a rank's ops for one call (checkMessageSize, getSizeAndChunks, getOffset,
// getBufferSize, calcOffset/calcSize, calScratchBufferSize, calMaxScratchChunkSize,
// getUpperBoundChunkSize; docs/plan-format.md section 8). Golden tests compare it
// with the real parser's output (testdata/golden). It differs from 0.9 only where
// 0.9 crashes or computes garbage, and says so at each place:
//   - 64-bit arithmetic, overflow-checked; 0.9 stores offsets and lengths in
//     uint32, so the two agree up to 4 GiB per buffer;
//   - a thread-block group split of a ref with fewer alignment units than slices
//     uses MSCCL++'s later formula (empty trailing slices) where 0.9's overlaps;
//   - zero-byte messages give empty spans where 0.9 divides by zero;
//   - the scratch size comes from the call's message sizes, not from the sizes of
//     the allocations holding the buffers (which 0.9 asks the CUDA driver for).

// Span is a byte range of a buffer: [Offset, Offset+Length).
type Span struct {
	Offset, Length uint64
}

// End returns Offset+Length.
func (s Span) End() uint64 { return s.Offset + s.Length }

// PacketSpan returns where an LL packet region keeps its packets: packets are twice
// the size of their payload (LL16: 8 payload bytes in 16, LL8: 4 in 8), so a ref's
// packets lie at twice its byte offset and length. For scratch, the executor adds
// the current scratch half (Layout.ScratchHalfBytes) on top.
func PacketSpan(s Span) Span { return Span{Offset: 2 * s.Offset, Length: 2 * s.Length} }

// Layout is the byte layout of one rank's ops for one call: what 0.9's
// loadExecutionPlan computes from the plan and the input and output sizes. Every
// span in it has been checked to lie inside its buffer. It is read-only once made.
type Layout struct {
	Plan        *Plan
	Rank        int
	InputBytes  uint64 // the send buffer's size, as the call passes it
	OutputBytes uint64 // the receive buffer's size
	// ChunkBytes is the chunk size C = InputBytes / input_chunks (equal to
	// OutputBytes / output_chunks): the same C measures all three buffers.
	ChunkBytes uint64
	// ScratchBytes is the scratch buffer the rank needs. Without reuse_resources it
	// is 0.9's calScratchBufferSize of the message sizes: C · scratch_chunks, twice
	// for LL, twice again for a double scratch buffer, rounded up to the alignment.
	// With reuse_resources (and scratch_chunks > 0) it is DefaultScratchBytes, the
	// executor-wide buffer such plans share.
	ScratchBytes uint64
	// ScratchHalfBytes is the offset of the second half with a double scratch
	// buffer (0.9 uses it on launches whose flag is even), else 0.
	ScratchHalfBytes uint64
	// ScratchUsableBytes is what one launch may use from its base: ScratchBytes, or
	// half of it with a double scratch buffer.
	ScratchUsableBytes uint64
	// ScratchSlotBytes is 0.9's maxScratchChunk: the scratch slot size for
	// reuse_resources plans, whose scratch refs sit at index · ScratchSlotBytes
	// when that is below C and whose pipeline windows wrap at it.
	ScratchSlotBytes uint64

	// Lanes[l][i] is the layout of Plan.Ranks[Rank].Lanes[l].Ops[i].
	Lanes [][]OpLayout
}

// OpLayout is an op's refs in bytes, after the thread-block-group split.
type OpLayout struct {
	Src, Dst []Span // parallel to Op.Src and Op.Dst
	// Iterations is how often a pipeline runs its inner ops:
	// ceil(num_chunks · C / unit_size). 0 for other ops.
	Iterations uint64
	Ops        []OpLayout // a pipeline's inner ops
}

func sizeErr(rank int, format string, args ...any) *PlanError {
	return &PlanError{Rank: rank, Lane: -1, Op: -1, Inner: -1, Msg: fmt.Sprintf(format, args...), Err: ErrMessageSize}
}

// CheckMessageSize checks that rank can run the plan with these input and output
// sizes and returns the chunk size. It is 0.9's checkMessageSize and
// getSizeAndChunks: both sizes multiples of the alignment, their alignment units
// divisible by input_chunks and output_chunks, the message size (the output size
// for "allgather", else the input size) within min and max (inclusive), and equal
// per-chunk sizes.
//
// Errors: a *PlanError wrapping ErrMessageSize; ErrOutOfRange if rank is not one of
// the plan's.
func (p *Plan) CheckMessageSize(rank int, inputBytes, outputBytes uint64) (chunkBytes uint64, err error) {
	if rank < 0 || rank >= len(p.Ranks) {
		return 0, &PlanError{Rank: rank, Lane: -1, Op: -1, Inner: -1, Err: ErrOutOfRange,
			Msg: fmt.Sprintf("rank %d of a %d-rank plan", rank, len(p.Ranks))}
	}
	rk := &p.Ranks[rank]
	a := p.BufferAlignment
	ic, oc := uint64(rk.InputChunks), uint64(rk.OutputChunks)
	if inputBytes%a != 0 || outputBytes%a != 0 || (inputBytes/a)%ic != 0 || (outputBytes/a)%oc != 0 {
		return 0, sizeErr(rank, "input %d and output %d bytes are not multiples of %d-byte alignment units divisible into %d and %d chunks",
			inputBytes, outputBytes, a, ic, oc)
	}
	size := inputBytes
	if p.Collective == "allgather" {
		size = outputBytes
	}
	if size < p.MinMessageBytes || size > p.MaxMessageBytes {
		return 0, sizeErr(rank, "message size %d outside the plan's %d..%d", size, p.MinMessageBytes, p.MaxMessageBytes)
	}
	if inputBytes/ic != outputBytes/oc {
		return 0, sizeErr(rank, "chunk sizes differ: input %d / %d chunks, output %d / %d chunks", inputBytes, ic, outputBytes, oc)
	}
	return inputBytes / ic, nil
}

// scratch is a rank's scratch sizing at one call's sizes.
type scratch struct {
	bytes, half, usable, slot uint64
}

// scratchFor sizes rank r's scratch buffer (0.9's calScratchBufferSize and
// calMaxScratchChunkSize, fed the message sizes).
func (p *Plan) scratchFor(r int, inputBytes uint64) (scratch, bool) {
	rk := &p.Ranks[r]
	sc := uint64(rk.ScratchChunks)
	a := p.BufferAlignment
	var s scratch
	computed := uint64(0) // 0.9's calScratchBufferSize
	if p.ReuseResources && sc > 0 {
		computed = PredefinedScratchBytes
		s.bytes = DefaultScratchBytes
	} else {
		in := min(inputBytes, p.MaxMessageBytes)
		perChunk := in/uint64(rk.InputChunks) + boolInt(in%uint64(rk.InputChunks) != 0)
		size, ok := mul(perChunk, sc)
		if p.UsesPackets() {
			size, ok = mulOK(size, 2, ok)
		}
		if p.DoubleScratch {
			size, ok = mulOK(size, 2, ok)
		}
		size, ok = roundUp(size, a, ok)
		if !ok {
			return s, false
		}
		computed, s.bytes = size, size
	}
	s.usable = s.bytes
	if p.DoubleScratch {
		s.half = s.bytes >> 1
		s.usable = s.bytes >> 1
	}
	if sc > 0 {
		base := computed
		if p.DoubleScratch {
			base /= 2
		}
		s.slot, _ = roundUp(base/sc+boolInt(base%sc != 0), a, true)
	}
	return s, true
}

// Layout computes rank's byte layout for a call with these input and output sizes:
// the chunk size, the scratch sizes, and every op's spans, checking each against
// its buffer. The sizes are those of the call's send and receive buffers; every rank
// of the call must pass the same ones (remote refs are computed, as in 0.9, from
// the local sizes).
//
// Errors: CheckMessageSize's, or a *PlanError wrapping ErrMessageSize when these
// sizes put a span outside its buffer, need more than MaxPipelineIterations, or
// overflow 64 bits.
func (p *Plan) Layout(rank int, inputBytes, outputBytes uint64) (*Layout, error) {
	return p.layout(rank, inputBytes, outputBytes, true)
}

// layout is Layout; with check false it skips the bounds and iteration-count
// checks, leaving the bare arithmetic (for comparing with 0.9 where 0.9 goes out
// of bounds).
func (p *Plan) layout(rank int, inputBytes, outputBytes uint64, check bool) (*Layout, error) {
	c, err := p.CheckMessageSize(rank, inputBytes, outputBytes)
	if err != nil {
		return nil, err
	}
	s, ok := p.scratchFor(rank, inputBytes)
	if !ok {
		return nil, sizeErr(rank, "scratch size overflows 64 bits")
	}
	l := &Layout{
		Plan: p, Rank: rank, InputBytes: inputBytes, OutputBytes: outputBytes, ChunkBytes: c,
		ScratchBytes: s.bytes, ScratchHalfBytes: s.half, ScratchUsableBytes: s.usable, ScratchSlotBytes: s.slot,
	}
	rk := &p.Ranks[rank]
	l.Lanes = make([][]OpLayout, len(rk.Lanes))
	for li := range rk.Lanes {
		ops := rk.Lanes[li].Ops
		l.Lanes[li] = make([]OpLayout, len(ops))
		for oi := range ops {
			w := rankWhere(rank).at("threadblocks").idx(li).at("ops").idx(oi)
			w.lane, w.op = li, oi
			if err := l.layOp(&ops[oi], &l.Lanes[li][oi], nil, 0, check, w); err != nil {
				return nil, err
			}
		}
	}
	return l, nil
}

// layOp computes one op's spans and checks them; pipe is the enclosing pipeline
// (nil at lane level) and iters its iteration count.
func (l *Layout) layOp(op *Op, out *OpLayout, pipe *Op, iters uint64, check bool, w where) error {
	for _, side := range []struct {
		refs  []BufferRef
		spans *[]Span
		field string
	}{{op.Src, &out.Src, "src_buff"}, {op.Dst, &out.Dst, "dst_buff"}} {
		*side.spans = make([]Span, len(side.refs))
		for i := range side.refs {
			ref := &side.refs[i]
			wr := w.at(side.field).idx(i)
			sp, err := l.Span(op, ref)
			if err != nil {
				return withWhere(err, wr)
			}
			(*side.spans)[i] = sp
			if !check {
				continue
			}
			if err := l.checkSpan(op, ref, sp, pipe, iters, wr); err != nil {
				return err
			}
		}
	}
	if op.Code != OpPipeline {
		return nil
	}
	n, ok := mul(uint64(op.Iter.Chunks), l.ChunkBytes)
	if !ok {
		return w.errf(ErrMessageSize, "pipeline length overflows 64 bits")
	}
	out.Iterations = n/op.Iter.UnitBytes + boolInt(n%op.Iter.UnitBytes != 0)
	if check && out.Iterations > MaxPipelineIterations {
		return w.errf(ErrMessageSize, "pipeline needs %d iterations at chunk size %d; MSCCL++ 0.9 counts at most %d",
			out.Iterations, l.ChunkBytes, MaxPipelineIterations)
	}
	out.Ops = make([]OpLayout, len(op.Ops))
	for i := range op.Ops {
		wi := w.at("ops").idx(i)
		wi.inner = i
		if err := l.layOp(&op.Ops[i], &out.Ops[i], op, out.Iterations, check, wi); err != nil {
			return err
		}
	}
	return nil
}

func withWhere(err error, w where) error {
	if pe, ok := err.(*PlanError); ok {
		at := w.errf(pe.Err, "%s", pe.Msg)
		pe.Rank, pe.Lane, pe.Op, pe.Inner, pe.Path = at.Rank, at.Lane, at.Op, at.Inner, at.Path
	}
	return err
}

// Span returns the bytes of one of op's refs at this layout's sizes: offset
// index·C (a reuse_resources scratch ref: index·ScratchSlotBytes when the slot is
// smaller than C), length size·C, then the op's thread-block-group slice of that
// (TBGroupSlice). Local refs are relative to the rank's own buffer, remote refs to
// the owner's, switch refs to the multicast object's: the executor adds no constant
// offsets (0.9 adds where each buffer sits in its allocation; see
// docs/plan-format.md 8.5).
//
// Errors: a *PlanError wrapping ErrMessageSize if the arithmetic overflows.
func (l *Layout) Span(op *Op, ref *BufferRef) (Span, error) {
	c := l.ChunkBytes
	var off uint64
	var ok bool
	if ref.Buffer == BufferScratch && l.Plan.ReuseResources && l.ScratchSlotBytes < c {
		off, ok = mul(uint64(ref.Index), l.ScratchSlotBytes)
	} else {
		off, ok = mul(uint64(ref.Index), c)
	}
	length, ok2 := mul(uint64(ref.Size), c)
	if !ok || !ok2 {
		return Span{}, sizeErr(l.Rank, "reference offset overflows 64 bits")
	}
	g := TBGroupSlice(length, op.Group.ID, op.Group.Size, l.Plan.BufferAlignment)
	if off+g.Offset < off {
		return Span{}, sizeErr(l.Rank, "reference offset overflows 64 bits")
	}
	return Span{Offset: off + g.Offset, Length: g.Length}, nil
}

// TBGroupSlice splits a ref of length bytes among a thread-block group: slice id of
// size, in whole alignment units, the units left over going one each to the first
// slices (0.9's calcOffset and calcSize). Slice i starts at (i·⌊n/size⌋ +
// min(i, n mod size))·alignment, n = ⌊length/alignment⌋. With n ≥ size this is
// exactly 0.9's result; with n < size, 0.9's formula makes slices overlap and
// lengths underflow, and this is MSCCL++'s later fix (commit 2c4cc6f1): the last
// slices are empty. A tail shorter than the alignment belongs to no slice.
func TBGroupSlice(length uint64, id, size int, alignment uint64) Span {
	n := length / alignment
	at := func(i uint64) uint64 {
		q, r := n/uint64(size), n%uint64(size)
		return (i*q + min(i, r)) * alignment
	}
	b, e := at(uint64(id)), at(uint64(id)+1)
	return Span{Offset: b, Length: e - b}
}

// Window returns the part of a ref's span that iteration it of a pipeline works
// on, for an inner op whose code is Windowed: starting o = it·unit_size bytes in
// (for a reuse_resources scratch ref, o mod ScratchSlotBytes: 0.9 wraps windows
// inside the slot), min(span length − o, unit_size) long. Layout has checked that
// o never passes the span's end for it below the pipeline's Iterations.
// Asking for a window that starts past the span's end panics.
func (l *Layout) Window(pipe *Op, ref *BufferRef, span Span, it uint64) Span {
	unit := pipe.Iter.UnitBytes
	o := it * unit
	if it > MaxPipelineIterations || o > span.Length {
		panic(fmt.Sprintf("plan: Window %d of unit %d past the end of a %d-byte span", it, unit, span.Length))
	}
	length := min(span.Length-o, unit)
	if ref.Buffer == BufferScratch && l.Plan.ReuseResources && l.ScratchSlotBytes > 0 {
		o %= l.ScratchSlotBytes
	}
	return Span{Offset: span.Offset + o, Length: length}
}

// BufferBytes returns the size of one of a rank's buffers at this layout's sizes:
// the input and output sizes (every rank is called with the same ones), or what
// one launch may use of the rank's scratch.
func (l *Layout) BufferBytes(rank int, b BufferType) uint64 {
	switch b {
	case BufferInput:
		return l.InputBytes
	case BufferOutput:
		return l.OutputBytes
	}
	if rank == l.Rank {
		return l.ScratchUsableBytes
	}
	s, ok := l.Plan.scratchFor(rank, l.InputBytes)
	if !ok {
		return 0
	}
	return s.usable
}

// checkSpan checks that a ref's bytes, as the op will touch them, lie inside its
// buffer: the packet region for packet refs, each window inside a pipeline.
func (l *Layout) checkSpan(op *Op, ref *BufferRef, sp Span, pipe *Op, iters uint64, w where) error {
	region := sp
	if ref.Packet {
		if sp.Offset > 1<<63-1 || sp.Length > 1<<63-1 {
			return w.errf(ErrMessageSize, "packet region overflows 64 bits")
		}
		region = PacketSpan(sp)
	}
	end := region.Offset + region.Length
	if end < region.Offset {
		return w.errf(ErrMessageSize, "reference end overflows 64 bits")
	}
	if pipe != nil && op.Code.Windowed() && iters > 0 {
		unit := pipe.Iter.UnitBytes
		last := (iters - 1) * unit // no overflow: iters·unit < num_chunks·C + unit
		if last > sp.Length {
			return w.errf(ErrMessageSize, "pipeline window at byte %d of a %d-byte reference: 0.9's length underflows there", last, sp.Length)
		}
		if ref.Buffer == BufferScratch && l.Plan.ReuseResources && l.ScratchSlotBytes > 0 && iters*unit > l.ScratchSlotBytes {
			// Windows wrap inside the slot: bound the highest one (its start is
			// at most slot - gcd(unit, slot) past the span's offset).
			g := gcd(unit, l.ScratchSlotBytes)
			end = sp.Offset + l.ScratchSlotBytes - g + min(unit, sp.Length)
			if end < sp.Offset {
				return w.errf(ErrMessageSize, "pipeline window overflows 64 bits")
			}
		} else {
			end = sp.Offset + min(sp.Length, iters*unit)
		}
	}
	owners := []int{ref.Rank}
	if ref.Kind == RefSwitch {
		owners = l.Plan.Ranks[ref.Rank].SwitchChannels[ref.SwitchChannel].Ranks
	}
	for _, o := range owners {
		if limit := l.BufferBytes(o, ref.Buffer); end > limit {
			return w.errf(ErrMessageSize, "bytes %d..%d of rank %d's %s buffer, which holds %d at input %d, output %d",
				region.Offset, end, o, ref.Buffer, limit, l.InputBytes, l.OutputBytes)
		}
	}
	return nil
}

func mul(a, b uint64) (uint64, bool) {
	hi, lo := bits.Mul64(a, b)
	return lo, hi == 0
}

func mulOK(a, b uint64, ok bool) (uint64, bool) {
	v, ok2 := mul(a, b)
	return v, ok && ok2
}

// roundUp rounds v up to a multiple of a (a > 0).
func roundUp(v, a uint64, ok bool) (uint64, bool) {
	r := v % a
	if r == 0 {
		return v, ok
	}
	s := v + (a - r)
	return s, ok && s > v
}

func boolInt(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
