package ucxx

// #cgo noescape ucxx_tag_send_iov
// #cgo nocallback ucxx_tag_send_iov
// #cgo noescape ucxx_tag_recv_iov
// #cgo nocallback ucxx_tag_recv_iov
// #cgo noescape ucxx_tag_msg_recv_iov
// #cgo nocallback ucxx_tag_msg_recv_iov
// #include "shim.h"
import "C"

import (
	"encoding/binary"
	"unsafe"
)

// Gathered sends and scattered receives: one tag message whose bytes come from, or go
// to, several host buffers, described by an IOV array in C memory. The array and the
// buffers it names must stay valid until the operation's completion.

// IOVEntrySize is the size of one IOV entry: the buffer's address and length, native
// u64 words (UCX's ucp_dt_iov_t on a 64-bit platform).
const IOVEntrySize = int(unsafe.Sizeof(C.ucp_dt_iov_t{}))

// PutIOV writes entry i of the IOV array at iov.
func PutIOV(iov unsafe.Pointer, i int, addr uintptr, n uint64) {
	e := unsafe.Slice((*byte)(unsafe.Add(iov, i*IOVEntrySize)), IOVEntrySize)
	binary.NativeEndian.PutUint64(e, uint64(addr))
	binary.NativeEndian.PutUint64(e[8:], n)
}

// TagSendIOV sends the count buffers of the IOV array at iov, n bytes in all, as one
// message with tag on the endpoint.
func (e *Endpoint) TagSendIOV(iov unsafe.Pointer, count int, n uint64, tag uint64, id uint64) (unsafe.Pointer, Status) {
	var req unsafe.Pointer
	st := C.ucxx_tag_send_iov(e.h, C.uintptr_t(uintptr(iov)), C.size_t(count), C.size_t(n), C.ucp_tag_t(tag), C.uint64_t(id), &req)
	return req, Status(st)
}

// TagRecvIOV receives the next message whose tag matches tag under mask into the count
// buffers of the IOV array at iov, in order; its completion's length is the bytes
// received.
func (w *Worker) TagRecvIOV(iov unsafe.Pointer, count int, tag, mask uint64, id uint64) (unsafe.Pointer, Status) {
	var req unsafe.Pointer
	st := C.ucxx_tag_recv_iov(w.h, C.uintptr_t(uintptr(iov)), C.size_t(count), C.ucp_tag_t(tag), C.ucp_tag_t(mask), C.uint64_t(id), &req)
	return req, Status(st)
}

// TagMsgRecvIOV receives a message taken by TagProbe into the count buffers of the IOV
// array at iov.
func (w *Worker) TagMsgRecvIOV(msg unsafe.Pointer, iov unsafe.Pointer, count int, id uint64) (unsafe.Pointer, Status) {
	var req unsafe.Pointer
	st := C.ucxx_tag_msg_recv_iov(w.h, msg, C.uintptr_t(uintptr(iov)), C.size_t(count), C.uint64_t(id), &req)
	return req, Status(st)
}
