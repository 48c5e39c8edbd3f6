package core

import (
	"net"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Warm-up: a connection's first use of an endpoint configuration costs UCX's making
// of it, with its protocol selection, once per worker and configuration, on each side
// (benchmarks/RESULTS.md, section 3 and session 23). WarmUp makes them ahead of time.
// None of it is visible to the application: no event, no endpoint, no listener it
// could see or close.
//
// By address exchange (ViaAddress, the default) a connection to another process of
// this host uses one configuration a side, towards that process: warmUpByAddress
// makes it with a second worker of the engine's context in that process's place. A
// connection to another host takes another configuration, which it cannot make.
//
// Through UCX's connection manager (ViaManager), with UCX's TCP transport on a lane
// the selections are most of a first connection (each of the selection's hundreds of
// performance estimates queries the TCP interface through sysfs, /proc and ioctls),
// and a connection through a listener goes through several configurations on each
// side: the connection manager's, with TCP lanes only, then the final one. The
// warm-up connects to a listener of its own on a local IP address, which creates the
// configurations of both sides of a connection reached through that address's device,
// and closes both endpoints and the listener once the tag handshake is done. Later
// connections through the same device find the configurations made. What it cannot
// make is the final configuration towards another process (an endpoint to its own
// worker uses UCX's "self" transport instead), so a first connection still selects
// protocols for that one, on shared memory a few milliseconds.
//
// Either costs CPU time on the progress thread (by address 11-15 ms on the dev VM,
// most of it the second worker's making; through the manager tens of milliseconds to
// over a hundred), and work submitted meanwhile waits. So it is not done unless asked
// for (Options.WarmUp, WarmUp).

// warmUpTimeout bounds a warm-up's connection, as a handshake deadline: a loopback
// connection that takes longer has met something other than protocol selection.
const warmUpTimeout = 5 * time.Second

// warmUpPhase is where the engine's warm-up is: none, running, done; a failed one
// may run again.
type warmUpPhase uint8

const (
	warmUpNone    warmUpPhase = iota // not asked for
	warmUpRunning                    // connecting, or closing what it opened
	warmUpDone                       // finished; status says how
)

// warmUp is the engine's one warm-up. Progress thread.
type warmUp struct {
	phase    warmUpPhase
	status   ucxx.Status // how it ended: StatusOK, or why it could not connect
	listener uint64      // its listener while open, else 0
	open     int         // its endpoints not yet closed by UCX
	ready    int         // of those, the ones whose handshake finished
	waiters  []uint64    // WarmUp requests to complete when it ends
}

// WarmUp makes UCX's endpoint configurations for the engine's connections ahead of
// the first one (see warmup.go): by address exchange those towards processes of this
// host, ip being an address of this host; through the connection manager those of
// connections through ip's device (a local address, e.g. "127.0.0.1"). It returns a
// request id. Its completion comes when the warm-up has ended: StatusOK, or the
// status that stopped it (StatusInvalidAddr by address, StatusUnreachable through the
// manager: no device has ip, say).
// An engine warms up once: asked again while a warm-up runs or after one succeeded,
// it completes when that one has ended, with its status, whatever ip is; after one
// failed, it tries again through ip. StatusCanceled if the engine stops first.
//
// Errors: ErrEngineClosed.
func (e *Engine) WarmUp(ip string) (uint64, error) {
	id := e.newID()
	return id, e.submit(submission{op: opCall, call: func() { e.startWarmUp(ip, id) }})
}

// startWarmUp starts the warm-up through ip, or adds id (0: none) to those waiting
// for the one started.
func (e *Engine) startWarmUp(ip string, id uint64) {
	w := &e.warm
	switch {
	case w.phase == warmUpDone && w.status == ucxx.StatusOK:
		if id != 0 {
			e.completeNow(id, w.status, 0)
		}
		return
	case w.phase == warmUpRunning:
		if id != 0 {
			w.waiters = append(w.waiters, id)
		}
		return
	}
	*w = warmUp{phase: warmUpRunning}
	if id != 0 {
		w.waiters = append(w.waiters, id)
	}
	if e.stopping {
		e.endWarmUp(ucxx.StatusCanceled)
		return
	}
	if (EndpointOptions{}).via() == ViaAddress {
		e.endWarmUp(e.warmUpByAddress(ip))
		return
	}
	handle := e.nextHandle.Add(1)
	port, err := e.listen(handle, ip, 0, EndpointOptions{Via: ViaManager})
	if err != nil {
		e.endWarmUp(ucxx.StatusOf(err))
		return
	}
	e.listeners[handle].warmUp = true
	w.listener = handle
	ep := e.newEndpoint(warmUpTimeout)
	ep.warmUp = true
	u, err := e.worker.ConnectWith(ip, port, ep.handle, ucxx.ErrHandlingPeer)
	if err != nil {
		e.eps.remove(ep)
		e.closeWarmUpListener()
		e.endWarmUp(ucxx.StatusOf(err))
		return
	}
	ep.u = u
	w.open++
	e.startHandshake(ep)
}

// warmUpByAddress is the warm-up of an engine whose connections are made by address
// exchange (the default): what a first connection to another process of this host
// costs beyond later ones is UCX's making of the endpoint configuration towards it
// (its lanes, its short protocols), once per worker, on each side. A second worker of
// the engine's context stands in for that process (a configuration depends on the
// peer's transports and devices, which a worker of the same context has alike): the
// engine makes an endpoint to it, then closes the endpoint and destroys the worker,
// before it returns. ip must be an address of this host, as a listener's (a socket is
// bound to it). Connections to other hosts take another configuration, which this
// cannot make. Progress thread.
func (e *Engine) warmUpByAddress(ip string) ucxx.Status {
	if err := checkIP("warm up", ip, false); err != nil {
		return ucxx.StatusInvalidParam
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return ucxx.StatusInvalidAddr // no device of this host has ip
	}
	ln.Close()
	peer, err := e.ctx.NewWorker(false)
	if err != nil {
		return ucxx.StatusOf(err)
	}
	defer peer.Close()
	address, err := peer.Address()
	if err != nil {
		return ucxx.StatusOf(err)
	}
	// Under a handle of no endpoint: UCX's events for it find none.
	u, err := e.worker.ConnectAddressWith(address, e.nextHandle.Add(1), ucxx.ErrHandlingPeer)
	if err != nil {
		return ucxx.StatusOf(err)
	}
	// Forced: nothing was sent on it. A completion UCX reports later names no request.
	u.Close(true, 0)
	e.settleDiscards(warmUpSettle)
	return ucxx.StatusOK
}

// warmUpSettle bounds how long the by-address warm-up waits for UCX to discard its
// endpoint's transports before destroying the worker it connected to.
const warmUpSettle = 100 * time.Millisecond

// settleDiscards progresses the worker until UCX has finished discarding the
// transports of endpoints closed by force (a worker flush ends after them), or until
// d has passed. With UCX's TCP transport on a lane (UCX_TLS=tcp, hosts in network
// namespaces) the warm-up's endpoint has a connection under way to its second worker:
// destroyed before the discard ended, that worker's closed port made UCX retry the
// connection and log "Connection refused" errors. The flush is a request in flight
// until its completion event is drained (a shutdown waits for it); a flush still
// running at d leaves the retries possible, and is not waited for here.
func (e *Engine) settleDiscards(d time.Duration) {
	r := e.requests.add(e.newID(), opFlush, nil)
	r.internal = stepWorkerFlush
	req, st := e.worker.Flush(r.id)
	r.track(req, st)
	if st != ucxx.StatusInProgress || req == nil {
		return // ended at once: its completion event was pushed
	}
	deadline := time.Now().Add(d)
	for !ucxx.RequestDone(req) && time.Now().Before(deadline) {
		e.worker.Progress()
	}
}

// warmUpAccepted counts the warm-up's accepted endpoint.
func (e *Engine) warmUpAccepted() { e.warm.open++ }

// warmUpReady: a warm-up endpoint finished its handshake. Once both have, both are
// closed (forced: nothing was sent on them) and so is the listener.
func (e *Engine) warmUpReady() {
	w := &e.warm
	w.ready++
	if w.ready < 2 {
		return
	}
	e.closeWarmUpListener()
	for _, other := range e.eps.byHandle {
		if other.warmUp && other.phase < phaseClosing {
			e.teardown(other, ucxx.StatusCanceled, true)
		}
	}
}

// warmUpFailed: a warm-up endpoint failed (the connection could not be made, timed
// out, or broke), and is being closed. The warm-up ends with st once the rest is
// closed too.
func (e *Engine) warmUpFailed(st ucxx.Status) {
	w := &e.warm
	if w.status == ucxx.StatusOK && w.phase == warmUpRunning {
		w.status = st
	}
	e.closeWarmUpListener()
	for _, other := range e.eps.byHandle {
		if other.warmUp && other.phase < phaseClosing {
			e.teardown(other, ucxx.StatusCanceled, true)
		}
	}
}

// warmUpClosed: UCX closed a warm-up endpoint. The warm-up ends with the last.
func (e *Engine) warmUpClosed() {
	w := &e.warm
	if w.open > 0 { // 0: the engine stopped, and a warm-up tried since counted none
		w.open--
	}
	if w.open == 0 && w.phase == warmUpRunning {
		e.closeWarmUpListener()
		e.endWarmUp(w.status)
	}
}

func (e *Engine) closeWarmUpListener() {
	if h := e.warm.listener; h != 0 {
		e.warm.listener = 0
		_ = e.closeListener(h)
	}
}

// endWarmUp records how the warm-up ended and answers those waiting for it.
func (e *Engine) endWarmUp(st ucxx.Status) {
	w := &e.warm
	w.phase, w.status = warmUpDone, st
	for _, id := range w.waiters {
		e.completeNow(id, st, 0)
	}
	w.waiters = nil
}

// stopWarmUp: the engine stops. Its endpoints and listener are closed with the rest
// (beginStop); those waiting are answered now, unless it already ended.
func (e *Engine) stopWarmUp() {
	if e.warm.phase == warmUpRunning {
		e.warm.listener = 0
		e.endWarmUp(ucxx.StatusCanceled)
	}
}
