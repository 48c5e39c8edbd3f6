package core

import (
	"math/bits"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Flow control. A receiver holds the messages no receive was posted for (tag messages:
// unexpected.go; active messages no am_recv took: am.go), and an endpoint whose held
// messages pass Options.MaxUnexpectedBytes fails: that bound is for peers that flood.
// An honest sender that sends faster than its receiver receives is paced instead, as
// TCP paces a writer whose reader is slow.
//
// The receiver's handshake names its chunk: a sixteenth of its bound, rounded down to
// a power of two. The sender counts what each of its messages (send, send_multi,
// am_send) will be charged at the receiver, and after each chunk of it sends
// controlPing on the control channel (control.go), behind the messages it counted.
// The receiver, having taken in everything before the ping, answers controlPong once
// its held messages from that endpoint are at most half its bound. A sender with
// flowWindow pings unanswered keeps the endpoint's further sends, in order, unposted
// and pending (their awaits wait), until a pong comes. An honest sender's messages
// held at once thus stay under half the bound plus flowWindow+1 chunks and one
// message (a send_multi's frames, or an active message, count as one): 11/16 of the
// bound and one message.
//
// It costs a control word each way per chunk (4 MiB at the default bound), and the
// sender stalls only while its receiver is a window behind. Like TCP, and unlike
// UCXX (which holds everything), two sides that each finish their sends before they
// receive wait for good once each has sent the other more than half its bound; so
// does a receiver waiting for a message stalled behind half a bound of messages it
// has not received. A connection whose sides lack the control channel (no error
// handling, ConnectAddress) is not paced.

// flowWindow is how many pings a sender may have unanswered before it stalls.
const flowWindow = 2

// maxPongsSending bounds a receiver's pongs in flight on one endpoint; further ones
// owed wait as a count (a peer that pings without reading cannot pile up sends).
const maxPongsSending = 4

// flowChunkLog2 is the base-2 logarithm of the chunk a receiver with bound max names
// in its handshake: a sixteenth of max, at least 4 KiB.
func flowChunkLog2(max int64) uint8 {
	n := max / 16
	if n < 4<<10 {
		return 12
	}
	return uint8(bits.Len64(uint64(n)) - 1)
}

// chunkNamed is the chunk's base-2 logarithm e names in the handshake of an endpoint
// with error handling mode: 0 (it answers no pings) without peer error handling, which
// leaves it no control channel.
func (e *Engine) chunkNamed(mode ucxx.ErrHandling) uint8 {
	switch {
	case mode != ucxx.ErrHandlingPeer:
		return 0
	case e.namedChunk != 0:
		return e.namedChunk
	}
	return flowChunkLog2(e.unexpected.max)
}

// validChunkLog2 reports whether a peer's named chunk is one flowChunkLog2 could name.
func validChunkLog2(k uint8) bool { return k >= 12 && k <= 62 }

// sendCharge is what s, a send, will be charged at its receiver.
func sendCharge(s *submission) int64 {
	switch s.op {
	case opAMSend:
		return heldCharge(s.size, true)
	case opSendMulti:
		c := heldCharge(MaxHeaderSize, false)
		for _, f := range s.multi.frames {
			c += heldCharge(f.Size, false)
		}
		return c
	}
	return heldCharge(s.size, false)
}

// dispatchSend posts s, a send, unless its endpoint is paced and stalled: then s
// waits, in order, behind the endpoint's stalled sends.
func (e *Engine) dispatchSend(s *submission) {
	ep := e.eps.get(s.ep)
	if ep == nil || ep.peerChunk == 0 || ep.phase != phaseReady {
		e.postSend(s, ep, false) // not paced; an endpoint not ready fails it
		return
	}
	if ep.stalled.len() > 0 || ep.pingsOut >= flowWindow {
		if e.stalledAt == nil {
			e.stalledAt = make(map[uint64]stalledPlace)
		}
		e.stalledAt[s.id] = stalledPlace{ep, ep.stalled.push(s)}
		return
	}
	e.postSend(s, ep, true)
}

// stalledPlace is where a stalled send is: its endpoint and its sequence number there.
type stalledPlace struct {
	ep  *endpoint
	seq uint64
}

// unindexStalled forgets where the stalled send with request id id was; the index's
// storage goes with its last entry (a Go map never shrinks).
func (e *Engine) unindexStalled(id uint64) {
	delete(e.stalledAt, id)
	if len(e.stalledAt) == 0 {
		e.stalledAt = nil
	}
}

// postSend posts s on ep, its endpoint (nil: gone), and, if ep is paced, counts its
// charge and pings after a chunk (after posting: the ping goes behind the messages it
// counts).
func (e *Engine) postSend(s *submission, ep *endpoint, paced bool) {
	var charge int64
	if paced {
		charge = sendCharge(s) // before posting: a send_multi's op may be recycled by then
	}
	switch s.op {
	case opTagSend:
		e.postTagSend(s, ep)
	case opSendMulti:
		e.multi.sendMulti(s)
	case opAMSend:
		e.am.amSend(s)
	}
	if !paced || ep.ucxClosing {
		return
	}
	if ep.sinceLastPing += charge; ep.sinceLastPing >= ep.peerChunk {
		ep.sinceLastPing = 0
		ep.pingsOut++
		e.sendControl(ep, controlPing)
	}
}

// onPong: the peer took in what a ping counted; stalled sends go while the window
// allows. A pong no ping asked for changes nothing.
func (e *Engine) onPong(ep *endpoint) {
	if ep.pingsOut == 0 {
		return
	}
	ep.pingsOut--
	e.releaseStalled(ep)
}

// releaseStalled posts an endpoint's stalled sends, oldest first, while fewer than
// flowWindow pings are unanswered. A graceful close waiting for them (flushing) lets
// them go as the endpoint's other sends.
func (e *Engine) releaseStalled(ep *endpoint) {
	for ep.stalled.len() > 0 && ep.pingsOut < flowWindow && (ep.phase == phaseReady || ep.flushing) {
		s, _ := ep.stalled.pop()
		e.unindexStalled(s.id)
		if s.cuda.device != 0 {
			e.cuda.useDevice(s.cuda.device - 1) // current when it passed the gate; maybe not now
		}
		e.postSend(&s, ep, true)
	}
	if ep.stalled.len() == 0 {
		e.sendEnded(ep) // a close waiting for them goes on once they end
	}
}

// failStalled fails an endpoint's stalled sends with its status (UCX is closing it).
func (e *Engine) failStalled(ep *endpoint) {
	stalled := ep.stalled.takeAll()
	for i := range stalled {
		e.unindexStalled(stalled[i].id)
		stalled[i].stalled = false
		e.postSend(&stalled[i], ep, false) // the endpoint is not ready: each fails with its status
	}
}

// cancelStalled completes the stalled send with request id id as cancelled, if one
// is: it never reached UCX.
func (e *Engine) cancelStalled(id uint64) bool {
	at, ok := e.stalledAt[id]
	if !ok {
		return false
	}
	e.unindexStalled(id)
	s, ok := at.ep.stalled.remove(at.seq, id)
	if !ok {
		return false
	}
	if s.multi != nil {
		putMultiOp(s.multi)
	}
	e.completeNow(id, ucxx.StatusCanceled, 0)
	if at.ep.stalled.len() == 0 {
		e.sendEnded(at.ep)
	}
	return true
}

// heldLevel is what ep's held messages count against its bound: tag messages beyond
// the frames waiting messages claimed, and active messages.
func (ep *endpoint) heldLevel() int64 {
	return ep.unexpectedBytes - ep.claimedBytes + ep.mailbox.charge
}

// noteHeld marks that ep's held messages changed; settleHeld acts on it.
func (t *progressThread) noteHeld(ep *endpoint) {
	if ep != nil && !ep.heldNoted {
		ep.heldNoted = true
		t.heldChanged = append(t.heldChanged, ep)
	}
}

// settleHeld acts on the endpoints whose held messages changed: one past the bound
// fails with StatusExceedsLimit (its held messages are dropped); one at most at half
// the bound answers the pings it owes.
func (e *Engine) settleHeld() {
	for len(e.heldChanged) > 0 {
		changed := e.heldChanged
		e.heldChanged = nil
		for _, ep := range changed {
			ep.heldNoted = false
			switch {
			case ep.phase >= phaseClosing:
			case ep.heldLevel() > e.unexpected.max:
				e.onEndpointError(ep.handle, ucxx.StatusExceedsLimit)
				e.dropHeld(ep.handle)
			default:
				e.answerPings(ep)
			}
		}
	}
}

// onPing: the peer sent a chunk, all of which has arrived. What UCX holds unexpected is
// counted first, then the ping is answered if the held messages allow.
func (e *Engine) onPing(ep *endpoint) {
	ep.pongsOwed++
	e.drainUnexpected()
	e.answerPings(ep)
}

// answerPings sends the pongs ep owes while its held messages are at most half the
// bound, up to maxPongsSending in flight.
func (e *Engine) answerPings(ep *endpoint) {
	if ep.pongsOwed == 0 || ep.ucxClosing || ep.heldLevel() > e.unexpected.max/2 {
		return
	}
	for ep.pongsOwed > 0 && ep.pongsSending < maxPongsSending {
		ep.pongsOwed--
		ep.pongsSending++
		e.sendControl(ep, controlPong)
	}
}

// pongSent: a pong's send ended; owed ones may go.
func (e *Engine) pongSent(ep *endpoint) {
	ep.pongsSending--
	e.answerPings(ep)
}
