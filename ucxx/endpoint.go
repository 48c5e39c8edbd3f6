package ucxx

// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"strings"
	"unsafe"
)

// ErrHandling is an endpoint's error handling mode, fixed when the endpoint is
// created. The zero value is ErrHandlingPeer.
type ErrHandling int

const (
	// ErrHandlingPeer (UCP_ERR_HANDLING_MODE_PEER): when the connection fails or the
	// peer goes away, an EventEpError carrying the endpoint's handle is appended to the
	// worker's events. UCX then uses only transports that can detect a failed peer:
	// TCP, CMA and RDMA, not the posix, sysv or self shared-memory transports.
	ErrHandlingPeer ErrHandling = iota
	// ErrHandlingNone (UCP_ERR_HANDLING_MODE_NONE): no error handler and no
	// EventEpError, ever, so every transport may carry the data, shared memory
	// included. A peer that dies is not detected: operations on the endpoint may wait
	// forever, and the endpoint should be closed with Close(true, ...).
	ErrHandlingNone
)

func (m ErrHandling) mode() C.int {
	if m == ErrHandlingNone {
		return C.UCP_ERR_HANDLING_MODE_NONE
	}
	return C.UCP_ERR_HANDLING_MODE_PEER
}

func (m ErrHandling) String() string {
	if m == ErrHandlingNone {
		return "none"
	}
	return "peer"
}

// Endpoint is a UCP endpoint. With ErrHandlingPeer (the default), when the connection
// fails an EventEpError carrying the endpoint's handle is appended to the worker's
// events; with ErrHandlingNone nothing reports a failure.
type Endpoint struct {
	h    C.ucp_ep_h
	mode ErrHandling
}

// Handle is UCX's ucp_ep_h as a number, for diagnostics and for UCXX's
// ucp_endpoint accessor; nothing in Go goes through it.
func (e *Endpoint) Handle() uintptr { return uintptr(unsafe.Pointer(e.h)) }

// ErrHandling reports the error handling mode the endpoint was created with.
func (e *Endpoint) ErrHandling() ErrHandling { return e.mode }

// AcceptEndpoint creates the server side of a connection from a connection request,
// with peer error handling.
func (w *Worker) AcceptEndpoint(conn unsafe.Pointer, handle uint64) (*Endpoint, error) {
	return w.AcceptEndpointWith(conn, handle, ErrHandlingPeer)
}

// AcceptEndpointWith is AcceptEndpoint with the error handling mode mode. Both sides
// of a connection should use the same mode.
func (w *Worker) AcceptEndpointWith(conn unsafe.Pointer, handle uint64, mode ErrHandling) (*Endpoint, error) {
	e := &Endpoint{mode: mode}
	st := Status(C.ucxx_ep_create_from_conn(w.h, C.ucp_conn_request_h(conn), C.uint64_t(handle), mode.mode(), &e.h))
	if st != StatusOK {
		return nil, st.Err("ucp_ep_create(conn_request)")
	}
	return e, nil
}

// Connect creates the client side of a connection to a listener at ip:port, with
// peer error handling. The endpoint is usable at once; UCX completes the connection
// while it progresses.
func (w *Worker) Connect(ip string, port int, handle uint64) (*Endpoint, error) {
	return w.ConnectWith(ip, port, handle, ErrHandlingPeer)
}

// ConnectWith is Connect with the error handling mode mode.
func (w *Worker) ConnectWith(ip string, port int, handle uint64, mode ErrHandling) (*Endpoint, error) {
	sa, err := w.sockaddrFor(ip, port)
	if err != nil {
		return nil, err
	}
	defer sa.free()
	e := &Endpoint{mode: mode}
	if st := Status(C.ucxx_ep_create_to_sockaddr(w.h, sa.ptr(), sa.len, C.uint64_t(handle), mode.mode(), &e.h)); st != StatusOK {
		return nil, st.Err("ucp_ep_create(sockaddr)")
	}
	return e, nil
}

// ConnectAddress creates an endpoint to a worker address (Worker.Address of the
// peer), with peer error handling.
func (w *Worker) ConnectAddress(address []byte, handle uint64) (*Endpoint, error) {
	return w.ConnectAddressWith(address, handle, ErrHandlingPeer)
}

// ConnectAddressWith is ConnectAddress with the error handling mode mode. The address
// is untrusted: one UCX could not read whole, or whose interfaces lack the addresses
// UCX's transports read (connectable), is refused with StatusInvalidAddr before UCX
// sees it.
func (w *Worker) ConnectAddressWith(address []byte, handle uint64, mode ErrHandling) (*Endpoint, error) {
	if len(address) == 0 {
		return nil, &Error{Op: "ucp_ep_create(address)", Status: StatusInvalidParam}
	}
	if err := w.connectable(address); err != nil {
		return nil, err
	}
	// Lent to C for the call only: UCX copies what it needs from the address.
	caddr := C.calloc(C.size_t(len(address)+addrPadding), 1)
	defer C.free(caddr)
	copy(unsafe.Slice((*byte)(caddr), len(address)), address)
	e := &Endpoint{mode: mode}
	if st := Status(C.ucxx_ep_create_to_address(w.h, (*C.ucp_address_t)(caddr), C.uint64_t(handle), mode.mode(), &e.h)); st != StatusOK {
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
