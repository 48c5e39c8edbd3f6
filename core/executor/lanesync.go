package executor

import (
	"fmt"
	"sync"
	"time"
)

// Synchronisation among one rank's lanes: the plan's barriers (MSCCL++'s device-wide
// syncers) and semaphores. Both persist in the plan context; a failing lane aborts
// the call and wakes every lane blocked here.
//
// A lane blocked here sleeps on a sync.Cond, parked by the Go scheduler, so that the
// lane another lane lets through runs at once however many lanes a rank has for its
// cores. (A futex sleep in slices, as waits for other ranks take, holds the lane's
// thread and its P in the cgo call until sysmon takes the P back:
// BenchmarkLaneSync/handoff, 2 ranks of 2 lanes on 2 cores, took 1.1 ms a call
// instead of 13 µs.) Its wait ends at the call's deadline, as every other wait does
// (canSleep): the first lane of a call to block arms the context's timer for the
// deadline (made once, Reset each call: nothing allocated); when it fires past the
// deadline it marks the call expired and wakes every lane blocked here, and each
// fails with ErrTimeout. A blocked lane so reads no clock. A plan whose lanes wait on
// each other in a way Parse cannot see (two lanes each acquiring the semaphore the
// other releases after, barriers met in opposite orders) so fails within the call's
// timeout, where it hung the call and Close behind it.

// canSleep reports whether a lane may sleep on for a barrier or semaphore: the call
// neither aborted nor expired. Inlined, as armSyncTimer's quick return: a lane's
// goroutine is new each call, and a deeper stack under its waits grew (copied) that
// stack every call.
func (r *callRun) canSleep() bool {
	return !r.scope.aborted.Load() && r.ctx.syncExpired.Load() != r.flag
}

// laneWait names a blocked lane's wait: on barrier id of count lanes, or on
// semaphore id.
type laneWait struct {
	barrier   bool
	id, count int
}

// stopped is the error of a wait canSleep ended: errAborted after an abort, else a
// *RankError (rank -1: this rank's lanes) wrapping ErrTimeout.
//
//go:noinline
func (r *callRun) stopped(w laneWait) error {
	if r.scope.aborted.Load() {
		return errAborted
	}
	what := fmt.Sprintf("waiting for a release of semaphore %d", w.id)
	if w.barrier {
		what = fmt.Sprintf("barrier %d: waiting for %d lanes", w.id, w.count)
	}
	return &RankError{Rank: -1, Op: what, Err: fmt.Errorf("nothing came in %v: %w", r.scope.timeout, ErrTimeout)}
}

// armSyncTimer arms the context's timer for the call's deadline, once a call (the
// first of its lanes to block; the others return at once).
func (r *callRun) armSyncTimer() {
	if !r.syncTimerArmed.Load() {
		r.armSyncTimerSlow()
	}
}

//go:noinline
func (r *callRun) armSyncTimerSlow() {
	if r.syncTimerArmed.CompareAndSwap(false, true) {
		r.ctx.armSyncTimer(r.flag, r.scope.deadline)
	}
}

// endLaneSync stops the timer the call's lanes armed, once they all ended: a Go timer
// pending in the process has every scheduling round of its P read the clock
// (BenchmarkLaneSync/handoff 12 -> 15 us a call on 2 cores with any timer pending).
func (r *callRun) endLaneSync() {
	if r.syncTimerArmed.Load() {
		c := r.ctx
		c.syncMu.Lock()
		if c.syncTimer != nil {
			c.syncTimer.Stop()
		}
		c.syncMu.Unlock()
	}
}

// armSyncTimer has the context's timer fire at call's deadline (once a call: calls
// and their first blocked lanes come one at a time; call is the call's flag, unique
// on the context).
func (c *planContext) armSyncTimer(call uint64, deadline time.Time) {
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	c.syncCall, c.syncDeadline = call, deadline
	if c.syncTimer == nil {
		c.syncTimer = time.AfterFunc(time.Until(deadline), c.syncTimeout)
		return
	}
	c.syncTimer.Reset(time.Until(deadline))
}

// syncTimeout is the timer's work: it marks the call that armed it last expired if
// its deadline passed (a timer an earlier call armed may fire during a later call,
// whose lanes must not fail: they look again and sleep on), and wakes every lane
// blocked on the context's barriers and semaphores.
func (c *planContext) syncTimeout() {
	c.syncMu.Lock()
	if !time.Now().Before(c.syncDeadline) {
		c.syncExpired.Store(c.syncCall)
	}
	c.syncMu.Unlock()
	c.wakeLanes()
}

// wakeLanes wakes every lane blocked on the context's barriers and semaphores, to
// look again (a barrier keeps its arrivals: the timer may fire during a later call).
func (c *planContext) wakeLanes() {
	for i := range c.barriers {
		c.barriers[i].broadcast()
	}
	for i := range c.sems {
		c.sems[i].wake()
	}
}

// laneBarrier lets count lanes through together, generation after generation.
type laneBarrier struct {
	mu      sync.Mutex
	cond    *sync.Cond
	arrived int
	gen     uint64
}

// arrive waits until count lanes arrived (count <= 1 returns at once), or until
// the call aborted (errAborted) or expired (ErrTimeout); id names the barrier.
func (b *laneBarrier) arrive(count int, r *callRun, id int) error {
	if count <= 1 {
		return nil
	}
	b.mu.Lock()
	if b.cond == nil {
		b.cond = sync.NewCond(&b.mu)
	}
	gen := b.gen
	b.arrived++
	if b.arrived == count {
		b.arrived = 0
		b.gen++
		b.cond.Broadcast()
		b.mu.Unlock()
		return nil
	}
	for gen == b.gen {
		if !r.canSleep() {
			b.mu.Unlock()
			return r.stopped(laneWait{barrier: true, id: id, count: count})
		}
		r.armSyncTimer()
		b.cond.Wait()
	}
	b.mu.Unlock()
	return nil
}

// wake wakes the barrier's waiters (after an abort) and forgets the arrivals.
func (b *laneBarrier) wake() {
	b.mu.Lock()
	b.arrived = 0
	if b.cond != nil {
		b.cond.Broadcast()
	}
	b.mu.Unlock()
}

// broadcast wakes the barrier's waiters to look again.
func (b *laneBarrier) broadcast() {
	b.mu.Lock()
	if b.cond != nil {
		b.cond.Broadcast()
	}
	b.mu.Unlock()
}

// rankSemaphore is a plan semaphore: a counter that acquire decrements, waiting
// while it is not positive (within the call's deadline), and release increments.
type rankSemaphore struct {
	mu   sync.Mutex
	cond *sync.Cond
	v    int
}

func (s *rankSemaphore) init(v int) {
	s.v = v
	s.cond = sync.NewCond(&s.mu)
}

// acquire waits until the count is positive, or until the call aborted
// (errAborted) or expired (ErrTimeout), and decrements it; id names the semaphore.
func (s *rankSemaphore) acquire(r *callRun, id int) error {
	s.mu.Lock()
	for s.v <= 0 {
		if !r.canSleep() {
			s.mu.Unlock()
			return r.stopped(laneWait{id: id})
		}
		r.armSyncTimer()
		s.cond.Wait()
	}
	s.v--
	s.mu.Unlock()
	return nil
}

func (s *rankSemaphore) release() {
	s.mu.Lock()
	s.v++
	s.mu.Unlock()
	s.cond.Broadcast()
}

func (s *rankSemaphore) wake() {
	s.mu.Lock()
	s.cond.Broadcast()
	s.mu.Unlock()
}
