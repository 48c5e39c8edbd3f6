package ucxx

// #include "shim.h"
import "C"

import "unsafe"

// AMDataOffset is where an eagerly received active message's data starts in the block
// of its EventAM.
const AMDataOffset = C.UCXX_AM_DATA_OFFSET

// EventAM: an active message arrived (see shim.h for its fields).
const EventAM = uint64(C.UCXX_EVENT_AM)

// StatusAMRendezvous marks an EventAM whose Ptr is a rendezvous descriptor to fetch.
const StatusAMRendezvous = Status(1)

// RegisterAM installs the worker's active message handler.
func (w *Worker) RegisterAM() error {
	return Status(C.ucxx_am_register(w.h)).Err("ucp_worker_set_am_recv_handler")
}

// AMSend sends n bytes at addr as an active message whose header is tag.
func (e *Endpoint) AMSend(tag uint64, addr uintptr, n uint64, memType int, id uint64) (unsafe.Pointer, Status) {
	var req unsafe.Pointer
	st := C.ucxx_am_send(e.h, C.uint64_t(tag), C.uintptr_t(addr), C.size_t(n), C.uint64_t(id), C.int(memType), &req)
	return req, Status(st)
}

// AMRecvData fetches a rendezvous active message into n bytes at addr.
func (w *Worker) AMRecvData(desc unsafe.Pointer, addr uintptr, n uint64, id uint64) (unsafe.Pointer, Status) {
	var req unsafe.Pointer
	st := C.ucxx_am_recv_data(w.h, desc, C.uintptr_t(addr), C.size_t(n), C.uint64_t(id), &req)
	return req, Status(st)
}

// AMRelease drops a rendezvous active message that will not be fetched.
func (w *Worker) AMRelease(desc unsafe.Pointer) { C.ucxx_am_release(w.h, desc) }

// TagProbe reports whether a message matching tag under mask waits unreceived, with its
// sender tag and length. With remove, the message is taken off the queue and msg is
// its handle, to receive with TagMsgRecv.
func (w *Worker) TagProbe(tag, mask uint64, remove bool) (found bool, senderTag, length uint64, msg unsafe.Pointer) {
	r := C.int(0)
	if remove {
		r = 1
	}
	var st, ln C.uint64_t
	found = C.ucxx_tag_probe(w.h, C.ucp_tag_t(tag), C.ucp_tag_t(mask), r, &st, &ln, &msg) != 0
	return found, uint64(st), uint64(ln), msg
}

// TagMsgRecv receives a message taken by TagProbe into n bytes of memType memory at
// addr (-1: let UCX detect the memory type).
func (w *Worker) TagMsgRecv(msg unsafe.Pointer, addr uintptr, n uint64, memType int, id uint64) (unsafe.Pointer, Status) {
	var req unsafe.Pointer
	st := C.ucxx_tag_msg_recv(w.h, msg, C.uintptr_t(addr), C.size_t(n), C.uint64_t(id), C.int(memType), &req)
	return req, Status(st)
}
