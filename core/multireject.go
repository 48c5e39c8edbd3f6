package core

import (
	"errors"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Rejected messages: a message whose headers break a limit or the format fails; its
// remaining headers and frames are received and dropped where the stream can recover
// (MessageDecoder.Discardable), or the stream is poisoned.

// maxDiscardsInFlight bounds the receives posted at once to drop a rejected message:
// a peer may announce up to 2^64 frames, and the drop must not cost memory in
// proportion.
const maxDiscardsInFlight = 64

// rejectMessage fails a message whose headers broke a limit or the format. Its
// remaining headers and frames are consumed and dropped when the decoder says the
// stream can recover so (MessageDecoder.Discardable); otherwise the stream is poisoned.
func (m *multiBuffers) rejectMessage(op *multiOp, err error) {
	q := op.queue
	op.status = ucxx.StatusIOError
	if errors.Is(err, ErrLimit) {
		op.status = ucxx.StatusExceedsLimit
	}
	if n, ok := op.dec.Discardable(); ok {
		q.discardLeft += n
	} else {
		q.poisoned = op.status
	}
	m.finishMulti(op)
	m.nextReceive(q)
}

// rejectWhole fails a fully described message and drops its frames.
func (m *multiBuffers) rejectWhole(op *multiOp, st ucxx.Status) {
	q := op.queue
	op.status = st
	q.discardLeft += op.dec.FrameMessages()
	m.finishMulti(op)
	m.nextReceive(q)
}

// pumpDiscards posts the drops of a rejected message, a window at a time.
func (m *multiBuffers) pumpDiscards(q *multiQueue) {
	for q.discardLeft > 0 && q.discardInFlight < maxDiscardsInFlight {
		ep := m.eps.get(q.key.ep)
		if q.key.ep != 0 && (ep == nil || !usable(ep)) {
			// Gone or going: what is left of the message will not come, and what came
			// is dropped with the endpoint's other unreceived messages (unexpected.go).
			q.discardLeft = 0
			return
		}
		q.discardLeft--
		q.discardInFlight++
		r := m.requests.add(m.newID(), opTagRecv, ep)
		r.internal, r.stream = stepMultiDiscard, q
		m.postTagRecv(r, 0, 0, q.key.tag, ^uint64(0), 0)
	}
}

// onDiscard handles the end of one drop.
func (m *multiBuffers) onDiscard(r *request) {
	q := r.stream
	q.discardInFlight--
	if q.discardLeft > 0 {
		m.startRecvMulti(q)
	} else {
		m.forgetIfIdle(q)
	}
}
