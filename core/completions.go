package core

import (
	"github.com/ucxx-go/ucxx-go/notifier"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Completion routing, in one place: every UCX request's end comes to onCompletion,
// which hands an engine-owned request to the component that owns its step and an
// application's to the submitting call still waiting inline or to the queue.
// Completions with no UCX request behind them go through completeNow; flush moves
// them all to the queue once per pass.

// onCompletion handles the end of one UCX request.
func (e *Engine) onCompletion(ev *ucxx.Event) {
	ucxx.FreeRequest(ev.Ptr)
	r := e.requests.remove(ev.ID)
	if r == nil {
		return
	}
	st, length := ev.Status, ev.Length
	if r.override != ucxx.StatusOK && st != ucxx.StatusOK {
		st = r.override
	}
	if r.op == opTagSend && st == ucxx.StatusOK {
		length = r.sent
	}
	switch {
	case r.internal != notInternal:
		e.onInternal(r, st, length)
	case r.slot != 0 && e.inline.complete(r.slot, r.id, st, length):
		// the submitting call took it
	default:
		e.complete(notifier.Completion{ID: r.id, Status: int64(st), Length: length, Tag: ev.Tag})
	}
	if r.ep != nil {
		if isSend(r.op) {
			e.sendEnded(r.ep)
		}
		e.maybeFree(r.ep)
	}
	e.requests.recycle(r)
}

// flush moves pending completions into the queue and wakes its consumer once. What
// does not fit stays pending for the next pass (the consumer is then awake).
func (e *Engine) flush() {
	if len(e.pending) == 0 {
		return
	}
	n := e.queue.Push(e.pending)
	rest := copy(e.pending, e.pending[n:])
	e.pending = e.pending[:rest]
	if !e.inProgress {
		e.queue.Notify()
	}
}

// onInternal routes the end of one of the engine's own requests to its owner.
func (e *Engine) onInternal(r *request, st ucxx.Status, length uint64) {
	switch r.internal {
	case stepMultiPart:
		e.multi.onMultiPart(r, st, length)
	case stepMultiHeader:
		e.multi.onMultiHeader(r, st, length)
	case stepMultiDiscard:
		e.multi.onDiscard(r)
	case stepAMData:
		e.am.onAMData(r, st, length)
	case stepHandshakeSend, stepHandshakeRecv:
		e.onHandshakeStep(r, st)
	case stepControlSend, stepControlRecv:
		e.onControl(r, st, length)
	case stepRMAPart:
		e.rma.onPart(r, st)
	case stepDropUnexpected, stepWorkerFlush:
	case stepClose:
		e.closed(r.ep)
	}
}

// completeNow reports a completion that has no UCX request behind it.
func (t *progressThread) completeNow(id uint64, st ucxx.Status, length uint64) {
	t.complete(notifier.Completion{ID: id, Status: int64(st), Length: length})
}

// complete hands c to the sink its request was submitted through, or queues it.
func (t *progressThread) complete(c notifier.Completion) {
	if len(t.routes) > 0 {
		if s := t.routes[c.ID]; s != nil {
			delete(t.routes, c.ID)
			s.deliver(c)
			return
		}
	}
	t.pending = append(t.pending, c)
}
