package core

import (
	"golang.org/x/sync/semaphore"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// admission decides when a multi-buffer message whose headers are in may allocate its
// memory and receive its frames. Its footprint (block and CUDA frames) must fit both
// bounds on bytes being received at once: the worker's (Options.MaxOutstandingBytes)
// and its endpoint's (Options.MaxEndpointOutstandingBytes). One that can never fit is
// refused; one that does not fit yet waits. Waiting is not first-come-first-served
// across endpoints: a message that fits is admitted even while others wait, so peers
// that announce large messages and never send them hold at most their share and
// cannot stall an honest peer. Messages of one stream are admitted in order anyway:
// the stream's next header is received only once this message's frames are posted.
//
// It belongs to the progress thread; the semaphore is only ever tried, never waited on.
type admission struct {
	worker      *semaphore.Weighted
	maxWorker   int64
	maxEndpoint int64
	waiting     []*multiOp
}

func newAdmission(maxWorker, maxEndpoint int64) admission {
	return admission{worker: semaphore.NewWeighted(maxWorker), maxWorker: maxWorker, maxEndpoint: maxEndpoint}
}

// admit reserves room for op and reports true, or queues it to wait for room and
// reports false. Over a bound it can never fit, it returns StatusExceedsLimit.
func (a *admission) admit(op *multiOp) (bool, ucxx.Status) {
	size := int64(op.plan.footprint)
	if size < 0 || size > a.maxWorker || (op.ep != nil && size > a.maxEndpoint) {
		return false, ucxx.StatusExceedsLimit
	}
	if a.reserve(op, size) {
		return true, ucxx.StatusOK
	}
	a.waiting = append(a.waiting, op)
	return false, ucxx.StatusOK
}

// reserve takes size bytes for op from both bounds, or nothing.
func (a *admission) reserve(op *multiOp, size int64) bool {
	if op.ep != nil && op.ep.heldBytes+size > a.maxEndpoint {
		return false
	}
	if !a.worker.TryAcquire(size) {
		return false
	}
	if op.ep != nil {
		op.ep.heldBytes += size
	}
	op.reserved = size
	return true
}

// release gives back what op holds and returns the waiting messages that fit now,
// oldest first, their room reserved: the caller receives their frames.
func (a *admission) release(op *multiOp) (admitted []*multiOp) {
	if op.reserved == 0 {
		return nil
	}
	a.worker.Release(op.reserved)
	if op.ep != nil {
		op.ep.heldBytes -= op.reserved
	}
	op.reserved = 0
	return a.take(func(w *multiOp) bool { return a.reserve(w, int64(w.plan.footprint)) })
}

// removeEndpoint takes ep's waiting messages out of the queue and returns them.
func (a *admission) removeEndpoint(ep *endpoint) []*multiOp {
	return a.take(func(op *multiOp) bool { return op.ep == ep })
}

// take removes the waiting messages pick chooses, in order, and returns them.
func (a *admission) take(pick func(*multiOp) bool) (taken []*multiOp) {
	keep := a.waiting[:0]
	for _, op := range a.waiting {
		if pick(op) {
			taken = append(taken, op)
		} else {
			keep = append(keep, op)
		}
	}
	clear(a.waiting[len(keep):])
	a.waiting = keep
	return taken
}
