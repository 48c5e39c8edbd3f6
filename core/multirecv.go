package core

import (
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Receiving a multi-buffer message: its headers one by one into the op's header
// memory, then, once admission lets it (admission.go), every frame at once into one
// block (block.go), the CUDA frames and the host frames the receive owns apart.

// RecvMulti queues a multi-buffer receive on endpoint ep (0: on the worker, from any
// endpoint) and tag. Its completion's
// Length is the address of the message's block (see block.go); the receiver owns
// the block and frees it with free().
func (e *Engine) RecvMulti(ep uint64, tag uint64) (uint64, error) {
	t, _, err := e.recvMultiOp(ep, tag, FramePolicy{}, false)
	return t.ID, err
}

// RecvMultiInline is RecvMulti, waiting up to Options.InlineWait for the receive to
// end (a message of small host frames that is already there does): then the Ticket is
// Done, its Length the block's address, and no completion is queued. Host frames of
// at least ownHostFrom bytes (0: none) get allocations of their own
// (FramePolicy.OwnHostFrom).
func (e *Engine) RecvMultiInline(ep uint64, tag uint64, ownHostFrom uint64) (Ticket, error) {
	t, _, err := e.recvMultiOp(ep, tag, FramePolicy{OwnHostFrom: ownHostFrom}, true)
	return t, err
}

func (e *Engine) recvMultiOp(ep uint64, tag uint64, policy FramePolicy, inline bool) (t Ticket, needID uint64, err error) {
	// No liveness check here: a receive on an endpoint its peer broke may still take a
	// message that arrived before, and only the progress thread can see that.
	if e.closing.Load() {
		return Ticket{}, 0, ErrEngineClosed
	}
	op := getMultiOp()
	op.recv = true
	id := e.newID()
	op.id = id
	op.policy = policy
	if policy.asks() {
		needID = e.newID()
		op.needID = needID
	}
	var budget *inlineBudget
	if inline {
		budget = e.eps.recvBudget(ep, &e.inlineWorkerRecv)
	}
	t, err = e.submitTransfer(submission{op: opRecvMulti, id: id, ep: ep, tag: tag, multi: op}, budget)
	return t, needID, err
}

func (m *multiBuffers) recvMulti(s *submission) {
	ep, ok := m.beginMulti(s)
	if !ok {
		return
	}
	op := s.multi
	key := multiKey{tag: op.tag} // a receive on the worker: the worker's stream
	if ep != nil {
		key.ep = ep.handle
	}
	q := m.multiRecv[key]
	if q == nil {
		q = &multiQueue{key: key}
		m.multiRecv[key] = q
	}
	if len(q.ready) > 0 {
		// A message a cancelled receive left: it comes before any other.
		block := q.ready[0]
		q.ready = q.ready[1:]
		m.completeNow(op.id, ucxx.StatusOK, uint64(uintptr(block)))
		m.orphan(op)
		putMultiOp(op)
		m.forgetIfIdle(q)
		return
	}
	op.queue = q
	q.ops = append(q.ops, op)
	if len(q.ops) == 1 {
		m.startRecvMulti(q)
	}
}

// orphan ends op's tie to its application request, which was answered: the request
// leaves the table, and the message op receives, if any, is handed over when it is in.
func (m *multiBuffers) orphan(op *multiOp) {
	if w := m.requests.remove(op.id); w != nil {
		if w.ep != nil {
			m.maybeFree(w.ep)
		}
		m.requests.recycle(w)
	}
	op.id, op.whole = 0, nil
}

// handOver gives a message whose receive was cancelled to the oldest receive of its
// stream still awaited, which gives its own message up in turn, or keeps it for the
// stream's next receive: cancelling a receive loses no message and reorders none.
func (m *multiBuffers) handOver(q *multiQueue, block unsafe.Pointer) {
	for _, p := range q.ops {
		if p.id != 0 {
			m.completeNow(p.id, ucxx.StatusOK, uint64(uintptr(block)))
			m.orphan(p)
			return
		}
	}
	q.ready = append(q.ready, block)
}

func (m *multiBuffers) postHeaderRecv(op *multiOp) {
	r := m.part(op, opTagRecv, stepMultiHeader)
	op.remaining++
	m.postTagRecv(r, uintptr(op.headers), InlineLimit, op.tag, ^uint64(0), 0)
}

// onMultiHeader handles a received header.
func (m *multiBuffers) onMultiHeader(r *request, st ucxx.Status, length uint64) {
	op := r.multi
	op.remaining--
	q := op.queue
	if st != ucxx.StatusOK {
		if st == ucxx.StatusMessageTruncated {
			// A "header" longer than any header: the peer is not speaking our format,
			// and where its message ends is unknown.
			q.poisoned = ucxx.StatusIOError
			st = ucxx.StatusIOError
		}
		op.status = st
		m.finishMulti(op)
		m.nextReceive(q)
		return
	}
	op.gotHeader = true
	op.headersFed++
	if op.cancelled && op.id != 0 {
		// Cancelled while its header was on the way: as cancelMulti does once a
		// header is in, the request ends now and the message goes to the next receive.
		m.completeNow(op.id, ucxx.StatusCanceled, 0)
		m.orphan(op)
	}
	if st := q.poisoned; st != ucxx.StatusOK || !framesHere(op.ep) {
		// Its header's completion came after the stop, its endpoint's teardown began
		// or the stream broke: nothing more is posted for it, not even the rest of its
		// headers, nor does it wait for room.
		if st == ucxx.StatusOK {
			st = endpointStatus(op.ep)
		}
		op.status = st
		m.finishMulti(op)
		m.nextReceive(q)
		return
	}
	done, err := op.dec.Feed(unsafe.Slice((*byte)(op.headers), length))
	if err != nil {
		m.rejectMessage(op, err)
		return
	}
	if !done {
		if st, dry := m.drainedDry(op); dry {
			m.endDry(op, st) // the rest of its headers will not come
			return
		}
		m.postHeaderRecv(op)
		return
	}
	op.plan.plan(op.dec.Sizes, op.dec.Types, op.policy)
	switch ok, st := m.admission.admit(op); {
	case st != ucxx.StatusOK:
		m.rejectWhole(op, st)
	case ok:
		m.receiveFrames(op)
	default:
		m.awaitRoom(op)
	}
}

// receiveFrames allocates the message's block and posts every frame receive.
func (m *multiBuffers) receiveFrames(op *multiOp) {
	q := op.queue
	if !framesHere(op.ep) {
		op.status = endpointStatus(op.ep)
		m.finishMulti(op)
		m.nextReceive(q)
		return
	}
	if op.dec.FrameMessages() > 0 {
		if st, dry := m.drainedDry(op); dry {
			m.endDry(op, st) // its frames will not come
			return
		}
	}
	op.block = ucxx.CMalloc(op.plan.blockSize)
	if op.block == nil {
		m.rejectWhole(op, ucxx.StatusNoMemory)
		return
	}
	if op.plan.byApplication > 0 {
		m.askForFrames(op) // frames.go: the application allocates them
		return
	}
	if m.allocEngineFrames(op) {
		m.postFrames(op)
	}
}

// allocEngineFrames allocates the frames the engine allocates outside the block (CUDA
// frames, large host frames), before anything is posted; if one cannot be allocated
// it frees the others and the block, rejects the message and returns false.
func (m *multiBuffers) allocEngineFrames(op *multiOp) bool {
	for _, f := range op.plan.frames {
		switch f.home {
		case engineCUDA:
			ptr, err := m.cuda.alloc(f.size)
			if err != nil {
				return m.failEngineFrames(op)
			}
			op.cudaFrames = append(op.cudaFrames, ptr)
		case ownHost:
			ptr := HostFrame(f.size)
			if ptr == 0 {
				return m.failEngineFrames(op)
			}
			op.hostFrames = append(op.hostFrames, ptr)
		}
	}
	return true
}

// failEngineFrames frees what allocEngineFrames allocated and the block, and rejects
// the message for want of memory. It returns false, allocEngineFrames' answer.
func (m *multiBuffers) failEngineFrames(op *multiOp) bool {
	op.freeEngineFrames(m.cuda)
	op.userFrames = op.userFrames[:0]
	ucxx.CFree(op.block)
	op.block = nil
	m.rejectWhole(op, ucxx.StatusNoMemory)
	return false
}

// postFrames writes the block's record and receives every frame into the block,
// op.userFrames, op.cudaFrames and op.hostFrames, as the wire brings them
// (multiheader.go): inline small host frames are copied out of the header's tag
// message; gathered ones come in one receive scattered over their places; then one
// receive per other frame (large host frames, CUDA frames, every frame of a message
// of several headers), in frame order: frames share one tag, and UCX matches receives
// in the order they are posted. Then the stream's next message may start.
func (m *multiBuffers) postFrames(op *multiOp) {
	q := op.queue
	rec := newBlockRecord(op.block, len(op.plan.frames), op.plan.blockSize)
	op.plan.writeRecord(rec, op.userFrames, op.cudaFrames, op.hostFrames, m.cuda.frameType())
	inlineAt, _ := op.dec.Inline()
	// The gathered receive's IOV array goes where the header was (decoded by now).
	iov, hostFrames, hostBytes := op.headers, 0, uint64(0)
	var hostAddr uintptr
	op.separate = op.separate[:0]
	for i, f := range op.plan.frames {
		sz, t := f.size, f.memType
		at, _, _ := rec.frame(i)
		addr := uintptr(at)
		if f.home == inBlock {
			addr += uintptr(op.block)
		}
		switch op.dec.Route(i) {
		case RouteInline:
			ucxx.CopyBetween(addr, uintptr(op.headers)+uintptr(inlineAt), sz)
			inlineAt += int(sz)
		case RouteGathered:
			ucxx.PutIOV(iov, hostFrames, addr, sz)
			hostAddr = addr
			hostFrames++
			hostBytes += sz
		default:
			op.separate = append(op.separate, framePlace{addr, sz, t})
		}
	}
	if hostFrames > 0 {
		r := m.part(op, opTagRecv, stepMultiPart)
		r.expect = hostBytes
		op.remaining++
		if hostFrames == 1 {
			m.postTagRecv(r, hostAddr, hostBytes, op.tag, ^uint64(0), ucxx.MemoryHost)
		} else {
			m.postTagRecvIOV(r, iov, hostFrames, op.tag, ^uint64(0))
		}
	}
	for _, f := range op.separate {
		r := m.part(op, opTagRecv, stepMultiPart)
		r.expect = f.size
		op.remaining++
		m.postTagRecv(r, f.addr, f.size, op.tag, ^uint64(0), ucsMemType(uint64(f.memType)))
	}
	op.framesPosted = true
	q.receiving++
	m.nextReceive(q)
	if op.remaining == 0 {
		m.finishMulti(op)
	}
}

// cancelMulti cancels a multi-buffer op as a whole, never half of it: a send that was
// posted is delivered (its frames are on their way and the receiver expects them); a
// receive that has seen none of its message is cancelled; one that has is received
// and dropped, so the stream stays in step. One receiving into memory the application
// provided ends only once those frames are in: the application keeps that memory
// until the receive's completion.
func (m *multiBuffers) cancelMulti(op *multiOp) {
	if !op.recv {
		return
	}
	q := op.queue
	if op.awaiting {
		m.dropAwaiting(op, ucxx.StatusCanceled)
		return
	}
	if len(op.userFrames) > 0 {
		// Its frames are posted into the application's memory (provideFrames): the
		// message cannot go to another receive, and the request ends, Canceled, when
		// they are in (finishMulti).
		op.cancelledInPlace = true
		return
	}
	if op.gotHeader {
		// Its message is on its way: the request ends now, and the message goes to
		// the stream's next receive (handOver).
		m.completeNow(op.id, ucxx.StatusCanceled, 0)
		m.orphan(op)
		return
	}
	if q.active && len(q.ops) > 0 && q.ops[0] == op {
		// Its header receive is posted: cancelling it completes the op as Canceled.
		// UCX may have matched the header already (its completion not handled yet):
		// then onMultiHeader ends the receive as one cancelled after its header.
		op.cancelled = true
		m.cancelParts(op)
		return
	}
	// Nothing of it is posted (queued, or held back behind a drop): take it out.
	for i, o := range q.ops {
		if o == op {
			q.ops = append(q.ops[:i], q.ops[i+1:]...)
			break
		}
	}
	op.status = ucxx.StatusCanceled
	m.finishMulti(op)
	if len(q.ops) == 0 {
		m.startRecvMulti(q) // forgets the stream if nothing else holds it
	}
}

// cancelParts cancels op's UCX requests not cancelled yet.
func (m *multiBuffers) cancelParts(op *multiOp) {
	for _, id := range op.parts {
		if r := m.requests.get(id); r != nil && !r.canceled {
			r.canceled = true
			m.worker.Cancel(r.ucp)
		}
	}
}

// receiveAll receives the frames of admitted messages.
func (m *multiBuffers) receiveAll(admitted []*multiOp) {
	for _, op := range admitted {
		m.receiveFrames(op)
	}
	m.claimAdopted()
}

// failWaiting fails the messages of an endpoint that wait for room: they have no UCX
// request that closing the endpoint would cancel. If the endpoint ends because its
// peer closed it gracefully (peerLeft: goodbye.go), all the peer sent is here: those
// whose frames are all here as announced and that fit now are received instead
// (receiveHere).
func (m *multiBuffers) failWaiting(ep *endpoint, st ucxx.Status, peerLeft bool) {
	waiting := m.admission.removeEndpoint(ep)
	if peerLeft {
		waiting = m.receiveHere(waiting)
	}
	m.failTaken(waiting, st)
	m.claimAdopted()
}

// receiveHere receives those of ops, messages that waited on an endpoint whose peer
// said goodbye and left, whose frames are all here as announced once they claimed
// what is held and in UCX's queue, and for which there is room (proven, they need no
// unproven allowance); it returns the others.
func (m *multiBuffers) receiveHere(ops []*multiOp) (rest []*multiOp) {
	for _, op := range ops {
		m.claimHeld(op)
		if op.wrongFrame || op.unprovenPart() != 0 || !m.admission.reserve(op) {
			rest = append(rest, op)
			continue
		}
		m.receiveFrames(op)
	}
	return rest
}

// failAllWaiting fails every message that waits for room (shutdown): none has a UCX
// request that the stop would cancel.
func (m *multiBuffers) failAllWaiting(st ucxx.Status) {
	m.failTaken(m.admission.take(func(*multiOp) bool { return true }), st)
	m.admission.adopted = nil
}

// failTaken fails messages taken out of the waiting queue with st, each stream going
// on to its next receive.
func (m *multiBuffers) failTaken(ops []*multiOp, st ucxx.Status) {
	for _, op := range ops {
		op.status = st
		q := op.queue
		m.finishMulti(op)
		m.nextReceive(q)
	}
}
