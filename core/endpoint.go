package core

import (
	"net"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// epPhase is where an endpoint is in its life; it only moves forward.
type epPhase uint8

const (
	phaseHandshake epPhase = iota // exchanging tags (by address: its UCX endpoint may not exist yet)
	phaseReady                    // the application may use it
	phaseClosing                  // ucp_ep_close_nbx issued
	phaseClosed                   // closed; freed once its last request ends
)

// defaultAcceptTimeout bounds the handshake of an accepted connection.
const defaultAcceptTimeout = 10 * time.Second

// endpoint is the engine's state for one connection. Its fields belong to the progress
// thread, except failed and the inline budgets, which application threads use.
type endpoint struct {
	handle uint64
	u      *ucxx.Endpoint
	phase  epPhase
	failed atomic.Int64 // the status that ended it; StatusOK while usable
	// How long application calls wait for inline completions (inline.go); theirs too.
	inlineSend, inlineRecv inlineBudget
	sendTag                uint64 // the peer's receive tag: our messages carry it
	recvTag                uint64 // ours, chosen at random (bit 63 clear) and told to the peer

	hs              unsafe.Pointer // C memory: the handshake's messages, then control words (control.go)
	hsSent, hsRecvd bool

	connectID uint64 // the application's Connect request, 0 once answered or for accepted
	listener  uint64 // the listener that accepted it, 0 for connected
	deadline  time.Time

	closeID  uint64 // the application's CloseEndpoint request, 0 once answered
	inflight int    // requests in the table that name this endpoint
	sends    int    // of those, sends (tag, active message, multi-buffer parts)
	// heldBytes: bytes of its multi-buffer messages being received (admission.go);
	// unprovenBytes: of those, bytes whose frames had not arrived when admitted.
	heldBytes     int64
	unprovenBytes int64
	// flushing: a graceful close waits for sends in flight before UCX closes the
	// endpoint (UCX's own flush does not finish a rendezvous send nobody receives).
	flushing bool
	// The goodbye of a graceful close (goodbye.go).
	controlOn          bool // the control receive is posted (control.go)
	awaitingGoodbyeAck bool // our goodbye is sent; UCX closes once the peer answers
	peerSaidGoodbye    bool // the peer closes gracefully and sent all it will send
	ucxClosing         bool // ucp_ep_close_nbx issued

	// Keepalive (keepalive.go): on, when the peer was last heard, a send in flight.
	kaOn, kaSending bool
	peerKeepalive   bool // the peer's handshake said it keeps the connection alive
	kaHeard         time.Time

	unexpectedBytes int64 // charge of its held unexpected messages (unexpected.go)
	claimedBytes    int64 // of that, the charge of frames a waiting message claimed (exempt)
	heldNoted       bool  // in heldChanged, for settleHeld (flowcontrol.go)
	remoteKeys      int   // remote keys unpacked on it (remotekeys.go)
	semaphores      int   // its semaphores (semaphores.go)

	// Flow control (flowcontrol.go). As sender: the peer's chunk (0: it does not
	// answer pings: not paced), the charge sent since the last ping, the pings
	// unanswered, and the sends held back, oldest first. As receiver: the pongs owed
	// and those being sent.
	peerChunkLog2 uint8 // the peer's chunk as its handshake named it (0: none)
	peerChunk     int64
	sinceLastPing int64
	pingsOut      int
	stalled       stalledQueue
	pongsOwed     int
	pongsSending  int

	known bool // the application was given this endpoint
	// info is what EndpointInfo reports of it, fixed when it is published (nothing in
	// it changes after that); application threads read it through the table's lock.
	info EndpointInfo
	// warmUp: the engine's own, for its warm-up (warmup.go); never the application's.
	warmUp bool

	mailbox amMailbox // its active messages and am_recvs (am.go)

	// A connection of ViaAddress (direct.go): its socket, its control tags (ours and
	// the peer's), the socket's ends, and the error handling mode its UCX endpoint is
	// (to be) made with.
	byAddress          bool
	dialing            *dialingConn // its connection being made (dialing.go), nil after
	conn               net.Conn
	ctlTag, peerCtlTag uint64
	local, remote      string
	errMode            ucxx.ErrHandling
}

// takes reports whether work s may be posted on ep: it is ready, or s is a send flow
// control held back that a graceful close waits for (flowcontrol.go).
func (ep *endpoint) takes(s *submission) bool {
	return ep != nil && (ep.phase == phaseReady || s.stalled && ep.flushing)
}

// describe is what EndpointInfo reports of ep. Progress thread.
func (ep *endpoint) describe() EndpointInfo {
	info := EndpointInfo{SendTag: ep.sendTag, RecvTag: ep.recvTag}
	if ep.byAddress {
		info.Local, info.Remote = ep.local, ep.remote
	} else if ep.u != nil {
		info.Local, info.Remote, _ = ep.u.Sockaddrs()
	}
	if ep.u != nil {
		info.UCPHandle = ep.u.Handle()
	}
	return info
}

// discard forgets an endpoint that never became ready, closed for good, so that
// messages still arriving on its tags are dropped rather than held for it.
func (e *Engine) discard(ep *endpoint) {
	ep.failed.Store(int64(ucxx.StatusCanceled))
	ep.phase = phaseClosed
	e.eps.remove(ep)
}

func (e *Engine) newEndpoint(timeout time.Duration) *endpoint {
	ep := &endpoint{handle: e.nextHandle.Add(1), recvTag: e.eps.newRecvTag(), deadline: time.Now().Add(timeout)}
	e.eps.add(ep)
	return ep
}

func (e *Engine) connect(s *submission) {
	if e.stopping { // beginStop failed the handshakes it found; this one would wait alone
		e.completeNow(s.id, ucxx.StatusCanceled, 0)
		return
	}
	timeout := time.Duration(s.timeout)
	if timeout <= 0 {
		timeout = defaultAcceptTimeout
	}
	if s.epOpts.via() == ViaAddress {
		e.connectAddress(s, timeout)
		return
	}
	ep := e.newEndpoint(timeout)
	ep.connectID = s.id
	u, err := e.worker.ConnectWith(s.text, s.port, ep.handle, s.epOpts.errHandling())
	if err != nil {
		e.discard(ep)
		e.completeNow(s.id, ucxx.StatusOf(err), 0)
		return
	}
	ep.u = u
	e.startHandshake(ep)
}

// onEndpointError handles UCX's error callback for an endpoint.
func (e *Engine) onEndpointError(handle uint64, st ucxx.Status) {
	ep := e.eps.get(handle)
	if ep != nil && ep.phase == phaseClosing && ep.flushing && ep.stalled.len() > 0 {
		// A close waiting for sends flow control holds back: no pong will come now.
		e.closeUCX(ep, true)
		return
	}
	if ep == nil || ep.phase >= phaseClosing {
		return
	}
	if ep.phase == phaseHandshake {
		e.failHandshake(ep, st)
		return
	}
	if ep.warmUp {
		e.teardown(ep, st, true)
		e.warmUpFailed(st)
		return
	}
	e.completeNow(EventEndpointError|handle, st, 0)
	e.teardown(ep, st, true)
}

// teardown stops an endpoint: no new work is accepted, receives in flight fail with
// st, and UCX closes it. Sends in flight are cancelled when force is set; otherwise
// the close waits for them (until the close deadline, then forces).
func (e *Engine) teardown(ep *endpoint, st ucxx.Status, force bool) {
	if ep.phase >= phaseClosing {
		return
	}
	if st == ucxx.StatusOK {
		st = ucxx.StatusCanceled
	}
	// The endpoint stays visible to application threads until UCX has closed it, so
	// work submitted meanwhile fails with this status rather than a bare "closed".
	ep.failed.Store(int64(st))
	peerLeft := ep.peerSaidGoodbye && st == ucxx.StatusConnectionReset
	if peerLeft {
		// The peer closed gracefully (goodbye.go): what is pending here is cancelled by
		// its close, as UCXX reports it, rather than broken. Receives posted from now
		// on still drain what it sent (ep.failed says it went away).
		st = ucxx.StatusCanceled
	}
	for _, r := range e.requests.byID {
		if r.ep != ep || r.canceled || (!force && (isSend(r.op) || r.op == opControl)) {
			continue
		}
		switch r.internal {
		case notInternal, stepMultiPart, stepMultiHeader, stepMultiDiscard, stepControlSend, stepControlRecv:
			r.canceled, r.override = true, st
			e.worker.Cancel(r.ucp)
		}
	}
	e.stopKeepalive(ep)
	e.rma.failWaits(ep, st)
	e.am.dropAM(ep, st)
	e.eps.untag(ep)
	ep.phase = phaseClosing
	// After the phase: the receives queued behind a message that waited for room then
	// fail as they come up, rather than post header receives nothing would cancel.
	e.multi.failWaiting(ep, st, peerLeft)
	switch {
	case force:
		e.closeUCX(ep, true)
	case ep.sends > 0 || ep.stalled.len() > 0:
		ep.flushing = true
	default:
		e.sayGoodbye(ep)
	}
}

// closeUCX asks UCX to close the endpoint; closed runs when it has.
//
// An endpoint without error handling is always force-closed, as UCXX closes every
// endpoint; a graceful close has waited for its sends and the peer's goodbye first
// (teardown, goodbye.go). Such an endpoint is not told when its peer closes first,
// and UCX's flush against a peer gone logs an ERROR per lane ("error during flush:
// Connection reset by remote peer").
func (e *Engine) closeUCX(ep *endpoint, force bool) {
	if ep.ucxClosing {
		return
	}
	ep.flushing, ep.awaitingGoodbyeAck, ep.ucxClosing = false, false, true
	e.eps.ucxClosing++
	e.failStalled(ep)
	if ep.u == nil { // a connection of ViaAddress that failed before its UCX endpoint
		e.closed(ep)
		return
	}
	if ep.byAddress {
		e.cancelControlRecv(ep)
		e.dropHeldControl(ep) // no receive will take them now
	}
	if ep.u.ErrHandling() == ucxx.ErrHandlingNone {
		force = true
	}
	r := e.requests.add(e.newID(), opCloseEndpoint, ep)
	r.internal = stepClose
	r.track(ep.u.Close(force, r.id))
}

// sendEnded lets a flushing close go on once the endpoint's last send has ended,
// flow control holding none back.
func (e *Engine) sendEnded(ep *endpoint) {
	if ep.flushing && ep.sends == 0 && ep.stalled.len() == 0 {
		e.sayGoodbye(ep)
	}
}

// closed runs when UCX finished closing the endpoint.
func (e *Engine) closed(ep *endpoint) {
	ep.phase = phaseClosed
	e.eps.ucxClosing--
	if ep.closeID != 0 {
		e.completeNow(ep.closeID, ucxx.StatusOK, 0)
		ep.closeID = 0
	}
	e.eps.remove(ep)
	if ep.conn != nil {
		e.conns.close(ep.conn) // the peer's reader sees the connection end (direct.go)
	}
	e.multi.forgetStreams(ep)
	e.rma.endpointClosed(ep)
	e.maybeFree(ep)
	if ep.warmUp {
		e.warmUpClosed()
	}
}

// maybeFree releases an endpoint's C memory once it is closed and its last request
// has ended (UCX may still write a cancelled handshake receive until then).
func (t *progressThread) maybeFree(ep *endpoint) {
	if ep.phase == phaseClosed && ep.inflight == 0 && ep.hs != nil {
		ucxx.CFree(ep.hs)
		ep.hs = nil
	}
}

func (e *Engine) closeEndpoint(s *submission) {
	e.eps.forget(s.ep)
	e.dropHeld(s.ep)
	ep := e.eps.get(s.ep)
	if ep == nil || ep.phase >= phaseClosing {
		// Closing twice, or after a failure: the close still completes.
		if ep != nil && ep.phase == phaseClosing && ep.closeID == 0 && s.id != 0 {
			ep.closeID = s.id
			e.eps.schedule(ep, time.Now().Add(time.Duration(s.timeout)))
			return
		}
		if s.id != 0 {
			e.completeNow(s.id, ucxx.StatusOK, 0)
		}
		return
	}
	ep.closeID = s.id
	e.eps.schedule(ep, time.Now().Add(time.Duration(s.timeout)))
	e.teardown(ep, ucxx.StatusCanceled, false)
}

func (e *Engine) abortEndpoint(s *submission) {
	e.eps.forget(s.ep)
	e.dropHeld(s.ep)
	if ep := e.eps.get(s.ep); ep != nil {
		e.teardown(ep, ucxx.StatusCanceled, true)
	}
}

// checkDeadlines fails handshakes and answers closes that took too long.
func (e *Engine) checkDeadlines(now time.Time) {
	e.eps.expire(func(ep *endpoint) bool {
		switch {
		case ep.phase == phaseHandshake && now.After(ep.deadline):
			e.failHandshake(ep, ucxx.StatusTimedOut)
		case ep.phase == phaseHandshake:
			return true
		case (ep.flushing || ep.awaitingGoodbyeAck) && now.After(ep.deadline):
			// The sends did not finish, or the peer did not answer our goodbye, in
			// time: close anyway, which cancels what is left.
			e.closeUCX(ep, true)
			ep.deadline = now.Add(time.Second)
			return true
		case ep.flushing || ep.awaitingGoodbyeAck:
			return true
		case ep.closeID != 0 && now.After(ep.deadline):
			// UCX goes on closing in the background; the application has waited enough.
			e.completeNow(ep.closeID, ucxx.StatusOK, 0)
			ep.closeID = 0
		case ep.closeID != 0:
			return true
		}
		return false
	})
}
