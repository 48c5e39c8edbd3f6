package core

import "github.com/ucxx-go/ucxx-go/ucxx"

// Admission of multi-buffer messages. A message whose headers are in is admitted once
// its footprint (block and CUDA frames) fits both bounds on bytes being received at
// once: the worker's (Options.MaxOutstandingBytes) and its endpoint's
// (Options.MaxEndpointOutstandingBytes). One that can never fit fails with
// ExceedsLimit; one that does not fit yet waits. Waiting is not first-come-first-
// served across endpoints: a message that fits is admitted even while others wait, so
// peers that announce large messages and never send them hold at most their share and
// cannot stall an honest peer. Messages of one stream are admitted in order anyway:
// the stream's next header is received only once this message's frames are posted.

// admit reserves room for a fully described message, or makes it wait for room.
func (e *Engine) admit(op *multiOp) {
	size := footprint(op.dec.Sizes, op.dec.Types)
	if size > uint64(e.opts.MaxOutstandingBytes) || (op.ep != nil && size > uint64(e.opts.MaxEndpointOutstandingBytes)) {
		e.rejectWhole(op, ucxx.StatusExceedsLimit)
		return
	}
	if !e.reserve(op, int64(size)) {
		e.waiting = append(e.waiting, op)
		return
	}
	e.receiveFrames(op)
}

// reserve takes size bytes for op from both bounds, or nothing.
func (e *Engine) reserve(op *multiOp, size int64) bool {
	if op.ep != nil && op.ep.heldBytes+size > e.opts.MaxEndpointOutstandingBytes {
		return false
	}
	if !e.outstanding.TryAcquire(size) {
		return false
	}
	if op.ep != nil {
		op.ep.heldBytes += size
	}
	op.reserved = size
	return true
}

// release gives back what reserve took for op.
func (e *Engine) release(op *multiOp) {
	e.outstanding.Release(op.reserved)
	if op.ep != nil {
		op.ep.heldBytes -= op.reserved
	}
	op.reserved = 0
}

// admitWaiting admits every waiting message that fits now, oldest first.
func (e *Engine) admitWaiting() {
	if len(e.waiting) == 0 {
		return
	}
	var admitted []*multiOp
	keep := e.waiting[:0]
	for _, op := range e.waiting {
		if e.reserve(op, int64(footprint(op.dec.Sizes, op.dec.Types))) {
			admitted = append(admitted, op)
		} else {
			keep = append(keep, op)
		}
	}
	clear(e.waiting[len(keep):])
	e.waiting = keep
	// Only now: receiveFrames may finish a message, which admits again.
	for _, op := range admitted {
		e.receiveFrames(op)
	}
}
