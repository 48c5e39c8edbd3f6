package core

import (
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Unexpected messages. UCX keeps a tag message that no receive was posted for in its
// unexpected queue, without bound, and keeps it after its sender has gone. So after
// each progress pass the engine takes every such message out of that queue (a tag
// probe with remove: the message's handle, not a copy of its data) into the
// unexpected store, charged to the endpoint whose receive (or control, direct.go) tag
// the message's tag carries (tags.go), and every tag receive the engine posts looks
// in the store first, oldest first, so messages match in the order UCX would have
// matched them.
//
// An endpoint whose held messages pass Options.MaxUnexpectedBytes fails with
// StatusExceedsLimit, as if UCX had reported it, and its held messages are dropped
// (flowcontrol.go: an honest ucxx-go sender is paced well before that).
// Frames a multi-buffer message waiting for room claimed (evidence.go) count only
// beyond what its headers announced, and beyond the outstanding-bytes bounds: it
// receives them once admitted.
// Messages whose tag names no endpoint (forced tags) share one such bound, beyond
// which each further one is dropped. A held message's charge is its length, up to
// unexpectedLargeCharge: longer messages go by rendezvous, whose data stays with the
// sender until the receive is posted. A peer that forces the eager protocol for large
// messages makes UCX hold more than it is charged.
//
// Held messages are dropped when the application closes or aborts their endpoint, and
// at shutdown; those of an endpoint its peer broke stay, for receives that drain it.

// DefaultMaxUnexpectedBytes is the default Options.MaxUnexpectedBytes.
// Flow control asks senders to wait at half of it (flowcontrol.go): 32 MiB, where
// the endpoint failed before there was flow control.
const DefaultMaxUnexpectedBytes = 64 << 20

// unexpectedLargeCharge is the most a held message is charged (see above), and
// unexpectedOverhead what each costs besides its data: UCX's descriptor and ours
// (20,000 held messages of 8 bytes grew a receiver by 11.3 MiB, ~590 bytes each, over
// TCP and shared memory alike; benchmarks/results/session43/flowcontrol.md).
const (
	unexpectedLargeCharge = 64 << 10
	unexpectedOverhead    = 512
)

// heldCharge is what a held message of size bytes counts against its endpoint's
// bound: whole (an active message whose data is here: am.go), or as a tag message, at
// most unexpectedLargeCharge; and unexpectedOverhead.
func heldCharge(size uint64, whole bool) int64 {
	if !whole {
		size = min(size, unexpectedLargeCharge)
	}
	return int64(size) + unexpectedOverhead
}

// drainEveryPasses is how often, under traffic, the progress thread takes what UCX
// holds unexpected into the store; it also does before it sleeps. Between drains
// messages stay in UCX's queue, newer than everything held, and receives still match
// them there in order; most are matched by receives posted meanwhile, without the
// store (benchmarks/design-notes.md).
const drainEveryPasses = 64

// maxDrainPerPass bounds the messages taken out of UCX's queue in one pass; the rest
// wait for the next (receives still match them there, in order: they are newer than
// everything held).
const maxDrainPerPass = 4096

// heldMessage is one message taken out of UCX's unexpected queue.
type heldMessage struct {
	msg    unsafe.Pointer // ucp_tag_message_h, for ucp_tag_msg_recv_nbx
	tag    uint64
	length uint64
	charge int64
	owner  *endpoint // the endpoint its tag names, or nil
	// claimedBy: the waiting multi-buffer message whose frame it is (evidence.go), or
	// nil; evidence: it is as long as that message announced; exempt: the part of its
	// charge that does not count against its endpoint's bound.
	claimedBy *multiOp
	evidence  bool
	exempt    int64
}

// unexpectedStore holds the messages, oldest first. Progress thread.
type unexpectedStore struct {
	passes   int // progress passes since the last drain
	held     []heldMessage
	orphaned int64 // charge of held messages no endpoint owns
	claimed  int64 // charge exempt from the bounds as frames of waiting messages (evidence.go)
	max      int64 // Options.MaxUnexpectedBytes
}

// find returns the index of the oldest held message matching tag under mask, or -1.
func (u *unexpectedStore) find(tag, mask uint64) int {
	for i := range u.held {
		if u.held[i].tag&mask == tag&mask {
			return i
		}
	}
	return -1
}

// take removes held message i and returns it, uncharged.
func (u *unexpectedStore) take(i int) heldMessage {
	m := u.held[i]
	copy(u.held[i:], u.held[i+1:])
	u.held[len(u.held)-1] = heldMessage{}
	u.held = u.held[:len(u.held)-1]
	if m.claimedBy != nil {
		u.release(&m) // the charge it no longer holds is not its claimant's evidence either
	}
	if m.owner != nil {
		m.owner.unexpectedBytes -= m.charge
	} else {
		u.orphaned -= m.charge
	}
	return m
}

// heldOf is the held message of a message probe took off UCX's queue, charged (not
// yet counted) for owner, the endpoint its tag names (nil: none).
func heldOf(msg unsafe.Pointer, tag, length uint64, owner *endpoint) heldMessage {
	return heldMessage{msg: msg, tag: tag, length: length, owner: owner,
		charge: heldCharge(length, false)}
}

// hold counts m's charge (its owner's, or the shared one) and keeps it, newest.
func (u *unexpectedStore) hold(m heldMessage) {
	if m.owner != nil {
		m.owner.unexpectedBytes += m.charge
	} else {
		u.orphaned += m.charge
	}
	u.held = append(u.held, m)
}

// bytes is the charge of every held message.
func (u *unexpectedStore) bytes() int64 {
	n := u.orphaned
	for i := range u.held {
		if u.held[i].owner != nil {
			n += u.held[i].charge
		}
	}
	return n
}

// postTagRecv posts request r's tag receive: of the oldest held message that matches,
// or of the next one to arrive.
func (t *progressThread) postTagRecv(r *request, addr uintptr, size, tag, mask uint64, memType int) {
	t.requests.markCUDA(r, memType)
	if msg := t.takeHeld(tag, mask); msg != nil {
		r.track(t.worker.TagMsgRecv(msg, addr, size, memType, r.id))
		return
	}
	r.track(t.worker.TagRecv(addr, size, tag, mask, memType, r.id))
}

// postTagRecvIOV is postTagRecv for a receive scattered over the count host buffers
// of the IOV array at iov.
func (t *progressThread) postTagRecvIOV(r *request, iov unsafe.Pointer, count int, tag, mask uint64) {
	if msg := t.takeHeld(tag, mask); msg != nil {
		r.track(t.worker.TagMsgRecvIOV(msg, iov, count, r.id))
		return
	}
	r.track(t.worker.TagRecvIOV(iov, count, tag, mask, r.id))
}

// takeHeld takes the oldest held message matching tag under mask off the store and
// returns its UCX handle, or nil when none is held.
func (t *progressThread) takeHeld(tag, mask uint64) unsafe.Pointer {
	if len(t.unexpected.held) == 0 {
		return nil
	}
	if i := t.unexpected.find(tag, mask); i >= 0 {
		m := t.unexpected.take(i)
		t.noteHeld(m.owner) // less held: pings it owes may be answered
		return m.msg
	}
	return nil
}

// waiting reports whether a message matching tag under mask waits, held or in UCX's
// queue.
func (t *progressThread) waiting(tag, mask uint64) bool {
	if t.unexpected.find(tag, mask) >= 0 {
		return true
	}
	found, _, _, _ := t.worker.TagProbe(tag, mask, false)
	return found
}

// drop receives a held message into nothing, which frees it.
func (t *progressThread) drop(m heldMessage) {
	r := t.requests.add(t.newID(), opTagRecv, nil)
	r.internal = stepDropUnexpected
	r.track(t.worker.TagMsgRecv(m.msg, 0, 0, int(ucxx.MemoryHost), r.id))
}

// dropHeld drops the held messages of the endpoint with handle h, but the control
// words its control receive will still take (a graceful close waits for them).
func (t *progressThread) dropHeld(h uint64) {
	t.dropHeldIf(func(m *heldMessage) bool {
		o := m.owner
		return o != nil && o.handle == h && !o.awaitsControl(m.tag)
	})
}

// dropHeldControl drops the held control words of ep, a connection by address
// whose control receive is cancelled (its UCX endpoint closes); the rest of what it
// holds stays as it was.
func (t *progressThread) dropHeldControl(ep *endpoint) {
	t.dropHeldIf(func(m *heldMessage) bool { return m.owner == ep && m.tag == ep.ctlTag })
}

// dropHeldIf drops the held messages for which drop reports true.
func (t *progressThread) dropHeldIf(drop func(m *heldMessage) bool) {
	u := &t.unexpected
	for i := 0; i < len(u.held); {
		if drop(&u.held[i]) {
			t.drop(u.take(i))
		} else {
			i++
		}
	}
}

// dropAllHeld drops every held message (shutdown).
func (t *progressThread) dropAllHeld() {
	for len(t.unexpected.held) > 0 {
		t.drop(t.unexpected.take(len(t.unexpected.held) - 1))
	}
}

// drainUnexpected moves the messages in UCX's unexpected queue into the store,
// failing endpoints over their bound (settleHeld).
func (e *Engine) drainUnexpected() {
	u := &e.unexpected
	u.passes = 0
	var claimed []*multiOp
	for range maxDrainPerPass {
		found, tag, length, msg := e.worker.TagProbe(0, 0, true)
		if !found {
			break
		}
		m := heldOf(msg, tag, length, e.eps.owner(tag))
		switch {
		case e.stopping:
			e.drop(m) // nobody will receive it
		case m.owner == nil && e.multi.claimer(m.tag) != nil:
			// A frame of a message waiting on a forced tag: held whatever the shared
			// bound (dropping it would put the stream out of step), its claim exempt.
			u.hold(m)
			claimed = e.multi.claimDrained(claimed)
		case m.owner != nil && !e.mayHold(m.owner) && !m.owner.awaitsControl(m.tag):
			e.drop(m) // its endpoint was closed, or failed for holding too much
		case m.owner == nil && u.orphaned+m.charge > u.max:
			e.drop(m) // nobody to fail: the message goes
		default:
			u.hold(m)
			claimed = e.multi.claimDrained(claimed)
			e.noteHeld(m.owner)
		}
	}
	// The claimants settle before over-bound endpoints fail: failing one may end (and
	// recycle) a message in claimed.
	if len(claimed) > 0 {
		e.multi.settleClaims(claimed)
	}
	e.settleHeld()
}

// awaitsControl reports whether a message on tag is a control word ep's control
// receive will still take: a connection by address (direct.go) whose UCX endpoint is
// not closing, so a close waiting for the peer's goodbye or pongs gets them.
func (ep *endpoint) awaitsControl(tag uint64) bool {
	return ep.byAddress && tag == ep.ctlTag && ep.controlOn && !ep.ucxClosing
}

// mayHold reports whether messages for ep may be held: it is open, or its peer broke
// it and the application has not closed it yet (receives may still drain them).
func (e *Engine) mayHold(ep *endpoint) bool {
	if ep.phase < phaseClosing {
		return true
	}
	switch ucxx.Status(ep.failed.Load()) {
	case ucxx.StatusOK, ucxx.StatusCanceled, ucxx.StatusExceedsLimit:
		return false // closed by the application, or failed for holding too much
	}
	if ep.phase == phaseClosed {
		_, dead := e.eps.deadStatus(ep.handle)
		return dead
	}
	return true
}
