package core

import "github.com/ucxx-go/ucxx-go/ucxx"

// Evidence for admission (admission.go). A multi-buffer message too large to be
// admitted on its headers' word waits until every one of its frames is here: each
// tag message of its wire (multiheader.go: the gathered small frames, then each other
// frame) held in the unexpected store (unexpected.go), in order and exactly as long
// as the headers announced. The waiting message claims its stream's held messages as
// they come (taken out of UCX's queue at once for its own tag, and by every drain),
// and a claimed message's charge, up to what the headers announced for it, leaves its
// endpoint's unexpected bound, within the endpoint's outstanding-bytes bound. Partial
// evidence counts for nothing: a peer that sent all but one frame would otherwise hold
// the rest of the room for good. A message that claimed a frame of the wrong length
// fails once all its frames are here (MessageTruncated, as its receives would have),
// and they are dropped; until then it waits, holding nothing.

// awaitRoom is what follows admission's "not yet" for op: it takes op's frames that
// already came out of UCX's queue and claims them, and is admitted at once if that was
// what it lacked.
func (m *multiBuffers) awaitRoom(op *multiOp) {
	m.wireOf(op)
	if m.admission.byTag[op.tag] != op {
		return // another waiting message claims this tag's frames first
	}
	if m.claimHeld(op) {
		m.settleClaims([]*multiOp{op})
	}
}

// settleClaims ends the waiting messages that claimed frames: one with all its frames
// here, one of the wrong length, is rejected (its frames dropped); the others are
// admitted if they fit now.
func (m *multiBuffers) settleClaims(claimed []*multiOp) {
	fit := claimed[:0:0]
	for _, op := range claimed {
		switch {
		case !op.wrongFrame:
			fit = append(fit, op)
		case op.claimed == len(op.wire) && m.admission.remove(op):
			m.rejectWhole(op, ucxx.StatusMessageTruncated)
		}
	}
	if len(fit) > 0 {
		m.receiveAll(m.admission.retry(fit))
	}
}

// wireOf sets op.wire: the lengths of the tag messages that carry op's frames after
// its headers, in order, as postFrames receives them.
func (m *multiBuffers) wireOf(op *multiOp) {
	op.wire = op.wire[:0]
	if op.dec.Gathered() { // the small host frames' one message comes first
		var n uint64
		for i, s := range op.dec.Sizes {
			if op.dec.Route(i) == RouteGathered {
				n += s
			}
		}
		op.wire = append(op.wire, n)
	}
	for i, s := range op.dec.Sizes {
		if op.dec.Route(i) == RouteAlone {
			op.wire = append(op.wire, s)
		}
	}
	if uint64(len(op.wire)) != op.dec.FrameMessages() {
		op.wire = op.wire[:0] // not the wire the decoder counted: nothing can prove it
	}
}

// claimHeld claims op's frames: those held, then those UCX's queue holds under op's
// tag (taken out into the store). It reports whether it claimed any.
func (m *multiBuffers) claimHeld(op *multiOp) bool {
	found := false
	for i := range m.unexpected.held {
		if h := &m.unexpected.held[i]; h.claimedBy == nil && op.claims(h) {
			m.claim(h, op)
			found = true
		}
	}
	if op.ep != nil && !framesHere(op.ep) {
		return found // closing: what it sent is dropped with it
	}
	for op.claimed < len(op.wire) {
		ok, tag, length, msg := m.worker.TagProbe(op.tag, ^uint64(0), true)
		if !ok {
			break
		}
		m.unexpected.hold(heldOf(msg, tag, length, m.eps.owner(tag)))
		m.claim(&m.unexpected.held[len(m.unexpected.held)-1], op)
		found = true
	}
	return found
}

// claimAdopted claims, for each waiting message that took over a tag whose claiming
// message left (admission.adoptTags), the frames held under it, and admits those it
// lets in.
func (m *multiBuffers) claimAdopted() {
	for len(m.admission.adopted) > 0 {
		adopted := m.admission.adopted
		m.admission.adopted = nil
		var claimed []*multiOp
		for _, op := range adopted {
			if m.admission.byTag[op.tag] == op && m.claimHeld(op) {
				claimed = append(claimed, op)
			}
		}
		if len(claimed) > 0 {
			m.settleClaims(claimed)
		}
	}
}

// claimDrained lets the waiting message of its tag claim the message the drain just
// held (the store's newest), adding that message to claimed if it did.
func (m *multiBuffers) claimDrained(claimed []*multiOp) []*multiOp {
	h := &m.unexpected.held[len(m.unexpected.held)-1]
	op := m.claimer(h.tag)
	if op == nil {
		return claimed
	}
	m.claim(h, op)
	for _, c := range claimed {
		if c == op {
			return claimed
		}
	}
	return append(claimed, op)
}

// claims reports whether held message h is op's next frame: its stream's tag (UCX
// matches by tag alone), while op has frames to claim.
func (op *multiOp) claims(h *heldMessage) bool {
	return h.tag == op.tag && op.claimed < len(op.wire)
}

// claim marks h as op's next frame. It is evidence when exactly as long as announced;
// its charge, up to what was announced, leaves the unexpected bound (its endpoint's,
// or the shared one of messages no endpoint owns) while the exempt charge stays within
// the outstanding-bytes bounds, per endpoint and worker-wide: frames of messages never
// admitted (all but one sent) pin no more than the room admission gives.
func (m *multiBuffers) claim(h *heldMessage, op *multiOp) {
	want := op.wire[op.claimed]
	op.claimed++
	op.holding++
	h.claimedBy = op
	if h.length == want {
		h.evidence = true
		op.evidenceFrames++
	} else {
		op.wrongFrame = true
	}
	exempt := min(h.charge, heldCharge(want, false))
	u, o := &m.unexpected, h.owner
	if u.claimed+exempt > m.admission.maxWorker || (o != nil && o.claimedBytes+exempt > m.admission.maxEndpoint) {
		return
	}
	h.exempt = exempt
	u.claimed += exempt
	if o != nil {
		o.claimedBytes += exempt
		m.noteHeld(o) // it holds less against its bound: pings it owes may be answered
	} else {
		u.orphaned -= exempt
	}
}

// unclaim gives back the claims of op, which ends without receiving those frames:
// they count against their endpoint's unexpected bound again. The level is not noted
// for settleHeld: op ends rejected, its frames dropped next (rejectWhole's discards),
// or with its endpoint gone; a cancelled receive does not give its message's claims
// back but hands them to the stream's next receive (cancelMulti).
func (m *multiBuffers) unclaim(op *multiOp) {
	for i := range m.unexpected.held {
		if h := &m.unexpected.held[i]; h.claimedBy == op {
			m.unexpected.release(h)
		}
	}
	op.holding = 0
}

// release ends h's claim (taken, or given back): its exempt charge counts again.
func (u *unexpectedStore) release(h *heldMessage) {
	op := h.claimedBy
	op.holding--
	if h.evidence {
		op.evidenceFrames--
	}
	u.claimed -= h.exempt
	if h.owner != nil {
		h.owner.claimedBytes -= h.exempt
	} else {
		u.orphaned += h.exempt
	}
	h.claimedBy, h.evidence, h.exempt = nil, false, 0
}

// claimer returns the waiting message whose next frame a message of tag is, or nil.
func (m *multiBuffers) claimer(tag uint64) *multiOp {
	if op := m.admission.byTag[tag]; op != nil && op.claimed < len(op.wire) {
		return op
	}
	return nil
}
