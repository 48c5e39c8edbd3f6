package core

import (
	"encoding/binary"
	"fmt"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Frames the application allocates. A receive made with RecvMultiAllocated does not
// allocate the frames its FramePolicy names: once the header is in, it reports the
// block with the frames' sizes (needID's completion), the application allocates them
// with its own allocator (RMM or a cupy pool for CUDA frames, numpy for host frames
// that must own their memory) and hands their addresses to ProvideFrames, and only
// then are the frame receives posted. Until then the stream's next message waits:
// frames share one tag, and UCX matches receives in the order they are posted.
// Cancelling, a failed endpoint or a shutdown in between drops the message.

// FramePolicy says which frames of a received message the application allocates, and
// which host frames the engine allocates outside the message's block.
type FramePolicy struct {
	CUDA     bool   // every CUDA frame
	HostFrom uint64 // host frames of at least this many bytes; 0: none
	// OwnHostFrom: host frames of at least this many bytes that the application does
	// not allocate get an allocation of their own (FrameOwnFlag, HostFrame), not a
	// place in the block, so that keeping one alive keeps no other frame's memory and
	// dropping it gives it back at once (to the cache of received frames,
	// hostframecache.go); 0: none (all in the block, the cheapest for many small frames).
	OwnHostFrom uint64
}

// asks says whether the application allocates any frame under the policy.
func (p FramePolicy) asks() bool { return p.CUDA || p.HostFrom != 0 }

// owns says whether the engine gives a host frame of this size an allocation of its own.
func (p FramePolicy) owns(size uint64) bool { return p.OwnHostFrom != 0 && size >= p.OwnHostFrom }

// provides says whether the application allocates a frame of this size and type.
func (p FramePolicy) provides(size uint64, memType uint8) bool {
	if memType == MemHost {
		return p.HostFrom != 0 && size >= p.HostFrom
	}
	return p.CUDA
}

// ProvidedFrameSize is the size of one entry of ProvideFrames' array: the frame's
// address, then its memory type (MemHost or MemCUDA), little-endian u64 each.
const ProvidedFrameSize = 16

// RecvMultiAllocated is RecvMulti for a caller that allocates the frames policy names.
// When a message with such frames arrives, needID completes with the block's address:
// its record lists every frame, those to allocate with location 0 and FrameUserFlag
// set; the caller then calls ProvideFrames, or Cancel(id). id's completion is the
// message, as for RecvMulti; a message without such frames completes id alone, and
// needID never.
//
// Errors: as RecvMulti.
func (e *Engine) RecvMultiAllocated(ep uint64, tag uint64, policy FramePolicy) (id, needID uint64, err error) {
	t, needID, err := e.recvMultiOp(ep, tag, policy, false)
	return t.ID, needID, err
}

// ProvideFrames hands the receive whose needID completed (with its block) the memory
// of the frames to allocate: count entries of ProvidedFrameSize bytes at addr, read
// during the call, one per frame to allocate, in frame order. A CUDA frame's address
// must be CUDA memory; the frames are then received into them. A receive that is no
// longer waiting (cancelled, failed, or provided for already) ignores it; the id, never
// reused, cannot name another receive, as the block's address, freed and allocated
// again, could.
//
// Errors: ErrEngineClosed, ErrBadDescriptors, ErrNotCUDA, ucxx.ErrNoCUDA.
func (e *Engine) ProvideFrames(needID uint64, addr uintptr, count int) error {
	if count < 0 || (count > 0 && addr == 0) {
		return fmt.Errorf("ProvideFrames: %w", ErrBadDescriptors)
	}
	raw := make([]byte, ProvidedFrameSize*count)
	ucxx.CopyFrom(raw, addr)
	s := submission{op: opProvideFrames, id: needID, frames: make([]providedFrame, count)}
	for i := range s.frames {
		w := raw[ProvidedFrameSize*i:]
		f := providedFrame{addr: uintptr(binary.LittleEndian.Uint64(w)), memType: binary.LittleEndian.Uint64(w[8:])}
		switch f.memType {
		case uint64(MemHost):
		case uint64(MemCUDA):
			if err := s.cuda.add(f.addr, 0, 0); err != nil {
				s.cuda.release()
				return err
			}
		default:
			s.cuda.release()
			return fmt.Errorf("ProvideFrames: %w", ErrBadDescriptors)
		}
		s.frames[i] = f
	}
	return e.submit(s)
}

// providedFrame is one frame's memory from ProvideFrames.
type providedFrame struct {
	addr    uintptr
	memType uint64
}

// askForFrames writes the record with the frames not allocated yet at location 0 (the
// application's, and the frames the engine allocates once those came) and reports
// the block through needID's completion. Progress thread.
func (m *multiBuffers) askForFrames(op *multiOp) {
	op.plan.writeRecord(newBlockRecord(op.block, len(op.plan.frames), op.plan.blockSize), nil, nil, nil, 0)
	op.awaiting = true
	m.awaiting[op.needID] = op
	m.completeNow(op.needID, ucxx.StatusOK, uint64(uintptr(op.block)))
}

// provideFrames posts the frames of a receive that waited for them. One that is gone
// (cancelled meanwhile) is ignored: the application knows from its completion.
func (m *multiBuffers) provideFrames(s *submission) {
	op := m.awaiting[s.id]
	if op == nil {
		return
	}
	delete(m.awaiting, s.id)
	op.awaiting = false
	if !framesHere(op.ep) {
		m.dropAwaiting(op, endpointStatus(op.ep))
		return
	}
	given := s.frames
	if len(given) != op.plan.byApplication {
		m.dropAwaiting(op, ucxx.StatusInvalidParam)
		return
	}
	for _, f := range op.plan.frames {
		if f.home != byApplication {
			continue
		}
		if given[0].memType != uint64(f.memType) {
			op.userFrames = op.userFrames[:0]
			m.dropAwaiting(op, ucxx.StatusInvalidParam)
			return
		}
		op.userFrames = append(op.userFrames, given[0].addr)
		given = given[1:]
	}
	if m.allocEngineFrames(op) {
		m.postFrames(op)
	}
}

// dropAwaiting ends a receive that waited for its frames: its frames are received
// and dropped (the stream stays in step) and it completes with st.
func (m *multiBuffers) dropAwaiting(op *multiOp, st ucxx.Status) {
	delete(m.awaiting, op.needID)
	op.awaiting = false
	m.rejectWhole(op, st)
}

// dropAllAwaiting ends every receive still waiting for frames (shutdown). Their
// blocks, which need-frames completions the application may not have read yet
// reported, are kept until the queue is freed (freeReported).
func (m *multiBuffers) dropAllAwaiting() {
	for _, op := range m.awaiting {
		m.reported = append(m.reported, op.block)
		op.block = nil // nothing else is in it yet: the frames are not allocated
		m.dropAwaiting(op, ucxx.StatusCanceled)
	}
}

// freeReported frees the blocks dropAllAwaiting kept, once the progress thread has
// exited and the application stopped reading completions.
func (m *multiBuffers) freeReported() {
	for _, b := range m.reported {
		ucxx.CFree(b)
	}
	m.reported = nil
}
