package executor

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/core/plan"
	"github.com/ucxx-go/ucxx-go/core/reduce"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// A lane runs its ops in order on one goroutine (MSCCL++: one thread block). Data
// ops move bytes synchronously: a local or mapped range with memmove, a peer's own
// buffer with process_vm_readv/writev; so when an op returns its writes are done,
// and a later signal (an atomic add, a full barrier) publishes them. Flush and nop
// have nothing left to do.

// laneRun is one lane's state during a call.
type laneRun struct {
	r    *callRun
	id   int
	lane *plan.Lane
	rk   *plan.Rank
	// tmp is room (C memory, tmpBytes, freed when the lane ends) for peer data a
	// reduction reads through process_vm_readv.
	tmp, tmp2 unsafe.Pointer
	// stream is a GPU lane's CUDA stream.
	stream uintptr
	// srcs is room for a reduction's source addresses (no allocation for up to 16).
	srcs [16]uintptr
	// wordOps is room for a GPU lane's signals and waits of one op, queued in one
	// driver call (gpuWordOps), and wordArgs for that call's arguments.
	wordOps  []ucxx.StreamWordOp
	wordArgs []uint64
	// prog, when not nil, records the GPU lane's copies, reductions, signals and
	// device waits for one kernel launch instead of queueing them (program.go).
	prog *deviceProgram
}

// tmpBytes is the block size of reductions over peer buffers read with
// process_vm_readv: small enough to stay in cache between the read and the reduce.
const tmpBytes = 256 << 10

func (r *callRun) runLane(li int) {
	lr := r.newLane(li)
	defer lr.free()
	lr.run(r.ctx.skip[li], false)
}

// newLane returns lane li's state: for lane 0, which runs on the calling goroutine,
// the executor's own (one call at a time), so that a one-lane call allocates none.
// Not inlined: the state's literal (over 300 bytes) would stay in runLane's frame,
// under every op of a lane whose goroutine starts each call with a small stack.
//
//go:noinline
func (r *callRun) newLane(li int) *laneRun {
	rk := &r.c.Plan.Ranks[r.me]
	if li == 0 {
		lr := &r.x.lane0
		*lr = laneRun{r: r, id: li, lane: &rk.Lanes[li], rk: rk}
		return lr
	}
	return &laneRun{r: r, id: li, lane: &rk.Lanes[li], rk: rk}
}

// free frees the lane's C memory.
func (lr *laneRun) free() {
	for _, p := range []unsafe.Pointer{lr.tmp, lr.tmp2} {
		if p != nil {
			ucxx.CFree(p)
		}
	}
}

// run runs the lane's ops from op from on, in order; with toWait it stops before
// the first op that may wait for another lane or rank (a wait, a barrier, a
// semaphore acquire, a pipeline) and returns its index. It returns len(ops) once
// the lane ended (or failed: the call's failure records why).
func (lr *laneRun) run(from int, toWait bool) int {
	r, ops := lr.r, lr.lane.Ops
	for oi := from; oi < len(ops); oi++ {
		if toWait && mayWait(ops[oi].Code) {
			return oi
		}
		if r.scope.aborted.Load() {
			return len(ops)
		}
		if err := lr.op(&ops[oi], &r.l.Lanes[lr.id][oi], nil, 0); err != nil {
			r.fail(lr.locate(err, oi, &ops[oi]))
			return len(ops)
		}
	}
	return len(ops)
}

// mayWait reports whether an op of this code may wait for another lane or rank.
func mayWait(c plan.OpCode) bool {
	switch c {
	case plan.OpWait, plan.OpRelaxedWait, plan.OpBarrier, plan.OpSemAcquire, plan.OpPipeline:
		return true
	}
	return c.Packet()
}

// locate says where a failure happened: rank, lane, op index and name.
func (lr *laneRun) locate(err error, oi int, op *plan.Op) error {
	where := fmt.Sprintf("lane %d op %d (%s)", lr.id, oi, op.Code)
	var re *RankError
	if errors.As(err, &re) {
		re.Op = where + ": " + re.Op
		return err
	}
	if errors.Is(err, errAborted) {
		return err
	}
	return fmt.Errorf("executor: rank %d %s: %w", lr.r.me, where, err)
}

