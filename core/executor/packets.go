package executor

import (
	"fmt"
	"time"

	"github.com/ucxx-go/ucxx-go/core/internal/pause"
	"github.com/ucxx-go/ucxx-go/core/plan"
	"github.com/ucxx-go/ucxx-go/core/reduce"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// LL packets (MSCCL++'s LL protocol): every 4 payload bytes travel in an 8-byte
// word with the call's flag in its upper half, stored with one 8-byte atomic store,
// so a reader that sees the flag sees the data: no signal needed. LL16's packet
// (data, flag, data, flag) is two such words, so LL8 and LL16 lay out the same
// bytes. Packet regions sit at twice their payload offset, in scratch (plus the
// launch's half of a double scratch buffer). The flag is the context's call count,
// as 0.9's launch counter (which every rank advances in step).

// packWords stores n payload bytes from src as packets with flag at dst.
func packWords(dst, src uintptr, n uint64, flag uint32) { hostPack(dst, src, n, flag) }

// packetPoll waits for packets: spin, then yield, then sleep briefly, checking the
// call's deadline, abort and every rank's liveness (a packet has no sender we
// could name: any rank's death fails the wait).
type packetPoll struct {
	s     *waitScope
	ranks int
	what  func() string
}

// until calls step, which does what is ready and returns how far it got, until
// it reached n, waiting in between.
func (p *packetPoll) until(n uint64, step func(done uint64) uint64) error {
	done := uint64(0)
	for i := 0; ; i++ {
		if done = step(done); done >= n {
			return nil
		}
		if i < p.s.spin {
			if i&63 == 63 {
				pause.Yield()
			}
			continue
		}
		if p.s.aborted.Load() {
			return errAborted
		}
		if p.s.alive != nil {
			for r := range p.ranks {
				if !p.s.alive(r) {
					return &RankError{Rank: r, Op: p.what(), Err: fmt.Errorf("the rank's process ended: %w", ErrRankFailed)}
				}
			}
		}
		if time.Now().After(p.s.deadline) {
			return &RankError{Rank: -1, Op: p.what(), Err: fmt.Errorf("packets did not come in %v: %w", p.s.timeout, ErrTimeout)}
		}
		pause.For(20 * time.Microsecond)
	}
}

// unpackWords waits for n payload bytes of packets with flag at src and stores the
// payload to dst.
func (p *packetPoll) unpackWords(dst, src uintptr, n uint64, flag uint32) error {
	return p.until(n, func(done uint64) uint64 {
		return done + hostUnpack(dst+uintptr(done), src+uintptr(2*done), n-done, flag)
	})
}

// forwardWords waits for the packets of n payload bytes at src and copies each,
// flag and all, to every dst.
func (p *packetPoll) forwardWords(dsts []uintptr, src uintptr, n uint64, flag uint32) error {
	moved := make([]uintptr, len(dsts))
	return p.until(n, func(done uint64) uint64 {
		for i, d := range dsts {
			moved[i] = d + uintptr(2*done)
		}
		return done + hostForward(moved, src+uintptr(2*done), n-done, flag)
	})
}

// copyWords copies n payload bytes worth of packets from src to dst word by word
// (atomically: readers may be polling dst).
func copyWords(dst, src uintptr, n uint64) { hostCopyWords(dst, src, n) }

// packetRegion is where a ref's packets are, mapped here: local refs in this rank's
// buffers (upkt and the packet sources of reductions always in scratch), remote
// refs in a peer's scratch.
func (lr *laneRun) packetRegion(ref *plan.BufferRef, sp plan.Span, forceScratch bool) (uintptr, error) {
	ps := plan.PacketSpan(sp)
	if ref.Kind == plan.RefRemote {
		rb := &lr.rk.RemoteBuffers[ref.RemoteBuffer]
		if rb.Buffer != plan.BufferScratch {
			return 0, fmt.Errorf("packets into rank %d's %s buffer (only scratch holds packets here): %w", rb.Rank, rb.Buffer, ErrUnsupported)
		}
		pr, err := lr.at(rb.Rank, rb.Buffer, ps)
		return pr.mapped, err
	}
	b := ref.Buffer
	if forceScratch {
		b = plan.BufferScratch
	}
	if b == plan.BufferScratch && lr.r.scratchHalf(lr.r.me)+ps.End() > lr.r.ctx.capacity {
		return 0, fmt.Errorf("packets at scratch bytes %d..%d past its %d: %w", ps.Offset, ps.End(), lr.r.ctx.capacity, plan.ErrMessageSize)
	}
	return lr.local(b, ps), nil
}

// packets runs the LL packet ops.
func (lr *laneRun) packets(op *plan.Op, ol *plan.OpLayout) error {
	r := lr.r
	flag := uint32(r.flag)
	poll := &packetPoll{s: r.scope, ranks: len(r.c.Plan.Ranks), what: func() string { return "waiting for packets" }}
	src0, dst0 := ol.Src[0], plan.Span{}
	if len(ol.Dst) > 0 {
		dst0 = ol.Dst[0]
	}
	switch op.Code {
	case plan.OpCopyPackets: // local plain -> local packets
		d, err := lr.packetRegion(&op.Dst[0], dst0, false)
		if err != nil {
			return err
		}
		packWords(d, lr.local(op.Src[0].Buffer, src0), src0.Length, flag)
		return nil
	case plan.OpPutPackets:
		for i := range op.Dst {
			d, err := lr.packetRegion(&op.Dst[i], ol.Dst[i], false)
			if err != nil {
				return err
			}
			if op.Channel == plan.ChannelPort { // the source holds packets already
				s, err := lr.packetRegion(&op.Src[i], ol.Src[i], false)
				if err != nil {
					return err
				}
				copyWords(d, s, ol.Dst[i].Length)
				continue
			}
			packWords(d, lr.local(op.Src[i].Buffer, ol.Src[i]), ol.Src[i].Length, flag)
		}
		return nil
	case plan.OpReadPutPackets:
		s, err := lr.packetRegion(&op.Src[0], src0, true)
		if err != nil {
			return err
		}
		dsts := make([]uintptr, len(op.Dst))
		for i := range op.Dst {
			if dsts[i], err = lr.packetRegion(&op.Dst[i], ol.Dst[i], false); err != nil {
				return err
			}
		}
		return poll.forwardWords(dsts, s, src0.Length, flag)
	case plan.OpUnpackPackets:
		s, err := lr.packetRegion(&op.Src[0], src0, true)
		if err != nil {
			return err
		}
		return poll.unpackWords(lr.local(op.Dst[0].Buffer, dst0), s, src0.Length, flag)
	case plan.OpReducePackets, plan.OpReduceSendPackets, plan.OpReduceCopyPackets, plan.OpReduceCopySendPackets:
		return lr.reducePackets(op, ol, poll, flag)
	}
	return fmt.Errorf("op %q on host memory: %w", op.Code, ErrUnsupported)
}

// reducePackets runs repkt and its fused forms: dst[0] = src[0] op the payload of
// every packet source, then the result as packets to local dst[1] (recpkt,
// recspkt) and to the remote destinations after those (respkt: dst[1..],
// recspkt: dst[2..]).
func (lr *laneRun) reducePackets(op *plan.Op, ol *plan.OpLayout, poll *packetPoll, flag uint32) error {
	r := lr.r
	t, rop := r.c.DType, r.reduceOp(op)
	n := ol.Src[0].Length
	if n%t.Size() != 0 {
		return fmt.Errorf("a %d-byte reduction of %d-byte %s elements: %w", n, t.Size(), t, plan.ErrMessageSize)
	}
	dst := lr.local(op.Dst[0].Buffer, ol.Dst[0])
	a := lr.local(op.Src[0].Buffer, ol.Src[0])
	if lr.tmp == nil {
		lr.tmp = ucxx.CMalloc(tmpBytes)
	}
	tmp := uintptr(lr.tmp)
	if len(op.Src) == 1 {
		move(dst, a, n)
	}
	for k := 1; k < len(op.Src); k++ {
		s, err := lr.packetRegion(&op.Src[k], ol.Src[k], true)
		if err != nil {
			return err
		}
		first := a
		if k > 1 {
			first = dst
		}
		block := uint64(tmpBytes) / 8 * 8 / t.Size() * t.Size()
		for off := uint64(0); off < n; off += block {
			m := min(block, n-off)
			if err := poll.unpackWords(tmp, s+uintptr(2*off), m, flag); err != nil {
				return err
			}
			if err := reduce.Reduce(dst+uintptr(off), first+uintptr(off), tmp, m/t.Size(), t, rop); err != nil {
				return err
			}
		}
	}
	firstRemote := 1
	if op.Code == plan.OpReduceCopyPackets || op.Code == plan.OpReduceCopySendPackets {
		d, err := lr.packetRegion(&op.Dst[1], ol.Dst[1], false)
		if err != nil {
			return err
		}
		packWords(d, dst, n, flag)
		firstRemote = 2
	}
	if op.Code == plan.OpReduceSendPackets || op.Code == plan.OpReduceCopySendPackets {
		for k := firstRemote; k < len(op.Dst); k++ {
			d, err := lr.packetRegion(&op.Dst[k], ol.Dst[k], false)
			if err != nil {
				return err
			}
			packWords(d, dst, n, flag)
		}
	}
	return nil
}
