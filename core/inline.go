package core

import (
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Inline completion: an operation that ends while the call that submitted it is still
// in Go (an eager send, a receive whose message was already there) is handed back to
// that call instead of going through the completion ring. The caller is spared a
// round trip through its event loop (a wake-up, a drain, a Future); see
// benchmarks/design-notes.md for what that saves.
//
// The submitting call takes a slot, writes its request id into it, queues the
// submission and waits up to Options.InlineWait. The progress thread, completing a
// request that has a slot, moves the slot from id to id|inlineDone with a CAS, and
// then reports nothing to the ring. A caller that stops waiting moves the slot from
// id to 0 with a CAS: whichever CAS wins decides where the completion goes, so it is
// delivered exactly once. The id in the state keeps a late progress thread from
// completing a slot that another call has taken since.

// inlineSlotCount bounds the calls waiting at once (one per submitting thread in
// practice); a call that finds none free simply does not wait.
const inlineSlotCount = 64

// inlineDone marks a slot completed; request ids never reach bit 63.
const inlineDone = 1 << 63

type inlineSlot struct {
	state  atomic.Uint64 // 0: no waiter; id: a call waits for request id; id|inlineDone: done
	status atomic.Int64
	length atomic.Uint64
	_      [40]byte // one slot per cache line: waiters spin on their own line
}

// inlineSlots is shared by application threads (acquire, wait, release) and the
// progress thread (complete).
type inlineSlots struct {
	free  atomic.Uint64 // bit i set: slot i is free
	slots [inlineSlotCount]inlineSlot
}

func (s *inlineSlots) init() { s.free.Store(^uint64(0)) }

// acquire takes a free slot for request id and returns its number plus one (the
// submission's slot field), or 0 when all are taken.
func (s *inlineSlots) acquire(id uint64) uint8 {
	for {
		f := s.free.Load()
		if f == 0 {
			return 0
		}
		i := bits.TrailingZeros64(f)
		if s.free.CompareAndSwap(f, f&^(1<<i)) {
			s.slots[i].state.Store(id)
			return uint8(i + 1)
		}
	}
}

// wait spins (yielding the CPU, so a progress thread sharing it can run) until the
// progress thread completed request id in slot n or the wait is over, and releases
// the slot. ok reports an inline completion; otherwise the completion will come
// through the ring.
func (s *inlineSlots) wait(n uint8, id uint64, limit time.Duration) (st ucxx.Status, length uint64, ok bool) {
	slot := &s.slots[n-1]
	var deadline time.Time
	for {
		if slot.state.Load() == id|inlineDone {
			st, length, ok = ucxx.Status(slot.status.Load()), slot.length.Load(), true
			break
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(limit)
		} else if time.Now().After(deadline) {
			if slot.state.CompareAndSwap(id, 0) {
				break
			}
			continue // completed meanwhile: the next pass reads it
		}
		yieldCPU()
	}
	slot.state.Store(0)
	s.free.Or(1 << (n - 1))
	return st, length, ok
}

// done reports whether request id in slot n was completed (loop mode's owner, which
// progresses while it waits).
func (s *inlineSlots) done(n uint8, id uint64) bool {
	return s.slots[n-1].state.Load() == id|inlineDone
}

// complete hands request id's outcome to the call waiting in slot n, if it still
// waits. Progress thread only.
func (s *inlineSlots) complete(n uint8, id uint64, st ucxx.Status, length uint64) bool {
	slot := &s.slots[n-1]
	if slot.state.Load() != id {
		return false
	}
	slot.status.Store(int64(st))
	slot.length.Store(length)
	return slot.state.CompareAndSwap(id, id|inlineDone)
}

// Ticket is what submitting a transfer returns: the id its completion will carry in
// the queue, or, when Done, the outcome of an operation that already ended while the
// call waited, for which nothing is queued.
type Ticket struct {
	ID     uint64
	Done   bool
	Status ucxx.Status
	Length uint64
}

// sendBudget is ep's inline budget for an operation that sends on it, or nil when the
// caller does not wait inline.
func (ep *endpoint) sendBudget(inline bool) *inlineBudget {
	if !inline {
		return nil
	}
	return &ep.inlineSend
}

// inlineMinWait is the wait of a backed-off inlineBudget: enough for a progress thread
// that shares the caller's CPU, woken by the submission, to post it.
const inlineMinWait = 2 * time.Microsecond

// inlineBudget decides how long calls wait for one kind of operation on one endpoint
// to end inline: the full Options.InlineWait, until inlineBackoff waits in a row come
// to nothing (a server waiting for requests that come seldom, rendezvous sends); then
// inlineMinWait, with a full wait every inlineProbe calls to notice when the traffic
// turns quick again: an occasional miss (a scheduling hiccup in a ping-pong) must not
// collapse the wait (benchmarks/design-notes.md has the alternatives measured).
type inlineBudget struct {
	misses atomic.Uint32 // full waits in a row that ended without a completion
}

const (
	inlineBackoff = 16
	inlineProbe   = 8
)

func (b *inlineBudget) wait(limit time.Duration) time.Duration {
	if m := b.misses.Load(); m >= inlineBackoff && m%inlineProbe != 0 {
		return min(inlineMinWait, limit)
	}
	return limit
}

func (b *inlineBudget) update(hit bool) {
	if hit {
		if b.misses.Load() != 0 {
			b.misses.Store(0)
		}
		return
	}
	b.misses.Add(1)
}

// submitTransfer queues s (a transfer with id s.id) and waits for it to end inline
// for as long as budget says; a nil budget: no wait, the completion is queued.
func (e *Engine) submitTransfer(s submission, budget *inlineBudget) (Ticket, error) {
	if e.loopOwner() {
		return e.ownerTransfer(s, budget)
	}
	t := Ticket{ID: s.id}
	limit := e.opts.InlineWait
	if budget == nil || limit <= 0 || e.opts.NoDelayedSubmission {
		return t, e.submitOrRelease(s)
	}
	s.slot = e.inline.acquire(s.id)
	if err := e.submitOrRelease(s); err != nil {
		if s.slot != 0 {
			e.inline.wait(s.slot, s.id, 0)
		}
		return t, err
	}
	if s.slot != 0 {
		w := budget.wait(limit)
		t.Status, t.Length, t.Done = e.inline.wait(s.slot, s.id, w)
		budget.update(t.Done)
	}
	return t, nil
}
