package core

import (
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Active messages (am_send / am_recv). Each message carries, as its UCX header, the
// tag of the connection it belongs to (the sender's SendTag, the receiver's RecvTag),
// which is how the receiver knows which endpoint it came from. The receiver allocates:
// a message is delivered as a block with a one-frame record (multi.go's layout), the
// data at ucxx.AMDataOffset. Messages that arrive before an am_recv asks wait in
// their endpoint's queue.

// AMSend queues an active message of size bytes at addr on endpoint ep. A CUDA
// buffer is sent once the work queued on stream before the call is done (cuda.go).
func (e *Engine) AMSend(ep uint64, addr uintptr, size uint64, memType int, stream uintptr) (uint64, error) {
	if _, err := e.liveEndpoint(ep); err != nil {
		return 0, err
	}
	s := submission{op: opAMSend, id: e.newID(), ep: ep, addr: addr, size: size, memType: memType}
	if err := s.addCUDA(stream); err != nil {
		return 0, err
	}
	return s.id, e.submitOrRelease(s)
}

// AMRecv queues a receive of endpoint ep's next active message. Its completion's Length
// is the address of a one-frame block that the receiver frees with free().
func (e *Engine) AMRecv(ep uint64) (uint64, error) {
	if _, err := e.liveEndpoint(ep); err != nil {
		return 0, err
	}
	id := e.newID()
	return id, e.submit(submission{op: opAMRecv, id: id, ep: ep})
}

func (e *Engine) amSend(s *submission) {
	ep := e.readyEndpoint(s)
	if ep == nil {
		return
	}
	r := e.requests.add(s.id, opAMSend, ep)
	r.track(ep.u.AMSend(ep.sendTag, s.addr, s.size, s.memType, s.id))
}

func (e *Engine) amRecv(s *submission) {
	ep := e.readyEndpoint(s)
	if ep == nil {
		return
	}
	if len(ep.amReady) > 0 {
		block := ep.amReady[0]
		ep.amReady = ep.amReady[1:]
		e.completeNow(s.id, ucxx.StatusOK, uint64(uintptr(block)))
		return
	}
	r := e.requests.add(s.id, opAMRecv, ep)
	r.internal = stepAMWait
	ep.amWaiting = append(ep.amWaiting, s.id)
}

// onAM handles an arriving active message.
func (e *Engine) onAM(ev *ucxx.Event) {
	ep := e.amTags[ev.ID]
	switch {
	case ev.Status == ucxx.StatusAMRendezvous && (ep == nil || ep.phase != phaseReady):
		e.worker.AMRelease(ev.Ptr)
	case ev.Status == ucxx.StatusAMRendezvous:
		block := ucxx.CMalloc(ucxx.AMDataOffset + ev.Length)
		if block == nil {
			e.worker.AMRelease(ev.Ptr)
			return
		}
		r := e.requests.add(e.newID(), opTagRecv, ep)
		r.internal, r.data = stepAMData, block
		r.expect = ev.Length
		r.track(e.worker.AMRecvData(ev.Ptr, uintptr(block)+ucxx.AMDataOffset, ev.Length, r.id))
	case ev.Status != ucxx.StatusOK || ev.Ptr == nil:
		// Out of memory copying it: the message is lost, the connection goes on.
	case ep == nil || ep.phase != phaseReady:
		ucxx.CFree(ev.Ptr)
	default:
		e.deliverAM(ep, ev.Ptr, ev.Length)
	}
}

// onAMData handles the end of a rendezvous fetch.
func (e *Engine) onAMData(r *request, st ucxx.Status, length uint64) {
	if st != ucxx.StatusOK || length != r.expect || r.ep.phase != phaseReady {
		ucxx.CFree(r.data)
		return
	}
	e.deliverAM(r.ep, r.data, r.expect)
}

// deliverAM completes the endpoint's oldest am_recv with the message, or queues it.
func (e *Engine) deliverAM(ep *endpoint, block unsafe.Pointer, length uint64) {
	newBlockRecord(block, 1, ucxx.AMDataOffset+length).setFrame(0, ucxx.AMDataOffset, length, uint64(MemHost))
	if len(ep.amWaiting) == 0 {
		ep.amReady = append(ep.amReady, block)
		return
	}
	id := ep.amWaiting[0]
	ep.amWaiting = ep.amWaiting[1:]
	if w := e.requests.remove(id); w != nil {
		e.requests.recycle(w)
	}
	e.completeNow(id, ucxx.StatusOK, uint64(uintptr(block)))
}

// cancelAMRecv answers a waiting am_recv with StatusCanceled.
func (e *Engine) cancelAMRecv(r *request) {
	ep := r.ep
	for i, id := range ep.amWaiting {
		if id == r.id {
			ep.amWaiting = append(ep.amWaiting[:i], ep.amWaiting[i+1:]...)
			break
		}
	}
	e.requests.remove(r.id)
	e.requests.recycle(r)
	e.completeNow(r.id, ucxx.StatusCanceled, 0)
}

// dropAM fails an endpoint's waiting am_recvs with st and frees its queued messages.
func (e *Engine) dropAM(ep *endpoint, st ucxx.Status) {
	for _, id := range ep.amWaiting {
		if w := e.requests.remove(id); w != nil {
			e.requests.recycle(w)
		}
		e.completeNow(id, st, 0)
	}
	ep.amWaiting = nil
	for _, b := range ep.amReady {
		ucxx.CFree(b)
	}
	ep.amReady = nil
}
