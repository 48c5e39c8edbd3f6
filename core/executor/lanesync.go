package executor

import (
	"sync"
	"sync/atomic"
)

// Synchronisation among one rank's lanes: the plan's barriers (MSCCL++'s device-wide
// syncers) and semaphores. Both persist in the plan context; a failing lane aborts
// the call and wakes every lane blocked here.

// laneBarrier lets count lanes through together, generation after generation.
type laneBarrier struct {
	mu      sync.Mutex
	cond    *sync.Cond
	arrived int
	gen     uint64
}

// arrive blocks until count lanes arrived (count <= 1 returns at once), or the call
// aborted (false).
func (b *laneBarrier) arrive(count int, aborted *atomic.Bool) bool {
	if count <= 1 {
		return true
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
		return true
	}
	for gen == b.gen {
		if aborted.Load() {
			return false
		}
		b.cond.Wait()
	}
	return true
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

// rankSemaphore is a plan semaphore: a counter that acquire decrements, waiting
// while it is not positive, and release increments.
type rankSemaphore struct {
	mu   sync.Mutex
	cond *sync.Cond
	v    int
}

func (s *rankSemaphore) init(v int) {
	s.v = v
	s.cond = sync.NewCond(&s.mu)
}

func (s *rankSemaphore) acquire(aborted *atomic.Bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.v <= 0 {
		if aborted.Load() {
			return false
		}
		s.cond.Wait()
	}
	s.v--
	return true
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
