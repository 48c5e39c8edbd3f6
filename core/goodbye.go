package core

// The goodbye of a graceful close. UCX tells the peer of a close on the connection
// manager's own socket, which can overtake the data still queued on the data lane; a
// peer with error handling then fails its endpoint at once, and the tail of what was
// sent (a rendezvous message's data, the last eager messages over TCP) is lost. So a
// graceful close, once its sends have ended, sends controlGoodbye on the control
// channel (control.go), behind everything it sent, and closes UCX's endpoint only
// when the peer answers controlGoodbyeAck, having taken everything in, or when the
// close's deadline passes. Both sides closing at once each answer the other's goodbye.

// sayGoodbye goes on with a graceful close whose sends have ended.
func (e *Engine) sayGoodbye(ep *endpoint) {
	ep.flushing = false
	if !ep.controlOn {
		e.closeUCX(ep, false)
		return
	}
	ep.awaitingGoodbyeAck = true
	e.sendControl(ep, controlGoodbye)
}

// onGoodbye answers the peer's goodbye: everything it sent has arrived.
// A peer says goodbye once: a repeat is not answered.
func (e *Engine) onGoodbye(ep *endpoint) {
	if ep.peerSaidGoodbye {
		return
	}
	ep.peerSaidGoodbye = true
	e.sendControl(ep, controlGoodbyeAck)
}

// onGoodbyeAck closes UCX's endpoint once the peer has everything.
func (e *Engine) onGoodbyeAck(ep *endpoint) {
	if ep.awaitingGoodbyeAck {
		e.closeUCX(ep, false)
	}
}

// goodbyeLost: the control receive ended without a word (the endpoint failed or is
// being forced closed); a close waiting for the peer's answer waits no more.
func (e *Engine) goodbyeLost(ep *endpoint) {
	if ep.awaitingGoodbyeAck {
		e.closeUCX(ep, true)
	}
}
