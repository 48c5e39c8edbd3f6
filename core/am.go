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
// their endpoint's mailbox, and count against its bound on held messages as tag
// messages do (unexpected.go, flowcontrol.go): an eager one whole, as its data is
// here. A rendezvous one's data is fetched at once if an am_recv waits for it or it
// fits in half the bound with what the endpoint holds (it then counts whole);
// otherwise it stays with its sender, counted as a held rendezvous tag message is,
// until an am_recv asks (its sender's am_send completes then).

// AMSend queues an active message of size bytes at addr on endpoint ep. A CUDA
// buffer is sent once the work queued on stream before the call is done (cuda.go).
func (e *Engine) AMSend(ep uint64, addr uintptr, size uint64, memType int, stream uintptr) (uint64, error) {
	if _, err := e.eps.live(ep); err != nil {
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
	if _, err := e.eps.live(ep); err != nil {
		return 0, err
	}
	id := e.newID()
	return id, e.submit(submission{op: opAMRecv, id: id, ep: ep})
}

func (a *activeMessages) amSend(s *submission) {
	ep := a.readyEndpoint(s)
	if ep == nil {
		return
	}
	r := a.requests.add(s.id, opAMSend, ep)
	r.track(ep.u.AMSend(ep.sendTag, s.addr, s.size, s.memType, s.id))
}

func (a *activeMessages) amRecv(s *submission) {
	ep := a.readyEndpoint(s)
	if ep == nil {
		return
	}
	if block, ok := ep.mailbox.take(s.id); ok {
		a.noteHeld(ep)
		a.completeNow(s.id, ucxx.StatusOK, uint64(uintptr(block)))
		return
	}
	r := a.requests.add(s.id, opAMRecv, ep)
	r.internal = stepAMWait
	a.fetchDeferred(ep) // the message it waits for may be with its sender
}

// onAM handles an arriving active message.
func (a *activeMessages) onAM(ev *ucxx.Event) {
	ep := a.eps.byTag(ev.ID)
	switch {
	case ev.Status == ucxx.StatusAMRendezvous && (ep == nil || ep.phase != phaseReady):
		a.worker.AMRelease(ev.Ptr)
	case ev.Status == ucxx.StatusAMRendezvous:
		at := ep.mailbox.arrive(heldCharge(ev.Length, false)) // its place in arrival order
		at.desc, at.length = ev.Ptr, ev.Length
		ep.mailbox.deferred = append(ep.mailbox.deferred, at)
		a.noteHeld(ep)
		a.fetchDeferred(ep)
	case ev.Status != ucxx.StatusOK || ev.Ptr == nil:
		// Out of memory copying it: the message is lost, the connection goes on.
	case ep == nil || ep.phase != phaseReady:
		ucxx.CFree(ev.Ptr)
	default:
		a.deliverAM(ep, ep.mailbox.arrive(heldCharge(ev.Length, true)), ev.Ptr, ev.Length)
	}
}

// fetchDeferred fetches the endpoint's rendezvous messages whose data waits with the
// sender, oldest first: those that waiting am_recvs will take, and then while the next
// fits in half the bound with what the endpoint holds.
func (a *activeMessages) fetchDeferred(ep *endpoint) {
	box := &ep.mailbox
	box.first() // lost messages at the head take no am_recv
	for len(box.deferred) > 0 {
		at := box.deferred[0]
		asked := box.index(at) < len(box.waiting)
		whole := heldCharge(at.length, true)
		if !asked && ep.heldLevel()-at.charge+whole > a.unexpected.max/2 {
			return
		}
		box.deferred[0] = nil
		box.deferred = box.deferred[1:]
		desc := at.desc
		at.desc = nil
		block := ucxx.CMalloc(ucxx.AMDataOffset + at.length)
		if block == nil {
			a.worker.AMRelease(desc)
			a.deliverAM(ep, at, nil, 0) // lost; those behind it go on
			continue
		}
		if !asked { // taken in unasked: it counts whole
			box.recharge(at, whole)
			a.noteHeld(ep)
		}
		r := a.requests.add(a.newID(), opTagRecv, ep)
		r.internal, r.data = stepAMData, block
		r.arrival = at
		r.expect = at.length
		r.track(a.worker.AMRecvData(desc, uintptr(block)+ucxx.AMDataOffset, at.length, r.id))
	}
}

// onAMData handles the end of a rendezvous fetch.
func (a *activeMessages) onAMData(r *request, st ucxx.Status, length uint64) {
	if r.ep.phase != phaseReady {
		ucxx.CFree(r.data) // the mailbox is closed
		return
	}
	if st != ucxx.StatusOK || length != r.expect {
		ucxx.CFree(r.data)
		r.data = nil // the message is lost; those behind it go on
	}
	a.deliverAM(r.ep, r.arrival, r.data, r.expect)
}

// deliverAM puts the message (nil: lost) in its place, and completes waiting am_recvs
// with the messages now first in arrival order.
func (a *activeMessages) deliverAM(ep *endpoint, at *amArrival, block unsafe.Pointer, length uint64) {
	if block != nil {
		newBlockRecord(block, 1, ucxx.AMDataOffset+length).setFrame(0, ucxx.AMDataOffset, length, uint64(MemHost))
		// Its data is here: it counts whole (a fetch an am_recv asked for had the
		// rendezvous charge, and that am_recv may have been cancelled meanwhile).
		ep.mailbox.recharge(at, heldCharge(length, true))
		a.noteHeld(ep)
	}
	at.block, at.done = block, true
	handed := false
	for {
		id, block, ok := ep.mailbox.handOut()
		if !ok {
			break
		}
		handed = true
		a.finishAMWait(id, ucxx.StatusOK, uint64(uintptr(block)))
	}
	if handed || block == nil {
		a.noteHeld(ep)
		a.fetchDeferred(ep)
	}
}

// cancelAMRecv answers a waiting am_recv with StatusCanceled.
func (a *activeMessages) cancelAMRecv(r *request) {
	if r.ep.mailbox.cancel(r.id) {
		a.finishAMWait(r.id, ucxx.StatusCanceled, 0)
	}
}

// dropAM fails an endpoint's waiting am_recvs with st and frees its kept messages;
// those whose data is with their senders are released.
func (a *activeMessages) dropAM(ep *endpoint, st ucxx.Status) {
	for _, at := range ep.mailbox.deferred {
		a.worker.AMRelease(at.desc)
	}
	for _, id := range ep.mailbox.close() {
		a.finishAMWait(id, st, 0)
	}
}

// finishAMWait completes a waiting am_recv, which has no UCX request.
func (a *activeMessages) finishAMWait(id uint64, st ucxx.Status, length uint64) {
	if w := a.requests.remove(id); w != nil {
		a.requests.recycle(w)
	}
	a.completeNow(id, st, length)
}

// amMailbox is one endpoint's active messages in arrival order, some perhaps still
// being fetched (rendezvous), that no am_recv took yet, and its am_recv requests
// waiting for a message. A message is handed out once it and every message before it
// are in. It belongs to the progress thread.
type amMailbox struct {
	arrived []*amArrival // oldest first
	waiting []uint64     // am_recv request ids, oldest first
	// deferred: the rendezvous messages in arrived whose data waits with the sender,
	// oldest first; charge: what the messages in arrived count against the bound;
	// arrivals and removed: how many ever entered and left arrived (their seq).
	deferred          []*amArrival
	charge            int64
	arrivals, removed uint64
}

// amArrival is one arrived active message: done once its data is in (block) or lost
// (block nil). A rendezvous message not fetched yet has its descriptor (desc) and
// length.
type amArrival struct {
	block  unsafe.Pointer
	done   bool
	charge int64 // what it counts against its endpoint's bound while in the box
	seq    uint64
	desc   unsafe.Pointer
	length uint64
}

// arrive takes the next place in arrival order for a message of that charge.
func (m *amMailbox) arrive(charge int64) *amArrival {
	at := &amArrival{charge: charge, seq: m.arrivals}
	m.arrivals++
	m.charge += charge
	m.arrived = append(m.arrived, at)
	return at
}

// index is at's place in arrival order, 0 for the oldest in the box.
func (m *amMailbox) index(at *amArrival) int { return int(at.seq - m.removed) }

// recharge makes at count charge.
func (m *amMailbox) recharge(at *amArrival, charge int64) {
	m.charge += charge - at.charge
	at.charge = charge
}

// remove takes the oldest message out of arrived and returns it.
func (m *amMailbox) remove() *amArrival {
	at := m.arrived[0]
	m.arrived[0] = nil
	m.arrived = m.arrived[1:]
	m.removed++
	m.charge -= at.charge
	return at
}

// first drops lost messages at the head and reports whether the oldest is in.
func (m *amMailbox) first() bool {
	for len(m.arrived) > 0 && m.arrived[0].done && m.arrived[0].block == nil {
		m.remove()
	}
	return len(m.arrived) > 0 && m.arrived[0].done
}

// pop removes and returns the oldest message, which first reported in.
func (m *amMailbox) pop() unsafe.Pointer { return m.remove().block }

// handOut pairs the oldest waiting am_recv with the oldest message, if both are there.
func (m *amMailbox) handOut() (id uint64, block unsafe.Pointer, ok bool) {
	if len(m.waiting) == 0 || !m.first() {
		return 0, nil, false
	}
	id = m.waiting[0]
	m.waiting = m.waiting[1:]
	return id, m.pop(), true
}

// take returns the oldest message if it is in, or registers am_recv id as waiting.
func (m *amMailbox) take(id uint64) (block unsafe.Pointer, ok bool) {
	if len(m.waiting) == 0 && m.first() {
		return m.pop(), true
	}
	m.waiting = append(m.waiting, id)
	return nil, false
}

// cancel stops am_recv id from waiting; false if it was not waiting.
func (m *amMailbox) cancel(id uint64) bool {
	for i, w := range m.waiting {
		if w == id {
			m.waiting = append(m.waiting[:i], m.waiting[i+1:]...)
			return true
		}
	}
	return false
}

// close frees the messages that are in and returns the waiting am_recvs, emptying the
// box; messages still being fetched are freed when their fetch ends.
func (m *amMailbox) close() (waiting []uint64) {
	for _, at := range m.arrived {
		if at.done && at.block != nil {
			ucxx.CFree(at.block)
		}
	}
	waiting = m.waiting
	*m = amMailbox{}
	return waiting
}
