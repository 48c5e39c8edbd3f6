package core

// Evidence for admission (admission.go): a multi-buffer message that waits for room
// claims its stream's frames that arrived before their receives were posted, as the
// progress thread takes them into the unexpected store (unexpected.go). Each claim
// shrinks the message's unproven part; the frames stay in the store, in order, for
// the receives posted once it is admitted.

// awaitRoom is what follows admission's "not yet" for op: it claims the frames already
// held, is admitted at once if that was what it lacked, and asks for a drain of UCX's
// unexpected queue at the next pass (frames that came since the last drain wait there).
func (m *multiBuffers) awaitRoom(op *multiOp) {
	if m.admission.byTag[op.tag] == op && m.claimHeld(op) {
		m.receiveAll(m.admission.retry([]*multiOp{op}))
	}
	m.unexpected.passes = drainEveryPasses
}

// claimHeld claims the held messages that are op's frames, oldest first, and reports
// whether it claimed any.
func (m *multiBuffers) claimHeld(op *multiOp) bool {
	found := false
	for i := range m.unexpected.held {
		h := &m.unexpected.held[i]
		if op.evidenceFrames >= op.dec.FrameMessages() {
			break
		}
		if h.claimedBy == nil && op.claims(h) {
			claim(h, op)
			found = true
		}
	}
	return found
}

// claimDrained lets the waiting message of its tag claim the message the drain just
// held (the store's newest), adding that message to claimed if it did.
func (m *multiBuffers) claimDrained(claimed []*multiOp) []*multiOp {
	h := &m.unexpected.held[len(m.unexpected.held)-1]
	op := m.admission.byTag[h.tag]
	if op == nil || op.evidenceFrames >= op.dec.FrameMessages() || !op.claims(h) {
		return claimed
	}
	claim(h, op)
	for _, c := range claimed {
		if c == op {
			return claimed
		}
	}
	return append(claimed, op)
}

// claims reports whether held message h can be a frame of op's message: its stream's
// tag, from its endpoint (any, for a receive on the worker).
func (op *multiOp) claims(h *heldMessage) bool {
	return h.tag == op.tag && (op.ep == nil || h.owner == op.ep)
}

// claim marks h as op's frame: its charge leaves the unexpected bound, its length
// counts as op's evidence.
func claim(h *heldMessage, op *multiOp) {
	h.claimedBy = op
	op.evidenceFrames++
	op.evidenceBytes += h.length
	op.holding++
	if h.owner != nil {
		h.owner.claimedBytes += h.charge
	}
}

// unclaim gives back the claims of op, which ends without receiving those frames:
// they count against their endpoint's unexpected bound again.
func (m *multiBuffers) unclaim(op *multiOp) {
	for i := range m.unexpected.held {
		if h := &m.unexpected.held[i]; h.claimedBy == op {
			h.claimedBy = nil
			if h.owner != nil {
				h.owner.claimedBytes -= h.charge
			}
		}
	}
	op.holding = 0
}
