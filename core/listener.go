package core

import (
	"net"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// listener is an engine-owned listener, UCX's or a socket of the engine's own
// (direct.go); it belongs to the progress thread.
type listener struct {
	handle uint64
	u      *ucxx.Listener  // UCX's (ViaManager), or
	ln     net.Listener    // the engine's own socket (ViaAddress, direct.go)
	opts   EndpointOptions // what the endpoints it accepts are created with
	warmUp bool            // the engine's own, for its warm-up (warmup.go)
}

func (e *Engine) listen(handle uint64, ip string, port int, opts EndpointOptions) (int, error) {
	if opts.via() == ViaAddress {
		return e.listenAddress(handle, ip, port, opts)
	}
	u, err := e.worker.Listen(ip, port, handle)
	if err != nil {
		return 0, err
	}
	e.listeners[handle] = &listener{handle: handle, u: u, opts: opts}
	return u.Port, nil
}

func (e *Engine) closeListener(handle uint64) error {
	l := e.listeners[handle]
	if l == nil {
		return ErrListenerClosed
	}
	if l.ln != nil {
		l.ln.Close() // connections being greeted go on (direct.go)
	} else {
		l.u.Close()
	}
	delete(e.listeners, handle)
	return nil
}

// accept turns a connection request into an endpoint and starts its handshake.
func (e *Engine) accept(handle uint64, conn unsafe.Pointer) {
	l := e.listeners[handle]
	if l == nil {
		return
	}
	if e.stopping {
		l.u.Reject(conn)
		return
	}
	timeout := defaultAcceptTimeout
	if l.warmUp {
		timeout = warmUpTimeout
	}
	ep := e.newEndpoint(timeout)
	ep.listener = handle
	ep.warmUp = l.warmUp
	u, err := e.worker.AcceptEndpointWith(conn, ep.handle, l.opts.errHandling())
	if err != nil {
		e.discard(ep)
		return
	}
	ep.u = u
	if ep.warmUp {
		e.warmUpAccepted()
	}
	e.startHandshake(ep)
}
