package core

import (
	"encoding/binary"
	"fmt"
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

// SendMulti queues a multi-buffer send of count frames described at desc (count
// Frames, FrameDescriptorSize bytes each, read during this call) and returns the
// request id of its one completion. The frames' memory must stay valid until then.
//
// Errors: ErrEngineClosed, ErrEndpointClosed, the endpoint's failure, ErrBadDescriptors.
func (e *Engine) SendMulti(ep uint64, desc uintptr, count int, tag uint64) (uint64, error) {
	t, err := e.sendMulti(ep, desc, count, tag, false)
	return t.ID, err
}

// SendMultiInline is SendMulti, waiting up to Options.InlineWait for the send to end
// (a message of small host frames, one eager tag message, usually does): then the
// Ticket is Done and no completion is queued.
func (e *Engine) SendMultiInline(ep uint64, desc uintptr, count int, tag uint64) (Ticket, error) {
	return e.sendMulti(ep, desc, count, tag, true)
}

func (e *Engine) sendMulti(ep uint64, desc uintptr, count int, tag uint64, inline bool) (Ticket, error) {
	live, err := e.eps.live(ep)
	if err != nil {
		return Ticket{}, err
	}
	if count < 0 || (count > 0 && desc == 0) {
		return Ticket{}, fmt.Errorf("SendMulti: %w", ErrBadDescriptors)
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
			return Ticket{}, fmt.Errorf("SendMulti: %w", ErrBadDescriptors)
		}
		if f.MemType == uint64(MemCUDA) {
			if err := cb.add(uintptr(f.Addr), f.Size, uintptr(f.Stream)); err != nil {
				cb.release()
				putMultiOp(op)
				return Ticket{}, err
			}
		}
		op.frames = append(op.frames, f)
	}
	// A local, not op.id, after submit: the progress thread may finish and recycle op
	// before this function returns (Go may read op.id after the call).
	id := e.newID()
	op.id = id
	return e.submitTransfer(submission{op: opSendMulti, id: id, ep: ep, tag: tag, multi: op, cuda: cb}, live.sendBudget(inline))
}

// ucsMemType maps a header's memory type to UCX's.
func ucsMemType(t uint64) int {
	if t == uint64(MemCUDA) {
		return ucxx.MemoryCUDA
	}
	return ucxx.MemoryHost
}

// sendMulti posts a message's tag messages (multiheader.go has the wire): the header,
// with the small host frames gathered after it when they fit inline; else the headers,
// then the small host frames gathered into one message (a message of one header), then
// each other frame. The IOV arrays live in the op's header memory, after the headers.
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
	iovAt := nh * MaxHeaderSize
	op.ensureHeaders(iovAt + (len(op.frames)+1)*ucxx.IOVEntrySize)
	op.lens = EncodeHeaders(unsafe.Slice((*byte)(op.headers), iovAt), op.sizes, op.types, op.lens[:0])
	iov := unsafe.Add(op.headers, iovAt)
	// EncodeHeaders decided whether the small host frames ride inline.
	inline := *(*byte)(unsafe.Add(op.headers, 5))&HeaderInline != 0
	gathered := nh == 1 && !inline
	// The header(s); the inline frames go in the first one's message.
	hdr := uint64(op.lens[0])
	ucxx.PutIOV(iov, 0, uintptr(op.headers), hdr)
	n, bytes := 1, hdr
	var small Frame // the last small host frame: the only one when n == 2
	op.separate = op.separate[:0]
	for _, f := range op.frames {
		switch {
		case gathers(f.Size, uint8(f.MemType)) && (inline || gathered):
			ucxx.PutIOV(iov, n, uintptr(f.Addr), f.Size)
			n++
			bytes += f.Size
			small = f
		default:
			op.separate = append(op.separate, framePlace{uintptr(f.Addr), f.Size, uint8(f.MemType)})
		}
	}
	op.remaining = len(op.lens) + len(op.separate)
	if gathered && n > 1 {
		op.remaining++
	}
	if inline {
		r := m.part(op, opTagSend, stepMultiPart)
		r.track(ep.u.TagSendIOV(iov, n, bytes, op.tag, r.id))
	} else {
		for i, l := range op.lens {
			r := m.part(op, opTagSend, stepMultiPart)
			r.track(ep.u.TagSend(uintptr(op.headers)+uintptr(i*MaxHeaderSize), uint64(l), op.tag, 0, r.id))
		}
		switch {
		case n == 2: // one small host frame: a plain send
			r := m.part(op, opTagSend, stepMultiPart)
			r.track(ep.u.TagSend(uintptr(small.Addr), small.Size, op.tag, ucxx.MemoryHost, r.id))
		case n > 2:
			r := m.part(op, opTagSend, stepMultiPart)
			r.track(ep.u.TagSendIOV(unsafe.Add(iov, ucxx.IOVEntrySize), n-1, bytes-hdr, op.tag, r.id))
		}
	}
	for _, f := range op.separate {
		r, mem := m.part(op, opTagSend, stepMultiPart), ucsMemType(uint64(f.memType))
		m.requests.markCUDA(r, mem)
		r.track(ep.u.TagSend(f.addr, f.size, op.tag, mem, r.id))
	}
}
