package core

import (
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Keepalive: a peer that stops (SIGSTOP, a hung host) keeps its TCP connection up, and
// the kernel still acknowledges it, so neither TCP nor UCX notices. The progress
// thread therefore sends each ready endpoint's peer controlKeepalive on the control
// channel (control.go) every interval. An endpoint that has heard nothing for
// Options.KeepaliveTimeout fails with StatusTimedOut, as if UCX had reported it: its
// pending operations fail and EventEndpointError is reported. Both sides of a
// connection must want it (the tag handshake, or the hello of a connection by address
// (direct.go), tells each side the other's choice);
// endpoints made by ConnectAddress, or without error handling, have none.

// DefaultKeepaliveTimeout is the default Options.KeepaliveTimeout.
const DefaultKeepaliveTimeout = 30 * time.Second

// keepalive is the engine's keepalive schedule. Progress thread.
type keepalive struct {
	timeout  time.Duration // 0: off
	interval time.Duration // timeout/3
	watched  int           // endpoints with keepalive on
	next     time.Time     // the next tick
}

// due reports whether a tick is due at now.
func (k *keepalive) due(now time.Time) bool { return k.watched > 0 && !now.Before(k.next) }

// keepaliveWanted reports whether this side keeps ep alive (the handshake tells the
// peer).
func (e *Engine) keepaliveWanted(ep *endpoint) bool {
	return e.ka.timeout > 0 && ep.u.ErrHandling() == ucxx.ErrHandlingPeer
}

// startKeepalive turns keepalive on for an endpoint that just became ready, if both
// sides want it.
func (e *Engine) startKeepalive(ep *endpoint) {
	if !ep.peerKeepalive || !e.keepaliveWanted(ep) {
		return
	}
	ep.kaOn, ep.kaHeard = true, time.Now()
	if e.ka.watched == 0 {
		e.ka.next = ep.kaHeard.Add(e.ka.interval)
	}
	e.ka.watched++
}

// heard notes that a control word came from the peer.
func (e *Engine) heard(ep *endpoint) {
	if ep.kaOn {
		ep.kaHeard = time.Now()
	}
}

// stopKeepalive takes a closing endpoint off the schedule.
func (e *Engine) stopKeepalive(ep *endpoint) {
	if ep.kaOn {
		ep.kaOn = false
		e.ka.watched--
	}
}

// keepaliveTick fails the endpoints that have heard nothing for the timeout and sends
// a keepalive on the others.
func (e *Engine) keepaliveTick(now time.Time) {
	e.ka.next = now.Add(e.ka.interval)
	var silent []*endpoint
	for _, ep := range e.eps.byHandle {
		switch {
		case !ep.kaOn || ep.phase != phaseReady:
		case now.Sub(ep.kaHeard) > e.ka.timeout:
			silent = append(silent, ep)
		case !ep.kaSending:
			ep.kaSending = true
			e.sendControl(ep, controlKeepalive)
		}
	}
	for _, ep := range silent {
		e.onEndpointError(ep.handle, ucxx.StatusTimedOut)
	}
}
