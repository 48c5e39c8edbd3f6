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
// (block): the first lane of a call to block arms the context's timer for the
// deadline (made once, Reset each call: nothing allocated), which wakes every lane
// blocked here, and each fails with ErrTimeout. A plan whose lanes wait on each other
// in a way Parse cannot see (two lanes each acquiring the semaphore the other
// releases after, barriers met in opposite orders) so fails within the call's
// timeout, where it hung the call and Close behind it.

// block is a lane's wait on c, whose lock it holds, for a barrier or semaphore:
// errAborted after an abort, a *RankError (rank -1: this rank's lanes) wrapping
// ErrTimeout once the call's deadline passed, else nil once c was signalled (the
// caller looks again). what names the wait.
func (r *callRun) block(c *sync.Cond, what func() string) error {
	s := r.scope
	if s.aborted.Load() {
		return errAborted
	}
	left := time.Until(s.deadline)
	if left <= 0 {
		return &RankError{Rank: -1, Op: what(), Err: fmt.Errorf("nothing came in %v: %w", s.timeout, ErrTimeout)}
	}
	if !r.syncTimerArmed.Load() && r.syncTimerArmed.CompareAndSwap(false, true) {
		r.ctx.armSyncTimer(left)
	}
	c.Wait()
	return nil
}

// armSyncTimer has the context's timer wake its lanes blocked on barriers and
// semaphores after d (once a call: calls and their first blocked lanes come one at a
// time). A timer a call armed that fires after the call ended wakes nobody, or lanes
// of a later call that look again and sleep on.
func (c *planContext) armSyncTimer(d time.Duration) {
	if c.syncTimer == nil {
		c.syncTimer = time.AfterFunc(d, c.wakeLanes)
		return
	}
	c.syncTimer.Reset(d)
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

// arrive waits until count lanes arrived (count <= 1 returns at once; block:
// errAborted, ErrTimeout); id names the barrier.
func (b *laneBarrier) arrive(count int, r *callRun, id int) error {
	if count <= 1 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cond == nil {
		b.cond = sync.NewCond(&b.mu)
	}
	gen := b.gen
	b.arrived++
	if b.arrived == count {
		b.arrived = 0
		b.gen++
		b.cond.Broadcast()
		return nil
	}
	for gen == b.gen {
		if err := r.block(b.cond, func() string { return fmt.Sprintf("barrier %d: waiting for %d lanes", id, count) }); err != nil {
			return err
		}
	}
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

// acquire waits until the count is positive (block: errAborted, ErrTimeout) and
// decrements it; id names the semaphore.
func (s *rankSemaphore) acquire(r *callRun, id int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.v <= 0 {
		if err := r.block(s.cond, func() string { return fmt.Sprintf("waiting for a release of semaphore %d", id) }); err != nil {
			return err
		}
	}
	s.v--
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
