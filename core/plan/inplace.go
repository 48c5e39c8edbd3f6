package plan

import (
	"fmt"
	"math/bits"
)

// The executor does no aliasing of its own (docs/plan-format.md section 9): an
// in-place plan is written for a caller who passes overlapping send and receive
// buffers in a fixed way per collective, the way MSCCL++'s tests and its NCCL layer
// do (python/test/executor_test.py build_bufs, algorithm.cc bufferMode).

// InPlace is an in-place call's buffer convention: where the send buffer lies
// relative to the receive buffer, and the sizes that go with it.
type InPlace struct {
	// SendOffset is the send buffer's start minus the receive buffer's, in bytes:
	// rank·sendBytes for allgather (the send buffer is the rank's slot of the
	// receive buffer), −rank·recvBytes for reducescatter (the receive buffer is
	// the rank's slot of the send buffer), 0 otherwise (one buffer).
	SendOffset int64
	// SendBytes and RecvBytes are the two buffers' sizes.
	SendBytes, RecvBytes uint64
}

// InPlaceConvention returns the in-place convention of a collective for rank of
// nranks with a send buffer of sendBytes:
//   - "allgather": the receive buffer holds nranks·sendBytes and the send buffer
//     is its slot rank;
//   - "reducescatter": the receive buffer holds sendBytes/nranks (which must
//     divide) and is the send buffer's slot rank (MSCCL++'s test convention; its
//     NCCL layer has no in-place reducescatter);
//   - anything else ("allreduce", "alltoall", "test"...): one buffer, both views
//     of sendBytes.
//
// Errors: a *PlanError wrapping ErrBuffers when the sizes do not fit the
// convention (indivisible, overflowing) or rank is not below nranks.
func InPlaceConvention(collective string, rank, nranks int, sendBytes uint64) (InPlace, error) {
	bad := func(format string, args ...any) (InPlace, error) {
		return InPlace{}, &PlanError{Rank: rank, Lane: -1, Op: -1, Inner: -1, Err: ErrBuffers, Msg: fmt.Sprintf(format, args...)}
	}
	if nranks <= 0 || rank < 0 || rank >= nranks {
		return bad("rank %d of %d", rank, nranks)
	}
	n, r := uint64(nranks), uint64(rank)
	switch collective {
	case "allgather":
		recv, ok := mul(n, sendBytes)
		off, ok2 := mul(r, sendBytes)
		if !ok || !ok2 || off > 1<<63-1 {
			return bad("allgather of %d bytes from %d ranks overflows", sendBytes, nranks)
		}
		return InPlace{SendOffset: int64(off), SendBytes: sendBytes, RecvBytes: recv}, nil
	case "reducescatter":
		if sendBytes%n != 0 {
			return bad("reducescatter of %d bytes does not divide among %d ranks", sendBytes, nranks)
		}
		recv := sendBytes / n
		off := r * recv // < sendBytes
		if off > 1<<63-1 {
			return bad("reducescatter of %d bytes overflows", sendBytes)
		}
		return InPlace{SendOffset: -int64(off), SendBytes: sendBytes, RecvBytes: recv}, nil
	}
	return InPlace{SendBytes: sendBytes, RecvBytes: sendBytes}, nil
}

// CallBuffers is a call's send and receive buffers: start addresses (host or
// device, in one address space) and byte sizes.
type CallBuffers struct {
	SendAddr, SendBytes uint64
	RecvAddr, RecvBytes uint64
}

// CheckBuffers checks a call's buffers against the plan's convention for rank: for
// an in-place plan, exactly InPlaceConvention's aliasing and sizes; for an
// out-of-place plan, two buffers that do not overlap. Neither buffer may wrap
// around the end of the address space.
//
// Errors: a *PlanError wrapping ErrBuffers; ErrOutOfRange if rank is not one of
// the plan's.
func (p *Plan) CheckBuffers(rank int, b CallBuffers) error {
	if rank < 0 || rank >= len(p.Ranks) {
		return &PlanError{Rank: rank, Lane: -1, Op: -1, Inner: -1, Err: ErrOutOfRange,
			Msg: fmt.Sprintf("rank %d of a %d-rank plan", rank, len(p.Ranks))}
	}
	bad := func(format string, args ...any) error {
		return &PlanError{Rank: rank, Lane: -1, Op: -1, Inner: -1, Err: ErrBuffers, Msg: fmt.Sprintf(format, args...)}
	}
	sendEnd, c1 := bits.Add64(b.SendAddr, b.SendBytes, 0)
	recvEnd, c2 := bits.Add64(b.RecvAddr, b.RecvBytes, 0)
	if c1 != 0 || c2 != 0 {
		return bad("a buffer wraps around the address space")
	}
	if !p.InPlace {
		if b.SendBytes > 0 && b.RecvBytes > 0 && b.SendAddr < recvEnd && b.RecvAddr < sendEnd {
			return bad("out-of-place plan %q with overlapping buffers: send [%#x, %#x), receive [%#x, %#x)",
				p.Name, b.SendAddr, sendEnd, b.RecvAddr, recvEnd)
		}
		return nil
	}
	conv, err := InPlaceConvention(p.Collective, rank, len(p.Ranks), b.SendBytes)
	if err != nil {
		return err
	}
	if b.RecvBytes != conv.RecvBytes {
		return bad("in-place %s: receive buffer of %d bytes, the convention needs %d", p.Collective, b.RecvBytes, conv.RecvBytes)
	}
	if off := int64(b.SendAddr - b.RecvAddr); off != conv.SendOffset {
		return bad("in-place %s on rank %d: send buffer at receive buffer %+d bytes, the convention needs %+d",
			p.Collective, rank, off, conv.SendOffset)
	}
	return nil
}
