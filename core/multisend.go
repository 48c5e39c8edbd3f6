package core

import (
	"encoding/binary"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Sending a multi-buffer message: the descriptors are read during the call, and the
// progress thread posts every header and frame in one pass (multi.go has the wire).

// Frame describes one buffer of a multi-buffer send: four little-endian u64 words
// (address, size, memory type: MemHost or MemCUDA, and for a CUDA frame the stream
// whose queued work must be done before it is sent, 0 for none: see cuda.go), as the
// descriptor array a caller passes to SendMulti holds them.
type Frame struct {
	Addr    uint64
	Size    uint64
	MemType uint64
	Stream  uint64
}

// FrameDescriptorSize is the size of one Frame in a descriptor array.
const FrameDescriptorSize = 32

// ErrBadDescriptors: SendMulti's descriptor array is malformed.
var ErrBadDescriptors = &ucxx.Error{Op: "SendMulti: frame descriptors", Status: ucxx.StatusInvalidParam}

// SendMulti queues a multi-buffer send of count frames described at desc (count
// Frames, FrameDescriptorSize bytes each, read during this call) and returns the
// request id of its one completion. The frames' memory must stay valid until then.
//
// Errors: ErrEngineClosed, ErrEndpointClosed, the endpoint's failure, ErrBadDescriptors.
func (e *Engine) SendMulti(ep uint64, desc uintptr, count int, tag uint64) (uint64, error) {
	if _, err := e.eps.live(ep); err != nil {
		return 0, err
	}
	if count < 0 || (count > 0 && desc == 0) {
		return 0, ErrBadDescriptors
	}
	op := getMultiOp()
	n := count * FrameDescriptorSize
	if cap(op.raw) < n {
		op.raw = make([]byte, n)
	}
	op.raw = op.raw[:n]
	ucxx.CopyFrom(op.raw, desc)
	var cb cudaBuffers
	for i := 0; i < count; i++ {
		w := op.raw[i*FrameDescriptorSize:]
		f := Frame{binary.LittleEndian.Uint64(w), binary.LittleEndian.Uint64(w[8:]), binary.LittleEndian.Uint64(w[16:]), binary.LittleEndian.Uint64(w[24:])}
		if f.MemType > uint64(MemCUDA) || (f.Addr == 0 && f.Size != 0) {
			cb.release()
			putMultiOp(op)
			return 0, ErrBadDescriptors
		}
		if f.MemType == uint64(MemCUDA) {
			if err := cb.add(uintptr(f.Addr), uintptr(f.Stream)); err != nil {
				cb.release()
				putMultiOp(op)
				return 0, err
			}
		}
		op.frames = append(op.frames, f)
	}
	// A local, not op.id, after submit: the progress thread may finish and recycle op
	// before this function returns (Go may read op.id after the call).
	id := e.newID()
	op.id = id
	return id, e.submitOrRelease(submission{op: opSendMulti, id: id, ep: ep, tag: tag, multi: op, cuda: cb})
}

// ucsMemType maps a header's memory type to UCX's.
func ucsMemType(t uint64) int {
	if t == uint64(MemCUDA) {
		return 1 // UCS_MEMORY_TYPE_CUDA
	}
	return 0 // UCS_MEMORY_TYPE_HOST
}

func (m *multiBuffers) sendMulti(s *submission) {
	ep, ok := m.beginMulti(s)
	if !ok {
		return
	}
	op := s.multi
	for _, f := range op.frames {
		op.sizes = append(op.sizes, f.Size)
		op.types = append(op.types, uint8(f.MemType))
	}
	nh := HeaderCount(len(op.frames))
	op.ensureHeaders(nh * MaxHeaderSize)
	op.lens = EncodeHeaders(unsafe.Slice((*byte)(op.headers), nh*MaxHeaderSize), op.sizes, op.types, op.lens[:0])
	op.remaining = len(op.lens) + len(op.frames)
	for i, n := range op.lens {
		r := m.part(op, opTagSend, stepMultiPart)
		addr := uintptr(op.headers) + uintptr(i*MaxHeaderSize)
		r.track(ep.u.TagSend(addr, uint64(n), op.tag, 0, r.id))
	}
	for _, f := range op.frames {
		r := m.part(op, opTagSend, stepMultiPart)
		r.track(ep.u.TagSend(uintptr(f.Addr), f.Size, op.tag, ucsMemType(f.MemType), r.id))
	}
}
