package core

import (
	"encoding/binary"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Application-allocated CUDA frames. A receive made with RecvMultiAllocated does not
// allocate its CUDA frames itself: once the header is in, it reports the block with
// the frames' sizes (needID's completion), the application allocates them with its
// own allocator (RMM, a cupy pool) and hands their addresses to ProvideFrames, and
// only then are the frame receives posted. Until then the stream's next message
// waits: frames share one tag, and UCX matches receives in the order they are posted.
// Cancelling, a failed endpoint or a shutdown in between drops the message.

// RecvMultiAllocated is RecvMulti for a caller that allocates the CUDA frames. When a
// message with CUDA frames arrives, needID completes with the block's address: its
// record lists every frame (CUDA ones with address 0); the caller then calls
// ProvideFrames, or Cancel(id). id's completion is the message, as for RecvMulti;
// a message without CUDA frames completes id alone, and needID never.
//
// Errors: as RecvMulti.
func (e *Engine) RecvMultiAllocated(ep uint64, tag uint64) (id, needID uint64, err error) {
	return e.recvMultiOp(ep, tag, true)
}

// ProvideFrames hands a receive waiting for its CUDA frames (block, from needID's
// completion) their addresses: count little-endian u64 words at addr, read during the
// call, one per CUDA frame in frame order. It checks that each is CUDA memory; the
// frames are then received into them.
//
// Errors: ErrEngineClosed, ErrBadDescriptors, ErrNotCUDA, ucxx.ErrNoCUDA.
func (e *Engine) ProvideFrames(block uintptr, addr uintptr, count int) error {
	if count < 0 || (count > 0 && addr == 0) {
		return ErrBadDescriptors
	}
	raw := make([]byte, 8*count)
	ucxx.CopyFrom(raw, addr)
	s := submission{op: opProvideFrames, addr: block, frames: make([]uint64, count)}
	for i := range s.frames {
		s.frames[i] = binary.LittleEndian.Uint64(raw[8*i:])
		if err := s.cuda.add(uintptr(s.frames[i]), 0); err != nil {
			s.cuda.release()
			return err
		}
	}
	return e.submit(s)
}

func hasCUDA(types []uint8) bool {
	for _, t := range types {
		if t != MemHost {
			return true
		}
	}
	return false
}

// askForFrames writes the record with the CUDA frames' addresses 0 and reports the
// block through needID's completion. Progress thread.
func (m *multiBuffers) askForFrames(op *multiOp, size uint64) {
	rec := newBlockRecord(op.block, len(op.dec.Sizes), size)
	off := alignUp(recordSize(len(op.dec.Sizes)))
	for i, sz := range op.dec.Sizes {
		if op.dec.Types[i] == MemHost {
			rec.setFrame(i, off, sz, uint64(MemHost))
			off = alignUp(off + sz)
		} else {
			rec.setFrame(i, 0, sz, uint64(MemCUDA)|FrameUserFlag)
		}
	}
	op.awaiting = true
	m.awaiting[uintptr(op.block)] = op
	m.completeNow(op.needID, ucxx.StatusOK, uint64(uintptr(op.block)))
}

// provideFrames posts the frames of a receive that waited for them. One that is gone
// (cancelled meanwhile) is ignored: the application knows from its completion.
func (m *multiBuffers) provideFrames(s *submission) {
	op := m.awaiting[s.addr]
	if op == nil {
		return
	}
	delete(m.awaiting, s.addr)
	op.awaiting = false
	if !usable(op.ep) {
		m.dropAwaiting(op, endpointStatus(op.ep))
		return
	}
	want := 0
	for _, t := range op.dec.Types {
		if t != MemHost {
			want++
		}
	}
	if len(s.frames) != want {
		m.dropAwaiting(op, ucxx.StatusInvalidParam)
		return
	}
	op.userFrames = true
	for _, a := range s.frames {
		op.cudaFrames = append(op.cudaFrames, uintptr(a))
	}
	_, size := blockLayout(op.dec.Sizes, op.dec.Types)
	m.postFrames(op, size)
}

// dropAwaiting ends a receive that waited for its frames: its frames are received
// and dropped (the stream stays in step) and it completes with st.
func (m *multiBuffers) dropAwaiting(op *multiOp, st ucxx.Status) {
	delete(m.awaiting, uintptr(op.block))
	op.awaiting = false
	m.rejectWhole(op, st)
}

// dropAllAwaiting ends every receive still waiting for frames (shutdown).
func (m *multiBuffers) dropAllAwaiting() {
	for _, op := range m.awaiting {
		m.dropAwaiting(op, ucxx.StatusCanceled)
	}
}
