package executor

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// turns keeps the executor's operations in the order they were made where they wait
// for it: every rank must make the same calls and barriers in the same order, and a
// call Start handed to a goroutine (its ranks late, its caller's streams busy, the
// executor held by a call still running) must not be overtaken by one made after it,
// by Start or by anything else that waits for the executor. Each such operation takes
// a turn when it is made and holds the executor (x.mu) only after the turns before
// it did; sync.Mutex alone hands itself to its waiters in no particular order. Start
// runs a call where it is made only while no turn is waiting (busy).
type turns struct {
	waiting atomic.Int64  // turns taken that do not hold the executor yet
	mu      sync.Mutex    // guards last
	last    chan struct{} // closed once the newest turn holds the executor
}

// turn is one operation's place in the order.
type turn struct {
	t    *turns
	prev chan struct{} // the turn before (nil: none)
	mine chan struct{}
}

// take returns the next turn.
func (t *turns) take() turn {
	t.mu.Lock()
	defer t.mu.Unlock()
	tn := turn{t: t, prev: t.last, mine: make(chan struct{})}
	t.last = tn.mine
	t.waiting.Add(1)
	return tn
}

// busy reports whether a turn is waiting for the executor (no lock: Start asks on
// every call).
func (t *turns) busy() bool { return t.waiting.Load() > 0 }

// lock waits for the turn before tn to hold mu, then locks mu; the turn after tn
// may then wait for mu, as the only one.
func (tn turn) lock(mu *sync.Mutex) {
	if tn.prev != nil {
		<-tn.prev
	}
	mu.Lock()
	tn.t.waiting.Add(-1)
	close(tn.mine)
}

// run waits for the turn, runs f holding the executor, and lets the executor go.
func (tn turn) run(x *Executor, f func() error) error {
	tn.lock(&x.mu)
	defer x.release()
	return f()
}

// release lets the executor go: what every holder of x.mu defers. A panic on the
// way (a bug: pybridge recovers it into an error) marks the executor broken first,
// since what it holds is in an unknown state, so that the operations after it fail
// (ErrBroken) instead of waiting on a lock nobody will let go; the panic goes on.
func (x *Executor) release() {
	if r := recover(); r != nil {
		x.releasePanicking(r)
	}
	x.mu.Unlock()
}

// releaseOnPanic is release for a frame that holds x.mu part of the way and lets it
// go, or hands it on, itself: deferred with held, which the frame clears as it does.
func (x *Executor) releaseOnPanic(held *bool) {
	if !*held {
		return
	}
	if r := recover(); r != nil {
		x.releasePanicking(r)
	}
}

// releasePanicking records panic r, met while holding x.mu, as the executor's
// failure, lets the executor go and panics on.
func (x *Executor) releasePanicking(r any) {
	x.panicked = true
	if x.broken == nil {
		x.broken = fmt.Errorf("executor: internal error: %v", r)
	}
	x.mu.Unlock()
	panic(r)
}

// later takes a turn now for f and returns f's run in it, for another goroutine to
// make exactly once: an operation handed over keeps the place it was made in.
func (x *Executor) later(f func() error) func() error {
	tn := x.turns.take()
	return func() error { return tn.run(x, f) }
}

// lockInTurn holds the executor in a turn taken now: what every blocking operation
// does. With no turn waiting and the executor free it takes no turn (nothing made
// before it is waiting to go first).
func (x *Executor) lockInTurn() {
	if !x.turns.busy() && x.mu.TryLock() {
		return
	}
	x.turns.take().lock(&x.mu)
}

// Turn is a place in the order of the executor's operations, taken when an operation
// is made and used once, later, from one goroutine: for a caller that makes one
// operation of several calls and runs them elsewhere (the collective layer's uneven
// allreduce: a head and a padded tail), so that a call made after it waits for them
// as it would for one. Every later operation waits for a Turn until it is used
// (Execute) or given up (Pass): defer Pass where it is taken over, so that it is
// given up whatever way the operation ends, a panic included.
type Turn struct {
	tn   turn
	x    *Executor
	done *bool // used or given up
}

// TakeTurn takes the next place in the executor's order.
func (x *Executor) TakeTurn() Turn { return Turn{x.turns.take(), x, new(bool)} }

// Execute runs c as Executor.Execute does, in the turn.
func (t Turn) Execute(c Call) error {
	*t.done = true
	return t.tn.run(t.x, func() error { return t.x.execute(c) })
}

// Pass gives the turn up unless Execute used it, or Pass already gave it up.
func (t Turn) Pass() {
	if !*t.done {
		*t.done = true
		t.tn.run(t.x, func() error { return nil })
	}
}
