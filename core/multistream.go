package core

import (
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Streams: the multi-buffer receives of one endpoint and tag run one after another,
// since the frames of consecutive messages share the tag and UCX matches receives in
// the order they are posted.

// multiKey names the stream of multi-buffer receives of one endpoint and tag.
type multiKey struct{ ep, tag uint64 }

// multiQueue holds the receives of one stream, the first active. A stream the peer
// broke (a header we could not parse) is poisoned: its receives fail from then on, until
// the endpoint closes. A stream dropping a rejected message holds its receives back
// until every message to drop has a receive posted ahead of theirs.
type multiQueue struct {
	key             multiKey
	ops             []*multiOp
	active          bool // ops[0] has posted its header receive
	poisoned        ucxx.Status
	discardLeft     uint64 // messages still to drop, whose receives are not posted yet
	discardInFlight int
	// receiving counts the receives whose frames are posted and not all in; ready
	// holds messages of cancelled receives that no receive took yet (handOver).
	receiving int
	ready     []unsafe.Pointer
}

// idle reports whether the stream holds nothing worth keeping: no receive, no drop,
// no message of a cancelled receive, no poison.
func (q *multiQueue) idle() bool {
	return len(q.ops) == 0 && !q.active && q.poisoned == ucxx.StatusOK && q.discardLeft == 0 &&
		q.discardInFlight == 0 && q.receiving == 0 && len(q.ready) == 0
}

// forgetIfIdle drops an idle stream; the next receive on its key starts a new one.
func (m *multiBuffers) forgetIfIdle(q *multiQueue) {
	if q.idle() && m.multiRecv[q.key] == q {
		delete(m.multiRecv, q.key)
	}
}

// usable reports whether receives may be posted for ep (nil: the worker itself).
func usable(ep *endpoint) bool { return ep == nil || ep.phase == phaseReady }

// framesHere reports whether the frames of a message whose header came may still be
// received from ep: it is usable, or its peer closed it gracefully, which it does
// once all it sent has gone (goodbye.go): its frames are here already.
func framesHere(ep *endpoint) bool { return usable(ep) || ep.peerSaidGoodbye }

// startRecvMulti starts the first receive of a stream, failing those that cannot run.
func (m *multiBuffers) startRecvMulti(q *multiQueue) {
	if q.active {
		return
	}
	if q.discardLeft > 0 {
		m.pumpDiscards(q)
		if q.discardLeft > 0 {
			return // the rest start once the last drop is posted
		}
	}
	for len(q.ops) > 0 {
		op := q.ops[0]
		st := q.poisoned
		if st == ucxx.StatusOK && !usable(op.ep) {
			st = endpointStatus(op.ep)
		}
		if st == ucxx.StatusOK {
			if dry, ok := m.drainedDry(op); ok {
				st = dry // its peer is gone, and sent nothing more
			}
		}
		if st == ucxx.StatusOK {
			op.dec.Reset()
			op.dec.Limits = m.limits
			op.ensureHeaders(InlineLimit)
			q.active = true
			m.postHeaderRecv(op)
			return
		}
		q.ops = q.ops[1:]
		op.status = st
		m.finishMulti(op)
	}
	m.forgetIfIdle(q)
}

// nextReceive takes the stream's first receive off it once that receive has posted every
// receive of its message (or failed), and starts the next.
func (m *multiBuffers) nextReceive(q *multiQueue) {
	q.ops[0] = nil
	q.ops = q.ops[1:]
	q.active = false
	m.startRecvMulti(q)
}

// forgetStreams drops the multi-buffer streams of a closed endpoint.
func (m *multiBuffers) forgetStreams(ep *endpoint) {
	for key := range m.multiRecv {
		if key.ep == ep.handle {
			for _, block := range m.multiRecv[key].ready {
				freeReceivedBlock(block, m.cuda)
			}
			delete(m.multiRecv, key)
		}
	}
}

// stopWorkerStreams ends the receives on the worker's streams at shutdown, which no
// endpoint's teardown reaches: each stream is poisoned (Canceled), so that what is
// queued fails as it would come up, and a posted header receive is cancelled (its
// completion ends its receive and starts, so fails, the next).
func (m *multiBuffers) stopWorkerStreams() {
	for key, q := range m.multiRecv {
		if key.ep != 0 {
			continue
		}
		q.poisoned = ucxx.StatusCanceled
		q.discardLeft = 0 // drops still to post: none (those posted the stop cancels)
		if !q.active {
			m.startRecvMulti(q)
			continue
		}
		if op := q.ops[0]; !op.framesPosted {
			m.cancelParts(op)
		}
	}
}
