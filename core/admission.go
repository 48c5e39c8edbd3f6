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
// across endpoints: a message that fits is admitted even while others wait. Messages
// of one stream are admitted in order anyway: the stream's next header is received
// only once this message's frames are posted.
//
// Admission by evidence. A header costs its sender nothing, so room is not given on
// its word alone: a message whose frames are not all here (its footprint unproven)
// must also fit the unproven allowances, a quarter of each bound (worker-wide and
// per endpoint). A larger one waits until every frame is held in the unexpected store
// as announced (evidence.go), then needs no allowance. So peers that announce large
// messages and never send the frames hold a quarter of the budget between them, not
// all of it, and an honest peer's message is admitted once its frames are here. A
// peer can still hold room by sending every frame's rendezvous request and then never
// serving the data: that needs the memory on its side (README, "Peers that lie").
//
// It belongs to the progress thread; the semaphore is only ever tried, never waited on.
type admission struct {
	worker      *semaphore.Weighted
	maxWorker   int64
	maxEndpoint int64
	// unproven: the unproven bytes of admitted messages; the allowances bound it
	// worker-wide and per endpoint (endpoint.unprovenBytes).
	unproven            int64
	maxUnproven         int64
	maxEndpointUnproven int64
	waiting             []*multiOp
	// byTag: the waiting message that claims frames held under its stream's tag (the
	// first to wait, where receives on the worker and on an endpoint share a tag);
	// adopted: those that took a tag over since multiBuffers.claimAdopted last ran.
	byTag   map[uint64]*multiOp
	adopted []*multiOp
}

// unprovenShare is the fraction of each bound that messages may hold on their
// headers' word (1/unprovenShare).
const unprovenShare = 4

func newAdmission(maxWorker, maxEndpoint int64) admission {
	return admission{worker: semaphore.NewWeighted(maxWorker), maxWorker: maxWorker, maxEndpoint: maxEndpoint,
		maxUnproven: maxWorker / unprovenShare, maxEndpointUnproven: maxEndpoint / unprovenShare,
		byTag: make(map[uint64]*multiOp)}
}

// admit reserves room for op and reports true, or queues it to wait for room or for
// its frames and reports false. Over a bound it can never fit, it returns
// StatusExceedsLimit.
func (a *admission) admit(op *multiOp) (bool, ucxx.Status) {
	size := int64(op.plan.footprint)
	if size < 0 || size > a.maxWorker || (op.ep != nil && size > a.maxEndpoint) {
		return false, ucxx.StatusExceedsLimit
	}
	if a.reserve(op) {
		return true, ucxx.StatusOK
	}
	a.waiting = append(a.waiting, op)
	if _, taken := a.byTag[op.tag]; !taken {
		a.byTag[op.tag] = op
	}
	return false, ucxx.StatusOK
}

// unprovenPart is op's footprint unless every one of its frames is here as announced
// (or the headers carried them all), then 0.
func (op *multiOp) unprovenPart() int64 {
	if frames := op.dec.FrameMessages(); frames == 0 || (uint64(op.evidenceFrames) == frames && len(op.wire) > 0) {
		return 0
	}
	return int64(op.plan.footprint)
}

// reserve takes op's footprint from both bounds and its unproven part from both
// allowances, or nothing.
func (a *admission) reserve(op *multiOp) bool {
	size, unproven := int64(op.plan.footprint), op.unprovenPart()
	if a.unproven+unproven > a.maxUnproven {
		return false
	}
	if op.ep != nil && (op.ep.heldBytes+size > a.maxEndpoint ||
		op.ep.unprovenBytes+unproven > a.maxEndpointUnproven) {
		return false
	}
	if !a.worker.TryAcquire(size) {
		return false
	}
	if op.ep != nil {
		op.ep.heldBytes += size
		op.ep.unprovenBytes += unproven
	}
	a.unproven += unproven
	op.reserved, op.unproven = size, unproven
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
		op.ep.unprovenBytes -= op.unproven
	}
	a.unproven -= op.unproven
	op.reserved, op.unproven = 0, 0
	return a.take(a.reserve)
}

// retry admits the waiting messages that claimed frames since they last tried, if
// they fit now, and returns them, their room reserved.
func (a *admission) retry(claimed []*multiOp) (admitted []*multiOp) {
	want := func(op *multiOp) bool {
		for _, c := range claimed {
			if c == op {
				return a.reserve(op)
			}
		}
		return false
	}
	return a.take(want)
}

// remove takes op out of the queue; false when it was not waiting.
func (a *admission) remove(op *multiOp) bool {
	return len(a.take(func(w *multiOp) bool { return w == op })) > 0
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
			if a.byTag[op.tag] == op {
				delete(a.byTag, op.tag)
			}
		} else {
			keep = append(keep, op)
		}
	}
	clear(a.waiting[len(keep):])
	a.waiting = keep
	if len(taken) > 0 {
		a.adoptTags()
	}
	return taken
}

// adoptTags gives each tag whose claiming message left to the next waiting message of
// that tag, if any.
func (a *admission) adoptTags() {
	for _, op := range a.waiting {
		if _, taken := a.byTag[op.tag]; !taken {
			a.byTag[op.tag] = op
			a.adopted = append(a.adopted, op)
		}
	}
}