// op runs one op; pipe and it are the enclosing pipeline and its iteration.
func (lr *laneRun) op(op *plan.Op, ol *plan.OpLayout, pipe *plan.Op, it uint64) error {
	r := lr.r
	switch op.Code {
	case plan.OpNop, plan.OpFlush:
		return nil
	case plan.OpBarrier:
		return r.ctx.barriers[op.BarrierID].arrive(op.BarrierCount, r, op.BarrierID)
	case plan.OpSemAcquire:
		for _, id := range op.SemaphoreIDs {
			if err := r.ctx.sems[id].acquire(r, id); err != nil {
				return err
			}
		}
		return nil
	case plan.OpSemRelease:
		for _, id := range op.SemaphoreIDs {
			r.ctx.sems[id].release()
		}
		return nil
	case plan.OpSignal, plan.OpRelaxedSignal:
		for _, id := range op.ChannelIDs {
			lr.signal(op.Channel, id)
		}
		return nil
	case plan.OpWait, plan.OpRelaxedWait:
		for _, id := range op.ChannelIDs {
			if err := lr.wait(op.Channel, id); err != nil {
				return err
			}
		}
		return nil
	case plan.OpPut, plan.OpPutWithSignal, plan.OpPutWithSignalAndFlush:
		for i := range op.Dst {
			src := lr.span(op, op.Src, ol.Src, i, pipe, it)
			dst := lr.span(op, op.Dst, ol.Dst, i, pipe, it)
			if err := lr.write(&op.Dst[i], dst, lr.local(op.Src[i].Buffer, src), dst.Length); err != nil {
				return err
			}
		}
		if op.Code != plan.OpPut {
			for _, id := range op.ChannelIDs {
				lr.signal(op.Channel, id)
			}
		}
		return nil
	case plan.OpGet:
		for i := range op.Src {
			src := lr.span(op, op.Src, ol.Src, i, pipe, it)
			dst := lr.span(op, op.Dst, ol.Dst, i, pipe, it)
			if err := lr.read(&op.Src[i], src, lr.local(op.Dst[i].Buffer, dst), src.Length); err != nil {
				return err
			}
		}
		return nil
	case plan.OpCopy:
		src := lr.span(op, op.Src, ol.Src, 0, pipe, it)
		dst := lr.span(op, op.Dst, ol.Dst, 0, pipe, it)
		move(lr.local(op.Dst[0].Buffer, dst), lr.local(op.Src[0].Buffer, src), src.Length)
		return nil
	case plan.OpReduce, plan.OpReduceSend, plan.OpReadReduce, plan.OpReadReduceSend:
		return lr.reduce(op, ol, pipe, it)
	case plan.OpCopyPackets, plan.OpPutPackets, plan.OpReadPutPackets, plan.OpUnpackPackets, plan.OpReducePackets,
		plan.OpReduceSendPackets, plan.OpReduceCopyPackets, plan.OpReduceCopySendPackets:
		if pipe != nil {
			return fmt.Errorf("packet op %q inside a pipeline: %w", op.Code, ErrUnsupported)
		}
		return lr.packets(op, ol)
	case plan.OpMultiLoadReduceStore:
		return lr.multiLoadReduceStore(op, ol, pipe, it)
	case plan.OpPipeline:
		for i := uint64(0); i < ol.Iterations; i++ {
			for j := range op.Ops {
				if err := lr.op(&op.Ops[j], &ol.Ops[j], op, i); err != nil {
					return fmt.Errorf("pipeline iteration %d, inner op %d (%s): %w", i, j, op.Ops[j].Code, err)
				}
			}
		}
		return nil
	}
	return fmt.Errorf("op %q on host memory: %w", op.Code, ErrUnsupported)
}

