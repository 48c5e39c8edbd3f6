package ucxx

// #include "shim.h"
import "C"

import "unsafe"

// Listener accepts connections on a socket address. Each incoming connection becomes
// an EventConnRequest carrying the listener's handle; accept it with
// Worker.AcceptEndpoint or refuse it with Listener.Reject.
type Listener struct {
	h    C.ucp_listener_h
	Port int
}

// Listen binds a listener to ip:port ("" for all interfaces, port 0 for any free
// port). The address must be of the TCP transport's family (ErrAddressFamily); ""
// is that family's wildcard. handle is echoed in this listener's connection events.
func (w *Worker) Listen(ip string, port int, handle uint64) (*Listener, error) {
	if ip == "" && w.ipv6 {
		ip = "::" // the wildcard of the TCP transport's family
	}
	sa, err := w.sockaddrFor(ip, port)
	if err != nil {
		return nil, err
	}
	defer sa.free()
	l := &Listener{}
	if st := Status(C.ucxx_listener_create(w.h, sa.ptr(), sa.len, C.uint64_t(handle), &l.h)); st != StatusOK {
		return nil, st.Err("ucp_listener_create")
	}
	l.Port = int(C.ucxx_listener_port(l.h))
	return l, nil
}

// Reject refuses a connection request that will not be accepted.
func (l *Listener) Reject(conn unsafe.Pointer) {
	C.ucp_listener_reject(l.h, C.ucp_conn_request_h(conn))
}

// Close stops listening.
func (l *Listener) Close() {
	if l.h != nil {
		C.ucp_listener_destroy(l.h)
		l.h = nil
	}
}
