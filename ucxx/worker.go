package ucxx

// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"unsafe"
)

// Worker is a UCP worker (ucp_worker_h) with its event buffer. Every method must be
// called from the one thread that progresses it, after AttachEvents on that thread.
type Worker struct {
	h      C.ucp_worker_h
	events *C.ucxx_events_t
	ipv6   bool // its context's TCP transport uses IPv6 (Context.ipv6)
	// unified: its context runs UCX's unified mode (Context.unified)
	unified bool
	// shapes: its own address's transports (connectable), made at the first use
	shapes map[uint16]addrShape
	// guardSlot: its slot with the RMA guard (rmaguard.go), -1 for none
	guardSlot int
}

// Handle is UCX's ucp_worker_h as a number, for diagnostics and for UCXX's
// get_ucp_worker; nothing in Go goes through it.
func (w *Worker) Handle() uintptr { return uintptr(unsafe.Pointer(w.h)) }

// Event kinds, as written by the C callbacks.
const (
	EventCompletion  = uint64(C.UCXX_EVENT_COMPLETION)
	EventEpError     = uint64(C.UCXX_EVENT_EP_ERROR)
	EventConnRequest = uint64(C.UCXX_EVENT_CONN_REQUEST)
)

// Event mirrors ucxx_event_t: a completion, an endpoint error or a connection request.
type Event struct {
	Kind   uint64
	ID     uint64 // request id, endpoint handle or listener handle, by Kind
	Status Status
	Length uint64
	Tag    uint64
	Ptr    unsafe.Pointer // C memory: the request to free, or the connection request
}

// NewWorker creates a worker. multiThread selects UCS_THREAD_MODE_MULTI; the engine
// uses single-thread mode because only its progress thread touches the worker. A
// worker of a context without FeatureRMA is registered with the RMA guard
// (rmaguard.go): peers cannot start one-sided rendezvous on it.
//
// Errors: the status of ucp_worker_create; StatusNoResource when the guard has no
// slot left (1,024 such workers at once).
func (c *Context) NewWorker(multiThread bool) (*Worker, error) {
	guarded := c.features&FeatureRMA == 0 && RMAGuardActive() // before the worker's interfaces
	w := &Worker{events: C.ucxx_events_new(), ipv6: c.ipv6, unified: c.unified, guardSlot: -1}
	mt := C.int(0)
	if multiThread {
		mt = 1
	}
	if st := Status(C.ucxx_worker_create(c.h, mt, &w.h)); st != StatusOK {
		C.ucxx_events_free(w.events)
		return nil, st.Err("ucp_worker_create")
	}
	if guarded {
		slot, err := guardWorker(w.h)
		if err != nil {
			w.Close()
			return nil, err
		}
		w.guardSlot = slot
	}
	return w, nil
}

// AttachEvents makes this worker's event buffer the calling thread's. The progress
// thread calls it once; callbacks on any other thread would crash.
func (w *Worker) AttachEvents() { C.ucxx_events_attach(w.events) }

// Events returns the events gathered since the last ResetEvents. The slice views C
// memory and is valid until the next call into UCX.
func (w *Worker) Events() []Event {
	n := int(w.events.len)
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*Event)(unsafe.Pointer(w.events.items)), n)
}

// ResetEvents empties the event buffer, keeping its memory.
func (w *Worker) ResetEvents() { w.events.len = 0 }

// Progress runs one ucp_worker_progress pass and reports whether it did anything.
func (w *Worker) Progress() bool { return C.ucp_worker_progress(w.h) != 0 }

// EventFD returns the worker's event file descriptor, for epoll after Arm.
func (w *Worker) EventFD() (int, error) {
	var fd C.int
	if st := Status(C.ucp_worker_get_efd(w.h, &fd)); st != StatusOK {
		return -1, st.Err("ucp_worker_get_efd")
	}
	return int(fd), nil
}

// Arm arms the worker's event fd. It returns false when events are already pending
// (UCS_ERR_BUSY): the caller must progress again instead of sleeping.
func (w *Worker) Arm() (bool, error) {
	st := Status(C.ucp_worker_arm(w.h))
	switch st {
	case StatusOK:
		return true, nil
	case StatusBusy:
		return false, nil
	}
	return false, st.Err("ucp_worker_arm")
}

// Address returns the worker's packed UCX address.
func (w *Worker) Address() ([]byte, error) {
	var addr *C.ucp_address_t
	var n C.size_t
	if st := Status(C.ucp_worker_get_address(w.h, &addr, &n)); st != StatusOK {
		return nil, st.Err("ucp_worker_get_address")
	}
	defer C.ucp_worker_release_address(w.h, addr)
	return C.GoBytes(unsafe.Pointer(addr), C.int(n)), nil
}

// NetworkAddress is the worker's address with its network transports only (TCP,
// InfiniBand, RoCE: ucp_worker_query with UCP_WORKER_ADDRESS_FLAG_NET_ONLY): an endpoint
// made from it reaches the worker as another host would, never over shared memory,
// CMA or CUDA IPC.
func (w *Worker) NetworkAddress() ([]byte, error) {
	var attr C.ucp_worker_attr_t
	attr.field_mask = C.UCP_WORKER_ATTR_FIELD_ADDRESS | C.UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS
	attr.address_flags = C.UCP_WORKER_ADDRESS_FLAG_NET_ONLY
	if st := Status(C.ucp_worker_query(w.h, &attr)); st != StatusOK {
		return nil, st.Err("ucp_worker_query")
	}
	defer C.ucp_worker_release_address(w.h, attr.address)
	return C.GoBytes(unsafe.Pointer(attr.address), C.int(attr.address_length)), nil
}

// Cancel asks UCX to cancel a request. A request that already completed is left as it
// is; a cancelled one completes with StatusCanceled through its callback.
func (w *Worker) Cancel(req unsafe.Pointer) {
	if req != nil {
		C.ucp_request_cancel(w.h, req)
	}
}

// Flush starts flushing the worker: every endpoint's operations, and the transports of
// endpoints closed by force that UCX is still discarding. Its completion comes as an
// event with request id id (at once, pushed here, when nothing was outstanding); a
// pending request is returned for RequestDone.
func (w *Worker) Flush(id uint64) (unsafe.Pointer, Status) {
	var req unsafe.Pointer
	st := Status(C.ucxx_worker_flush(w.h, C.uint64_t(id), &req))
	return req, st
}

// RequestDone reports whether a pending request has completed: its callback has run,
// and its completion event waits to be drained (which frees it).
func RequestDone(req unsafe.Pointer) bool { return C.ucxx_request_done(req) != 0 }

// FreeRequest returns a request to UCX after its completion event was drained.
func FreeRequest(req unsafe.Pointer) {
	if req != nil {
		C.ucp_request_free(req)
	}
}

// Close destroys the worker. Endpoints and listeners must be closed first.
func (w *Worker) Close() {
	if w.h != nil {
		C.ucp_worker_destroy(w.h)
		w.h = nil
	}
	unguardWorker(w.guardSlot) // after the destroy: no message reaches it unguarded
	w.guardSlot = -1
	C.ucxx_events_free(w.events)
	w.events = nil
}