// span is ref i's bytes, the pipeline's window of them for a windowed inner op; for a
// plan with per-call blocks, the block's bytes from its owner's table.
func (lr *laneRun) span(op *plan.Op, refs []plan.BufferRef, spans []plan.Span, i int, pipe *plan.Op, it uint64) plan.Span {
	if lr.r.c.Blocks != nil {
		return lr.r.blockSpan(lr.rk, &refs[i])
	}
	sp := spans[i]
	if pipe != nil && op.Code.Windowed() {
		sp = lr.r.l.Window(pipe, &refs[i], sp, it)
	}
	return sp
}

// scratchHalf is where this launch's half of a double scratch buffer starts in a
// rank's scratch (0.9: the upper half on launches with an even flag). Contexts of
// plans that run unannounced alternate the same way between halves of fixed place,
// the context's two halves: calls of other sizes must not move the boundary, or a
// call would write where the peer's previous call still reads.
func (r *callRun) scratchHalf(rank int) uint64 {
	switch {
	case r.flag%2 != 0:
		return 0
	case r.ctx.alternate && rank == r.me:
		return r.ctx.capacity / 2
	case r.ctx.alternate:
		return r.ctx.peerCaps[rank] / 2
	case r.c.Plan.DoubleScratch:
		return r.l.BufferBytes(rank, plan.BufferScratch)
	}
	return 0
}

// local is the address of a span of one of this rank's buffers (Layout checked it
// lies inside).
func (lr *laneRun) local(b plan.BufferType, sp plan.Span) uintptr {
	r := lr.r
	switch b {
	case plan.BufferInput:
		return r.c.Send.Addr + uintptr(sp.Offset)
	case plan.BufferOutput:
		return r.c.Recv.Addr + uintptr(sp.Offset)
	}
	if r.cuda != nil {
		return r.ctx.gpu.scratch + uintptr(r.scratchHalf(r.me)+sp.Offset)
	}
	return r.ctx.scratch + uintptr(r.scratchHalf(r.me)+sp.Offset)
}

// peerRange is where a remote ref's bytes are: mapped here (scratch), or at addr in
// the peer's process.
type peerRange struct {
	rank   int
	mapped uintptr
	pid    int
	addr   uintptr
}

// remote resolves a remote ref's span, checking it against the peer's buffer as the
// peer announced it.
func (lr *laneRun) remote(ref *plan.BufferRef, sp plan.Span) (peerRange, error) {
	rb := &lr.rk.RemoteBuffers[ref.RemoteBuffer]
	return lr.at(rb.Rank, rb.Buffer, sp)
}

// at resolves a span of rank q's buffer b: this rank's own (mapped, at its local
// address), a peer's scratch (mapped) or a peer's input or output (in its process).
func (lr *laneRun) at(q int, b plan.BufferType, sp plan.Span) (peerRange, error) {
	r := lr.r
	pr := peerRange{rank: q}
	if sp.Length == 0 {
		return pr, nil // nothing to reach (a peer may have no buffer at all)
	}
	if q == r.me {
		pr.mapped = lr.local(b, sp)
		return pr, nil
	}
	switch b {
	case plan.BufferScratch:
		half, limit := r.scratchHalf(q), r.ctx.peerCaps[q]
		if r.ctx.alternate {
			limit = half + r.ctx.peerCaps[q]/2 // the end of this call's half
		}
		if r.ctx.peers[q] == nil || half+sp.End() > limit || sp.End() < sp.Offset {
			return pr, &RankError{Rank: q, Op: fmt.Sprintf("scratch bytes %d..%d", half+sp.Offset, half+sp.End()),
				Err: fmt.Errorf("outside the %d bytes the rank announced: %w", r.ctx.peerCaps[q], ErrPeerProtocol)}
		}
		if r.cuda != nil {
			if r.ctx.gpu.peerScratch[q] == 0 {
				return pr, &RankError{Rank: q, Op: "scratch", Err: fmt.Errorf("the rank has no device scratch: %w", ErrPeerProtocol)}
			}
			pr.mapped = r.ctx.gpu.peerScratch[q] + uintptr(half+sp.Offset)
			return pr, nil
		}
		pr.mapped = r.ctx.peers[q].base() + uintptr(scratchOff(r.c.Plan, q)+half+sp.Offset)
		return pr, nil
	case plan.BufferInput, plan.BufferOutput:
		buf := r.peers[q].in
		if b == plan.BufferOutput {
			buf = r.peers[q].out
		}
		if sp.End() > buf.Bytes || sp.End() < sp.Offset {
			return pr, &RankError{Rank: q, Op: fmt.Sprintf("%s bytes %d..%d", b, sp.Offset, sp.End()),
				Err: fmt.Errorf("outside the rank's %d-byte buffer: %w", buf.Bytes, ErrPeerProtocol)}
		}
		if r.cuda != nil {
			base := r.cuda.in[q]
			if b == plan.BufferOutput {
				base = r.cuda.out[q]
			}
			if base == 0 {
				return pr, &RankError{Rank: q, Op: fmt.Sprintf("its %s buffer", b), Err: fmt.Errorf("not opened (not a connected peer): %w", ErrPeerProtocol)}
			}
			pr.mapped = base + uintptr(sp.Offset)
			return pr, nil
		}
		pr.pid, pr.addr = r.x.board.pids[q], buf.Addr+uintptr(sp.Offset)
		return pr, nil
	}
	return pr, fmt.Errorf("buffer type %v: %w", b, ErrUnsupported)
}

