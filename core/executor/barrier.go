package executor

import (
	"fmt"
	"time"

	"github.com/ucxx-go/ucxx-go/core/internal/pause"
)

// Barrier returns once every rank has entered as many barriers as this one has: each
// rank counts its barriers in a word of its board and waits, spinning and then
// sleeping on the futex as a call's waits do, until every other rank's word has
// reached its own count. Only the board is involved: no call is announced, so a
// barrier that fails (a rank that never came, or died) leaves the executor as it was,
// and a broken executor's board still serves barriers. A rank that gave up on
// barriers is as many ahead of a late rank as it gave up on: the late rank's barriers
// pass at once until it has caught up, and the next one waits for everyone again.
//
// The first barrier before any call sets the board up with the other ranks, as a
// first call does, and fails as a first call would (the executor is then broken).
//
// Errors: ErrClosed; ErrNoBoard (wrapping why: ranks on several hosts, or a failed
// setup), every later barrier too, so that ranks meet some other way; a *RankError
// wrapping ErrTimeout or ErrRankFailed, naming a rank that did not come.
func (x *Executor) Barrier() error {
	x.lockInTurn()
	defer x.release()
	return x.barrier()
}

// barrier is Barrier's wait; x.mu is held.
func (x *Executor) barrier() error {
	want, err := x.enterBarrier()
	if err != nil {
		return err
	}
	return x.awaitBarrier(want)
}

// StartBarrier enters a barrier as Barrier does, but without blocking where the other
// ranks are not there yet: when every rank has entered it within patience (waited for
// here, spinning), it returns (nil, nil); otherwise rest, the remainder of the wait,
// for the caller to run elsewhere (a goroutine), exactly once, and before the
// caller's goroutine makes a blocking operation on the executor. A first barrier, which
// sets the board up with the other ranks, and one that finds a call still running
// (which holds the executor) or an earlier operation waiting for it (turns.go), are
// all remainder.
func (x *Executor) StartBarrier(patience time.Duration) (rest func() error, err error) {
	if x.turns.busy() || !x.mu.TryLock() {
		return x.later(x.barrier), nil
	}
	held := true // x.mu, until let go here or handed to rest
	defer x.releaseOnPanic(&held)
	if x.board == nil {
		held = false
		x.mu.Unlock()
		return x.later(x.barrier), nil
	}
	want, err := x.enterBarrier()
	if err != nil {
		held = false
		x.mu.Unlock()
		return nil, err
	}
	until := time.Now().Add(patience)
	for i := 0; ; i++ {
		if x.barrierReached(want) {
			held = false
			x.mu.Unlock()
			return nil, nil
		}
		if i&63 == 63 {
			if time.Now().After(until) {
				break
			}
			pause.Yield()
		}
	}
	held = false // rest's now
	return func() error {
		defer x.release()
		return x.awaitBarrier(want)
	}, nil
}

// enterBarrier counts a barrier in this rank's board word (setting the board up
// first if no call has) and returns the count every rank must reach; x.mu is held.
func (x *Executor) enterBarrier() (uint64, error) {
	if x.closed {
		return 0, ErrClosed
	}
	if x.board == nil {
		if x.broken == nil {
			if err := x.setUp(); err != nil {
				x.broken = err
			}
		}
		if x.board == nil {
			return 0, fmt.Errorf("%w: %v", ErrNoBoard, x.broken)
		}
	}
	x.barriers++
	x.board.segs[x.w.Rank()].word(boardBarriers).store(x.barriers)
	return x.barriers, nil
}

// barrierReached reports whether every rank has entered barrier want.
func (x *Executor) barrierReached(want uint64) bool {
	for q := range x.w.Size() {
		if x.board.segs[q].word(boardBarriers).load() < want {
			return false
		}
	}
	return true
}

// awaitBarrier waits until every other rank has entered barrier want; x.mu is held.
func (x *Executor) awaitBarrier(want uint64) error {
	return x.awaitBoardCount(boardBarriers, want, "barrier")
}

// awaitBoardCount waits until every other rank's board word at off has counted to
// want, within the executor's timeout, failing on a rank that died or did not come
// (a *RankError naming it and what, the count's name); x.mu is held.
func (x *Executor) awaitBoardCount(off, want uint64, what string) error {
	me := x.w.Rank()
	scope := waitScope{deadline: time.Now().Add(x.opts.Timeout), timeout: x.opts.Timeout, spin: x.opts.Spin, alive: x.alive}
	for q := range x.w.Size() {
		if q == me {
			continue
		}
		if err := scope.until(x.board.segs[q].word(off), func(v uint64) bool { return v >= want }, q,
			func() string { return fmt.Sprintf("%s %d", what, want) }); err != nil {
			return err
		}
	}
	return nil
}
