package ucxx

// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"strings"
	"unsafe"
)

// Endpoint is a UCP endpoint with peer error handling on: when the connection fails,
// an EventEpError carrying the endpoint's handle is appended to the worker's events.
type Endpoint struct {
	h C.ucp_ep_h
}

// AcceptEndpoint creates the server side of a connection from a connection request.
func (w *Worker) AcceptEndpoint(conn unsafe.Pointer, handle uint64) (*Endpoint, error) {
	e := &Endpoint{}
	st := Status(C.ucxx_ep_create_from_conn(w.h, C.ucp_conn_request_h(conn), C.uint64_t(handle), &e.h))
	if st != StatusOK {
		return nil, st.Err("ucp_ep_create(conn_request)")
	}
	return e, nil
}

// Connect creates the client side of a connection to a listener at ip:port. The
// endpoint is usable at once; UCX completes the connection while it progresses.
func (w *Worker) Connect(ip string, port int, handle uint64) (*Endpoint, error) {
	sa, err := newSockaddr(ip, port)
	if err != nil {
		return nil, err
	}
	defer sa.free()
	e := &Endpoint{}
	if st := Status(C.ucxx_ep_create_to_sockaddr(w.h, sa.ptr(), sa.len, C.uint64_t(handle), &e.h)); st != StatusOK {
		return nil, st.Err("ucp_ep_create(sockaddr)")
	}
	return e, nil
}

// ConnectAddress creates an endpoint to a worker address (Worker.Address of the peer).
func (w *Worker) ConnectAddress(address []byte, handle uint64) (*Endpoint, error) {
	if len(address) == 0 {
		return nil, &Error{Op: "ucp_ep_create(address)", Status: StatusInvalidParam}
	}
	// Lent to C for the call only: UCX copies what it needs from the address.
	caddr := C.CBytes(address)
	defer C.free(caddr)
	e := &Endpoint{}
	if st := Status(C.ucxx_ep_create_to_address(w.h, (*C.ucp_address_t)(caddr), C.uint64_t(handle), &e.h)); st != StatusOK {
		return nil, st.Err("ucp_ep_create(address)")
	}
	return e, nil
}

// Sockaddrs returns the "ip:port" of both ends of a connection made through a listener.
func (e *Endpoint) Sockaddrs() (local, remote string, err error) {
	var lbuf, rbuf [64]C.char
	if st := Status(C.ucxx_ep_sockaddrs(e.h, &lbuf[0], 64, &rbuf[0], 64)); st != StatusOK {
		return "", "", st.Err("ucp_ep_query")
	}
	return strings.Clone(C.GoString(&lbuf[0])), C.GoString(&rbuf[0]), nil
}

// Close starts closing the endpoint: flushing first, or at once when force is set.
// Its completion comes as an event with request id id.
func (e *Endpoint) Close(force bool, id uint64) (unsafe.Pointer, Status) {
	f := C.int(0)
	if force {
		f = 1
	}
	var req unsafe.Pointer
	st := Status(C.ucxx_ep_close(e.h, f, C.uint64_t(id), &req))
	return req, st
}