// peerErr turns a process_vm_readv/writev failure into the peer's error.
func peerErr(pr peerRange, what string, err error) error {
	switch {
	case errors.Is(err, syscall.ESRCH):
		err = fmt.Errorf("the rank's process ended: %w", ErrRankFailed)
	case errors.Is(err, syscall.EFAULT):
		err = fmt.Errorf("the rank's buffer is not mapped in its process: %w", ErrPeerProtocol)
	}
	return &RankError{Rank: pr.rank, Op: what, Err: err}
}

// write copies n bytes from local src to a remote ref's span.
func (lr *laneRun) write(ref *plan.BufferRef, sp plan.Span, src uintptr, n uint64) error {
	pr, err := lr.remote(ref, plan.Span{Offset: sp.Offset, Length: n})
	if err != nil {
		return err
	}
	return pr.write(src, n)
}

// write copies n bytes from local src to the range.
func (pr peerRange) write(src uintptr, n uint64) error {
	if n == 0 {
		return nil
	}
	if pr.mapped != 0 {
		move(pr.mapped, src, n)
		return nil
	}
	if err := vmWrite(pr.pid, src, pr.addr, n); err != nil {
		return peerErr(pr, "write", err)
	}
	return nil
}

// read copies n bytes of a remote ref's span to local dst.
func (lr *laneRun) read(ref *plan.BufferRef, sp plan.Span, dst uintptr, n uint64) error {
	pr, err := lr.remote(ref, plan.Span{Offset: sp.Offset, Length: n})
	if err != nil {
		return err
	}
	return pr.read(dst, n)
}

// read copies n bytes of the range to local dst.
func (pr peerRange) read(dst uintptr, n uint64) error {
	if n == 0 {
		return nil
	}
	if pr.mapped != 0 {
		move(dst, pr.mapped, n)
		return nil
	}
	if err := vmRead(pr.pid, dst, pr.addr, n); err != nil {
		return peerErr(pr, "read", err)
	}
	return nil
}

// channel resolves a lane channel id of type t: the rank-level index and channel.
func (lr *laneRun) channel(t plan.ChannelType, id int) (int, plan.Channel) {
	idx := lr.lane.ChannelList(t)[id]
	return idx, lr.rk.Channels(t)[idx]
}

// signal adds one to the counter, at the peer, of the channel paired with ours.
func (lr *laneRun) signal(t plan.ChannelType, id int) {
	r := lr.r
	_, ch := lr.channel(t, id)
	r.ctx.counter(ch.Peer, counterIndex(r.c.Plan, ch.Peer, t, ch.Reverse), r.me).add(1)
}

