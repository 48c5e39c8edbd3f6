package pybridge

import (
	"encoding/hex"
	"fmt"
	"time"

	"github.com/ucxx-go/ucxx-go/core"
)

// endpointOptions turns UCXX's endpoint_error_handling flag into core's options.
func endpointOptions(errorHandling bool) core.EndpointOptions {
	return core.EndpointOptions{NoErrorHandling: !errorHandling}
}

// Listen starts a listener on ip:port (port 0: any) and returns "handle port". The
// endpoints it accepts have UCX's peer error handling when errorHandling is set.
func Listen(ip string, port int, errorHandling bool) (res string, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return "", err
	}
	h, p, err := e.ListenWith(ip, port, endpointOptions(errorHandling))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d %d", h, p), nil
}

// CloseListener stops a listener.
func CloseListener(h uint64) (ok bool, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return false, err
	}
	return true, e.CloseListener(h)
}

// Connect queues a connection to ip:port; the completion's length is the endpoint
// handle. The endpoint has UCX's peer error handling when errorHandling is set.
func Connect(ip string, port int, timeoutMs int64, errorHandling bool) (id uint64, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return 0, err
	}
	return e.ConnectWith(ip, port, time.Duration(timeoutMs)*time.Millisecond, endpointOptions(errorHandling))
}

// WarmUp queues the engine's warm-up through the local address ip
// (core.Engine.WarmUp); the completion comes when it has ended.
func WarmUp(ip string) (id uint64, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return 0, err
	}
	return e.WarmUp(ip)
}

// EndpointInfo returns "send_tag recv_tag local_addr remote_addr ucp_ep_h" ("-" for an
// unknown address).
func EndpointInfo(h uint64) (res string, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return "", err
	}
	info, err := e.EndpointInfo(h)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d %d %s %s %d", info.SendTag, info.RecvTag, dash(info.Local), dash(info.Remote), info.UCPHandle), nil
}

// WorkerHandle returns UCX's ucp_worker_h of the running engine's worker, as a number.
func WorkerHandle() (h uint64, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return 0, err
	}
	return uint64(e.WorkerHandle()), nil
}

// EndpointStatus returns the UCS status that ended endpoint h: 0 while it is usable
// (core.Engine.EndpointStatus).
func EndpointStatus(h uint64) (st int, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return 0, err
	}
	return int(e.EndpointStatus(h)), nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// CloseEndpoint queues a graceful close bounded by timeoutMs; returns the request id.
func CloseEndpoint(h uint64, timeoutMs int64) (id uint64, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return 0, err
	}
	return e.CloseEndpoint(h, time.Duration(timeoutMs)*time.Millisecond)
}

// ReleaseEndpoint closes an endpoint the application dropped without closing it:
// gracefully, in the background, within timeoutMs (what was sent is delivered); no
// completion is reported.
func ReleaseEndpoint(h uint64, timeoutMs int64) (ok bool, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return false, err
	}
	return true, e.ReleaseEndpoint(h, time.Duration(timeoutMs)*time.Millisecond)
}

// AbortEndpoint closes an endpoint at once, failing what is in flight on it.
func AbortEndpoint(h uint64) (ok bool, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return false, err
	}
	return true, e.AbortEndpoint(h)
}

// WorkerAddress returns the worker's UCX address, hex-encoded.
func WorkerAddress() (addr string, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return "", err
	}
	b, err := e.WorkerAddress()
	return hex.EncodeToString(b), err
}

// Stats returns "in_flight endpoints listeners unexpected_bytes stalled_sends" of the
// engine (core.Stats), for tests.
func Stats() (res string, err error) {
	defer guard(&err)
	e, err := current()
	if err != nil {
		return "", err
	}
	s, err := e.Stats()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d %d %d %d %d", s.InFlight, s.Endpoints, s.Listeners, s.UnexpectedBytes, s.StalledSends), nil
}
