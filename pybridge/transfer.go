package pybridge

import (
	"fmt"
	"time"

	"github.com/ucxx-go/ucxx-go/core"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// InlineDone marks a transfer's result as its outcome rather than a request id: the
// operation ended within the call (core.Ticket), the low bits are its length, and no
// completion will come. Python tests the bit; ids never reach it.
const InlineDone = 1 << 63

// TagSend sends n bytes at addr with tag on endpoint ep. It returns the request id
// whose completion will come through the queue, or InlineDone|n when the send ended
// within the call; an inline failure is returned as the error. The caller keeps the
// memory alive until the send ends. memType is UCX's (0 host, 1 CUDA); for CUDA
// memory, stream is the __cuda_array_interface__ stream whose queued work must be
// done before the send (0: none). With wait 0 the call does not wait for the send to
// end (the caller has other work ready): the completion always comes through the
// queue.
func TagSend(ep uint64, addr uintptr, n uint64, tag uint64, memType int, stream uint64, wait int) (res uint64, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return 0, err
	}
	if wait == 0 {
		return queued(e.TagSend(ep, addr, n, tag, memType, uintptr(stream)))
	}
	return ticketResult(e.TagSendInline(ep, addr, n, tag, memType, uintptr(stream)))
}

// TagRecv receives up to n bytes into addr matching tag under mask; ep (0 for none)
// is the endpoint whose failure fails it. The result, memType, stream and wait are as
// TagSend's, the length being the message's.
func TagRecv(ep uint64, addr uintptr, n uint64, tag uint64, mask uint64, memType int, stream uint64, wait int) (res uint64, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return 0, err
	}
	if wait == 0 {
		return queued(e.TagRecv(ep, addr, n, tag, mask, memType, uintptr(stream)))
	}
	return ticketResult(e.TagRecvInline(ep, addr, n, tag, mask, memType, uintptr(stream)))
}

// queued is ticketResult for an operation submitted without an inline wait.
func queued(id uint64, err error) (uint64, error) { return ticketResult(core.Ticket{ID: id}, err) }

// ticketResult encodes a core.Ticket as TagSend documents.
func ticketResult(t core.Ticket, err error) (uint64, error) {
	switch {
	case err != nil:
		return 0, err
	case !t.Done:
		return t.ID, nil
	case t.Status != ucxx.StatusOK:
		return 0, fmt.Errorf("completed in the call: %w", t.Status)
	default:
		return InlineDone | t.Length, nil
	}
}

// SendMulti sends count frames whose descriptors (address, size, memory type, stream:
// four little-endian u64 each, core.Frame) are at desc, read during the call, as one
// multi-buffer message. The result is as TagSend's.
func SendMulti(ep uint64, desc uintptr, count int, tag uint64) (res uint64, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return 0, err
	}
	return ticketResult(e.SendMultiInline(ep, desc, count, tag))
}

// ReleaseHostFrame gives back a host frame of its own that a multi-buffer receive
// lent (FrameOwnFlag in its block's record; core.ReleaseHostFrame): the next receive
// of its size may reuse it. Any thread, with or without a running engine.
func ReleaseHostFrame(at uintptr) (ok bool, err error) {
	defer guard(&err)
	if err := core.ReleaseHostFrame(at); err != nil {
		return false, err
	}
	return true, nil
}

// RecvMulti receives a multi-buffer message, host frames of at least ownHostFrom
// bytes (0: none) in allocations of their own (core.FramePolicy.OwnHostFrom). The
// result is as TagRecv's, the "length" being the address of the message's block
// (core/block.go), which the caller frees with free(), and each such frame with
// ReleaseHostFrame.
func RecvMulti(ep uint64, tag uint64, ownHostFrom uint64) (res uint64, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return 0, err
	}
	return ticketResult(e.RecvMultiInline(ep, tag, ownHostFrom))
}

// RecvMultiAllocated is RecvMulti for a caller that allocates some frames itself: the
// CUDA frames if cuda, host frames of at least hostFrom bytes (0: none); of the other
// host frames, those of at least ownHostFrom bytes (0: none) get allocations of their
// own. It returns "id need_id" (core.Engine.RecvMultiAllocated).
func RecvMultiAllocated(ep uint64, tag uint64, cuda bool, hostFrom uint64, ownHostFrom uint64) (res string, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return "", err
	}
	id, need, err := e.RecvMultiAllocated(ep, tag, core.FramePolicy{CUDA: cuda, HostFrom: hostFrom, OwnHostFrom: ownHostFrom})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d %d", id, need), nil
}

// ProvideFrames hands the receive from RecvMultiAllocated whose need id completed the
// memory of the frames it asked for: count entries of core.ProvidedFrameSize bytes
// (address, memory type) at desc, read during the call.
func ProvideFrames(need uint64, desc uintptr, count int) (ok bool, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return false, err
	}
	return true, e.ProvideFrames(need, desc, count)
}

// Cancel asks for a request to be cancelled; its completion still comes.
func Cancel(id uint64) (ok bool, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return false, err
	}
	return true, e.Cancel(id)
}

// ConsumeWake acknowledges a wake-up of the eventfd of the completion queue whose id
// is queue (Start's fourth word), for an event loop that watches it: one call per
// wake-up, before draining the ring. A freed queue has nothing pending.
func ConsumeWake(queue uint64) (pending bool, err error) {
	defer guard(&err)
	e := queues.get(queue)
	if e == nil {
		return false, nil
	}
	return e.Queue().ConsumeWake(), nil
}

// NotifierWait blocks, without the GIL, until the completion queue whose id is queue
// has completions ready (1), the timeout passes (0) or its engine stopped (2; also
// once the queue was freed).
func NotifierWait(queue uint64, timeoutMs int64) (r int, err error) {
	defer guard(&err)
	e := queues.get(queue)
	if e == nil {
		return 2, nil
	}
	res, err := e.Queue().Wait(time.Duration(timeoutMs) * time.Millisecond)
	return int(res), err
}

// PollFD is the file descriptor the owner's event loop watches in loop progress mode
// (readable: call Progress), or -1 in the thread modes.
func PollFD() (fd int, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return -1, err
	}
	return e.PollFD(), nil
}

// Progress is the owner's pass in loop progress mode (core.Engine.Progress), called
// by its event loop when PollFD is readable. It reports whether the engine stopped.
func Progress() (stopped bool, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return true, err
	}
	return e.Progress()
}