// wait consumes the next signal of a channel.
func (lr *laneRun) wait(t plan.ChannelType, id int) error {
	r := lr.r
	idx, ch := lr.channel(t, id)
	k := counterIndex(r.c.Plan, r.me, t, idx)
	want := atomic.AddUint64(&r.ctx.expected[k], 1)
	return r.scope.until(r.ctx.counter(r.me, k, r.me), func(v uint64) bool { return v >= want }, ch.Peer,
		func() string { return fmt.Sprintf("waiting for signal %d on %s channel %d", want, t, idx) })
}

// reduceOp is the operator of a reduction op: the call's, else the op's reduce_op.
func (r *callRun) reduceOp(op *plan.Op) reduce.Op {
	if r.c.Op != 0 {
		return r.c.Op
	}
	switch op.Reduce {
	case plan.ReduceMin:
		return reduce.Min
	case plan.ReduceMax:
		return reduce.Max
	}
	return reduce.Sum
}

// reduction is what a reduction op works with: the element type and operator, its
// length (whole elements) and dst[0]'s and src[0]'s addresses.
func (lr *laneRun) reduction(op *plan.Op, ol *plan.OpLayout, pipe *plan.Op, it uint64) (t reduce.DType, rop reduce.Op, n uint64, dst, a uintptr, err error) {
	t, rop = lr.r.c.DType, lr.r.reduceOp(op)
	src0 := lr.span(op, op.Src, ol.Src, 0, pipe, it)
	dst0 := lr.span(op, op.Dst, ol.Dst, 0, pipe, it)
	n = src0.Length
	if n%t.Size() != 0 {
		return t, rop, 0, 0, 0, fmt.Errorf("a %d-byte reduction of %d-byte %s elements: %w", n, t.Size(), t, plan.ErrMessageSize)
	}
	return t, rop, n, lr.local(op.Dst[0].Buffer, dst0), lr.local(op.Src[0].Buffer, src0), nil
}

// reduce runs re, res, rre and rres: dst[0] = src[0] op src[1] op ..., the sources
// after the first local (re, res) or remote (rre, rres), then for res and rres the
// result stored to every remote dst[k], k >= 1.
func (lr *laneRun) reduce(op *plan.Op, ol *plan.OpLayout, pipe *plan.Op, it uint64) error {
	t, rop, n, dst, a, err := lr.reduction(op, ol, pipe, it)
	if err != nil || n == 0 {
		return err
	}
	remoteSrc := op.Code == plan.OpReadReduce || op.Code == plan.OpReadReduceSend
	if !remoteSrc {
		// Every source of an element read before its result is stored (dst may be
		// any source, as in MSCCL++'s kernels): one fold over them all.
		srcs := append(lr.srcs[:0], a)
		for k := 1; k < len(op.Src); k++ {
			sp := lr.span(op, op.Src, ol.Src, k, pipe, it)
			srcs = append(srcs, lr.local(op.Src[k].Buffer, sp))
		}
		if err := reduce.ReduceMany(dst, srcs, n/t.Size(), t, rop); err != nil {
			return err
		}
		return lr.reduceSend(op, ol, pipe, it, dst, n)
	}
	if len(op.Src) == 1 {
		move(dst, a, n)
	}
	for k := 1; k < len(op.Src); k++ {
		sp := lr.span(op, op.Src, ol.Src, k, pipe, it)
		sp.Length = n
		first := a
		if k > 1 {
			first = dst
		}
		if !remoteSrc {
			if err := reduce.Reduce(dst, first, lr.local(op.Src[k].Buffer, sp), n/t.Size(), t, rop); err != nil {
				return err
			}
			continue
		}
		pr, err := lr.remote(&op.Src[k], sp)
		if err != nil {
			return err
		}
		if pr.mapped != 0 {
			if err := reduce.Reduce(dst, first, pr.mapped, n/t.Size(), t, rop); err != nil {
				return err
			}
			continue
		}
		if lr.tmp == nil {
			lr.tmp = ucxx.CMalloc(tmpBytes)
		}
		tmp := uintptr(lr.tmp)
		block := uint64(tmpBytes) / t.Size() * t.Size()
		for off := uint64(0); off < n; off += block {
			m := min(block, n-off)
			if err := vmRead(pr.pid, tmp, pr.addr+uintptr(off), m); err != nil {
				return peerErr(pr, "read", err)
			}
			if err := reduce.Reduce(dst+uintptr(off), first+uintptr(off), tmp, m/t.Size(), t, rop); err != nil {
				return err
			}
		}
	}
	return lr.reduceSend(op, ol, pipe, it, dst, n)
}

