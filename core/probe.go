package core

import (
	"unsafe"

	"github.com/ucxx-go/ucxx-go/core/topology"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// ProbeResult is what TagProbe found.
type ProbeResult struct {
	Found     bool
	SenderTag uint64
	Length    uint64
	Handle    uint64 // with remove: the message, to receive with RecvProbed
}

// TagProbe looks for an unreceived message matching tag under mask. With remove, a
// message found is taken off UCX's queue and must be received with RecvProbed.
func (e *Engine) TagProbe(tag, mask uint64, remove bool) (res ProbeResult, err error) {
	err = e.onThread(func() {
		var msg unsafe.Pointer
		if i := e.unexpected.find(tag, mask); i >= 0 {
			m := e.unexpected.held[i]
			if remove {
				m = e.unexpected.take(i)
				e.noteHeld(m.owner) // settled after the pass: pings it owes may be answered
			}
			res.Found, res.SenderTag, res.Length, msg = true, m.tag, m.length, m.msg
		} else {
			res.Found, res.SenderTag, res.Length, msg = e.worker.TagProbe(tag, mask, remove)
		}
		if res.Found && remove {
			res.Handle = e.nextHandle.Add(1)
			e.probed[res.Handle] = msg
		}
	})
	return res, err
}

// RecvProbed receives a message that TagProbe removed into size bytes at addr.
func (e *Engine) RecvProbed(handle uint64, addr uintptr, size uint64) (uint64, error) {
	id := e.newID()
	return id, e.submit(submission{op: opRecvProbed, id: id, ep: handle, addr: addr, size: size})
}

func (e *Engine) recvProbed(s *submission) {
	msg, ok := e.probed[s.ep]
	if !ok {
		e.completeNow(s.id, ucxx.StatusNoElem, 0)
		return
	}
	delete(e.probed, s.ep)
	r := e.requests.add(s.id, opTagRecv, nil)
	r.track(e.worker.TagMsgRecv(msg, s.addr, s.size, -1, s.id))
}

// ConnectAddress creates an endpoint to a worker address (WorkerAddress of the peer)
// and returns its handle. No tags are exchanged: its tags are 0 (but see
// EndpointOptions.OwnTag), and callers pick tags themselves. The endpoint has peer
// error handling; see ConnectAddressWith.
func (e *Engine) ConnectAddress(address []byte) (handle uint64, err error) {
	return e.ConnectAddressWith(address, EndpointOptions{})
}

// ConnectAddressWith is ConnectAddress with endpoint options. With peer error
// handling and UCX_TLS limited to shared memory it fails at once with
// StatusUnreachable: those transports cannot detect a failed peer.
//
// Errors: *ucxx.Error from ucp_ep_create (StatusInvalidParam for an empty address,
// StatusUnreachable when no transport reaches the peer), ErrEngineClosed.
func (e *Engine) ConnectAddressWith(address []byte, opts EndpointOptions) (handle uint64, err error) {
	if cerr := e.onThread(func() {
		ep := e.newEndpoint(defaultAcceptTimeout)
		u, cerr := e.worker.ConnectAddressWith(address, ep.handle, opts.errHandling())
		if cerr != nil {
			e.eps.remove(ep)
			err = cerr
			return
		}
		ep.u, ep.phase, ep.known = u, phaseReady, true
		if !opts.OwnTag {
			e.eps.dropTagID(ep)
		}
		e.eps.publish(ep, false)
		handle = ep.handle
	}); cerr != nil {
		return 0, cerr
	}
	return handle, err
}

// Config returns the UCX configuration of the engine's context.
func (e *Engine) Config() (cfg map[string]string, err error) {
	if cerr := e.onThread(func() { cfg = e.ctx.Config() }); cerr != nil {
		return nil, cerr
	}
	return cfg, nil
}

// Info returns UCX's descriptions of the engine's context and worker.
func (e *Engine) Info() (context, worker string, err error) {
	err = e.onThread(func() { context, worker = e.ctx.Info(), e.worker.Info() })
	return context, worker, err
}

// EndpointTransports returns the transports, with their devices, that UCX uses for
// endpoint h's lanes.
//
// Errors: ErrEndpointClosed, ErrEngineClosed, or UCX's query error.
func (e *Engine) EndpointTransports(h uint64) (ts []ucxx.Transport, err error) {
	if cerr := e.onThread(func() {
		ep := e.eps.get(h)
		if ep == nil || ep.u == nil {
			err = ErrEndpointClosed
			return
		}
		ts, err = ep.u.Transports()
	}); cerr != nil {
		return nil, cerr
	}
	return ts, err
}

// ProgressCPUs returns the CPUs the progress thread may run on, and whether it was
// pinned near a GPU (cuda.go).
func (e *Engine) ProgressCPUs() (cpus []int, pinned bool, err error) {
	if cerr := e.onThread(func() {
		pinned = e.cuda.cpus != nil
		cpus, err = topology.ThreadCPUs()
	}); cerr != nil {
		return nil, false, cerr
	}
	return cpus, pinned, err
}
