package ucxx

// #include "transports.h"
import "C"

// Transport is one lane of an endpoint: a UCT transport on a device, as UCX names them
// (e.g. {"tcp", "lo"}, {"rc_mlx5", "mlx5_0:1"}, {"cuda_ipc", "cuda"}, {"sysv", "memory"}).
type Transport struct {
	Name   string
	Device string
}

// Transports returns the transports the endpoint uses now, one per lane (a transport
// on a device appears more than once when it serves several lanes). An endpoint made
// through a listener or Connect also lists its connection manager's lane, named after
// the manager with no device (e.g. {"tcp", ""}). Until UCX has
// finished connecting the endpoint the list holds the lanes it wires up with, which
// may differ from the final ones: query after a message has gone through for the
// settled answer.
//
// Like every call on a UCP object, it must run on the thread that progresses the
// endpoint's worker.
//
// Errors: *Error with UCX's status, e.g. StatusInvalidParam from a UCX that predates
// the query (1.14).
func (e *Endpoint) Transports() ([]Transport, error) {
	// An endpoint has a handful of lanes (at most UCP_MAX_LANES); a full answer may
	// have been cut short, so ask again with more room.
	for room := 16; ; room *= 4 {
		// Go memory lent for the call: UCX writes pointers to its own strings into
		// it, copied out below before anything else runs on this thread.
		entries := make([]C.ucp_transport_entry_t, room)
		n := C.unsigned(room)
		if st := Status(C.ucxx_ep_transports(e.h, &entries[0], &n)); st != StatusOK {
			return nil, st.Err("ucp_ep_query(transports)")
		}
		if int(n) == room && room < 1024 {
			continue
		}
		out := make([]Transport, 0, int(n))
		for _, t := range entries[:int(n)] {
			out = append(out, Transport{Name: cStringOrEmpty(t.transport_name), Device: cStringOrEmpty(t.device_name)})
		}
		return out, nil
	}
}

// cStringOrEmpty copies a C string that may be NULL.
func cStringOrEmpty(s *C.char) string {
	if s == nil {
		return ""
	}
	return C.GoString(s)
}