// reduceSend stores a reduction's n-byte result at dst to the remote destinations
// of res and rres (dst[1..]).
func (lr *laneRun) reduceSend(op *plan.Op, ol *plan.OpLayout, pipe *plan.Op, it uint64, dst uintptr, n uint64) error {
	if op.Code != plan.OpReduceSend && op.Code != plan.OpReadReduceSend {
		return nil
	}
	for k := 1; k < len(op.Dst); k++ {
		if err := lr.write(&op.Dst[k], lr.span(op, op.Dst, ol.Dst, k, pipe, it), dst, n); err != nil {
			return err
		}
	}
	return nil
}

// multiLoadReduceStore is glres without multicast hardware: for each block of the
// span, every group rank's source read and reduced here, the result stored to every
// group rank's destination (what multimem.ld_reduce and multimem.st do in the
// switch). The plan's signals order it against the ranks' other accesses, as they
// must on NVSwitch.
func (lr *laneRun) multiLoadReduceStore(op *plan.Op, ol *plan.OpLayout, pipe *plan.Op, it uint64) error {
	r := lr.r
	t, rop := r.c.DType, r.reduceOp(op)
	src := lr.span(op, op.Src, ol.Src, 0, pipe, it)
	dst := lr.span(op, op.Dst, ol.Dst, 0, pipe, it)
	n := src.Length
	if n%t.Size() != 0 {
		return fmt.Errorf("a %d-byte reduction of %d-byte %s elements: %w", n, t.Size(), t, plan.ErrMessageSize)
	}
	in := &lr.rk.SwitchChannels[op.Src[0].SwitchChannel]
	out := &lr.rk.SwitchChannels[op.Dst[0].SwitchChannel]
	if lr.tmp == nil {
		lr.tmp = ucxx.CMalloc(tmpBytes)
	}
	if lr.tmp2 == nil {
		lr.tmp2 = ucxx.CMalloc(tmpBytes)
	}
	acc, tmp := uintptr(lr.tmp), uintptr(lr.tmp2)
	block := uint64(tmpBytes) / t.Size() * t.Size()
	for off := uint64(0); off < n; off += block {
		m := min(block, n-off)
		for i, q := range in.Ranks {
			pr, err := lr.at(q, in.Buffer, plan.Span{Offset: src.Offset + off, Length: m})
			if err != nil {
				return err
			}
			into := acc
			if i > 0 {
				into = tmp
			}
			if err := pr.read(into, m); err != nil {
				return err
			}
			if i > 0 {
				if err := reduce.Reduce(acc, acc, tmp, m/t.Size(), t, rop); err != nil {
					return err
				}
			}
		}
		for _, q := range out.Ranks {
			pr, err := lr.at(q, out.Buffer, plan.Span{Offset: dst.Offset + off, Length: m})
			if err != nil {
				return err
			}
			if err := pr.write(acc, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// blockSpan is a reference's block in a call with per-call blocks: block Index of
// the owner's send or receive buffer (Parse checked every reference names one
// block of an input or output).
func (r *callRun) blockSpan(rk *plan.Rank, ref *plan.BufferRef) plan.Span {
	owner, b := r.me, ref.Buffer
	if ref.Kind == plan.RefRemote {
		rb := &rk.RemoteBuffers[ref.RemoteBuffer]
		owner, b = rb.Rank, rb.Buffer
	}
	t := r.peers[owner].blocks
	if b == plan.BufferInput {
		return plan.Span{Offset: t.SendOffsets[ref.Index], Length: t.SendLengths[ref.Index]}
	}
	return plan.Span{Offset: t.RecvOffsets[ref.Index], Length: t.RecvLengths[ref.Index]}
}
