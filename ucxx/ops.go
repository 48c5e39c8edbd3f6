package ucxx

// The out-parameter for the request is Go stack memory lent for the call only, and the
// shim never calls back into Go: the noescape and nocallback directives say so, which
// keeps it on the stack (no allocation per operation).

// #cgo noescape ucxx_tag_send
// #cgo nocallback ucxx_tag_send
// #cgo noescape ucxx_tag_recv
// #cgo nocallback ucxx_tag_recv
// #cgo noescape ucxx_stream_send
// #cgo nocallback ucxx_stream_send
// #cgo noescape ucxx_stream_recv
// #cgo nocallback ucxx_stream_recv
// #include "shim.h"
import "C"

import "unsafe"

// The operations below share one convention: they return StatusInProgress and the
// request while the operation runs, or the final status with a nil request when it
// ended at once. Either way exactly one EventCompletion with the given id follows
// (already appended, for an immediate end). Buffers are addresses of memory the caller
// keeps valid until that event: user memory is pinned by Python, not by Go.

// MemoryUnknown lets UCX detect a buffer's memory type.
const MemoryUnknown = -1

// TagSend sends n bytes at addr with tag on the endpoint.
func (e *Endpoint) TagSend(addr uintptr, n uint64, tag uint64, memType int, id uint64) (unsafe.Pointer, Status) {
	var req unsafe.Pointer
	st := C.ucxx_tag_send(e.h, C.uintptr_t(addr), C.size_t(n), C.ucp_tag_t(tag), C.uint64_t(id), C.int(memType), &req)
	return req, Status(st)
}

// TagRecv receives into n bytes at addr the next message whose tag matches tag under
// mask. Receives are matched per worker, not per endpoint.
func (w *Worker) TagRecv(addr uintptr, n uint64, tag, mask uint64, memType int, id uint64) (unsafe.Pointer, Status) {
	var req unsafe.Pointer
	st := C.ucxx_tag_recv(w.h, C.uintptr_t(addr), C.size_t(n), C.ucp_tag_t(tag), C.ucp_tag_t(mask), C.uint64_t(id), C.int(memType), &req)
	return req, Status(st)
}

// StreamSend sends n bytes at addr on the endpoint's byte stream.
func (e *Endpoint) StreamSend(addr unsafe.Pointer, n uint64, id uint64) (unsafe.Pointer, Status) {
	var req unsafe.Pointer
	st := C.ucxx_stream_send(e.h, addr, C.size_t(n), C.uint64_t(id), &req)
	return req, Status(st)
}

// StreamRecv receives exactly n bytes from the endpoint's byte stream into addr.
func (e *Endpoint) StreamRecv(addr unsafe.Pointer, n uint64, id uint64) (unsafe.Pointer, Status) {
	var req unsafe.Pointer
	st := C.ucxx_stream_recv(e.h, addr, C.size_t(n), C.uint64_t(id), &req)
	return req, Status(st)
}
