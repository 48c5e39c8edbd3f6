package ucxx

// #cgo noescape ucxx_put
// #cgo nocallback ucxx_put
// #cgo noescape ucxx_get
// #cgo nocallback ucxx_get
// #cgo noescape ucxx_ep_flush
// #cgo nocallback ucxx_ep_flush
// #include <stdlib.h>
// #include "rma.h"
import "C"

import "unsafe"

// One-sided operations. (Remote atomics are left out: UCX 1.22 has no atomic
// protocol on endpoints with peer error handling.) Registration, remote keys and every operation run on the
// worker's progress thread, as everything else here (the context is not thread-safe).
// The operations follow ops.go's convention: StatusInProgress and the request while
// the operation runs, or the final status with a nil request, and exactly one
// EventCompletion with the given id either way. A put's completion means its local
// buffer may be reused, not that the data reached the peer: Flush says that.

// MemHandle is registered memory (ucp_mem_h).
type MemHandle struct {
	h   C.ucp_mem_h
	ctx *Context
}

// MemMap registers n bytes at addr, of memory type memType (MemoryUnknown: UCX
// detects it), for one-sided access by peers holding its remote key.
func (c *Context) MemMap(addr uintptr, n uint64, memType int) (*MemHandle, error) {
	var h C.ucp_mem_h
	if st := Status(C.ucxx_mem_map(c.h, C.uintptr_t(addr), C.size_t(n), C.int(memType), &h)); st != StatusOK {
		return nil, st.Err("ucp_mem_map")
	}
	return &MemHandle{h: h, ctx: c}, nil
}

// Unmap releases the registration. Operations using it must have ended.
func (m *MemHandle) Unmap() error {
	if st := Status(C.ucp_mem_unmap(m.ctx.h, m.h)); st != StatusOK {
		return st.Err("ucp_mem_unmap")
	}
	return nil
}

// PackRKey returns the registration's remote key, packed for a peer.
func (m *MemHandle) PackRKey() ([]byte, error) {
	var buf unsafe.Pointer
	var n C.size_t
	if st := Status(C.ucxx_rkey_pack(m.ctx.h, m.h, &buf, &n)); st != StatusOK {
		return nil, st.Err("ucp_rkey_pack")
	}
	defer C.ucp_rkey_buffer_release(buf)
	return C.GoBytes(buf, C.int(n)), nil
}

// RKey is a peer's remote key unpacked on an endpoint (ucp_rkey_h).
type RKey struct{ h C.ucp_rkey_h }

// UnpackRKey unpacks a peer's packed remote key for use on this endpoint. UCX reads
// the packed key without knowing its length: packed must be followed by enough
// readable memory for UCX's largest key (the caller pads it).
//
// Unpack keys only on a connected endpoint whose wireup is done (a message has gone
// both ways). A key unpacked earlier is reconfigured at its first use, and UCX 1.22's
// ucp_ep_reconfig_internal then looks up the worker interface of a sockaddr
// endpoint's connection-manager lane, which has none: it reads out of bounds and
// crashed the process at a get after a put.
func (e *Endpoint) UnpackRKey(packed unsafe.Pointer) (*RKey, error) {
	var h C.ucp_rkey_h
	if st := Status(C.ucp_ep_rkey_unpack(e.h, packed, &h)); st != StatusOK {
		return nil, st.Err("ucp_ep_rkey_unpack")
	}
	return &RKey{h: h}, nil
}

// Destroy releases the remote key. Operations using it must have ended.
func (k *RKey) Destroy() { C.ucp_rkey_destroy(k.h) }

func memh(m *MemHandle) C.ucp_mem_h {
	if m == nil {
		return nil
	}
	return m.h
}

// Put writes n bytes at addr (registered in local, or nil) to remote on the peer.
func (e *Endpoint) Put(addr uintptr, n uint64, local *MemHandle, memType int, remote uint64, key *RKey, id uint64) (unsafe.Pointer, Status) {
	var req unsafe.Pointer
	st := C.ucxx_put(e.h, C.uintptr_t(addr), C.size_t(n), C.uint64_t(remote), key.h, memh(local), C.int(memType), C.uint64_t(id), &req)
	return req, Status(st)
}

// Get reads n bytes at remote on the peer into addr (registered in local, or nil).
func (e *Endpoint) Get(addr uintptr, n uint64, local *MemHandle, memType int, remote uint64, key *RKey, id uint64) (unsafe.Pointer, Status) {
	var req unsafe.Pointer
	st := C.ucxx_get(e.h, C.uintptr_t(addr), C.size_t(n), C.uint64_t(remote), key.h, memh(local), C.int(memType), C.uint64_t(id), &req)
	return req, Status(st)
}

// Flush completes once every one-sided operation issued on the endpoint before it has
// completed at the peer.
func (e *Endpoint) Flush(id uint64) (unsafe.Pointer, Status) {
	var req unsafe.Pointer
	st := C.ucxx_ep_flush(e.h, C.uint64_t(id), &req)
	return req, Status(st)
}

// Fence orders the worker's one-sided operations: those issued after it complete at
// their peers after those issued before it.
func (w *Worker) Fence() error {
	if st := Status(C.ucp_worker_fence(w.h)); st != StatusOK {
		return st.Err("ucp_worker_fence")
	}
	return nil
}
