package core

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// Loop mode (Options.Mode == Loop): the engine has no progress thread. The thread
// that called New owns the worker (the "owner", in Python the event loop's thread)
// and makes every ucp_* call, in two places:
//
//   - inline, in its own calls into the engine: a submission it makes is dispatched
//     and the worker progressed before the call returns (no hand-off to another
//     thread, no wake-up), and a transfer's inline wait progresses the worker itself;
//   - in Progress, which the owner calls when PollFD is readable: the worker's event
//     fd fired (UCX has work), another thread submitted (the pool's wake eventfd), or
//     a deadline came (a timer writes the same eventfd).
//
// Every call of the owner ends with the worker armed (rest): from then on anything
// UCX receives makes PollFD readable. Other threads (Go goroutines of the layers
// above, Python threads other than the owner's) submit into the pool exactly as in
// the thread modes; the pool's wake-up protocol then wakes the owner's event loop
// instead of a progress thread. Nothing blocks the owner: a call that would wait for
// the progress thread (onThread, Shutdown) runs its work inline.
//
// What the owner must do: call Progress whenever PollFD is readable, and not block
// anywhere else in the engine's calls for work that needs progress (a Sink's Ready,
// say): nothing else progresses the worker.

// ErrNotOwner: a loop-mode call that only the owner may make (Progress) came from
// another thread.
var ErrNotOwner = errors.New("core: loop-mode progress called off the owner thread")

// loopPasses bounds the passes rest makes to get the worker armed before it leaves
// the rest to the next Progress (it kicks the wake eventfd).
const loopPasses = 16

// startLoop creates the worker on the calling thread, which becomes its owner.
func (e *Engine) startLoop() error {
	e.owner.Store(int32(syscall.Gettid()))
	e.requests.thread.claim()
	e.eps.thread.claim()
	if err := e.setup(); err != nil {
		close(e.done)
		return err
	}
	e.timer = time.AfterFunc(idleWake, e.timerKick)
	e.timerAt = time.Now().Add(idleWake)
	if e.opts.WarmUp != "" {
		e.startWarmUp(e.opts.WarmUp, 0)
	}
	e.rest()
	return nil
}

// loopOwner reports whether the engine runs in loop mode and the caller is its owner:
// then the caller makes the ucp_* calls itself.
func (e *Engine) loopOwner() bool {
	return e.opts.Mode == Loop && int32(syscall.Gettid()) == e.owner.Load()
}

// ownerGone reports whether the loop-mode owner's thread has ended: its entry under
// /proc/self/task is gone. A later thread may reuse the id; that reads as alive.
func (e *Engine) ownerGone() bool {
	_, err := os.Stat("/proc/self/task/" + strconv.Itoa(int(e.owner.Load())))
	return errors.Is(err, fs.ErrNotExist)
}

// orphanShutdown is Shutdown in loop mode after the owner's thread ended (a Python
// event loop's thread that finished, with the interpreter's exit handler calling
// from another thread): nothing can be in the engine on the owner's behalf any more,
// so the caller becomes the owner for the stop and runs it inline. Waiting for the
// owner's loop instead would wait out the whole timeout and stop nothing.
func (e *Engine) orphanShutdown(timeout time.Duration) error {
	runtime.LockOSThread() // the stop's ucp_* calls stay on this thread
	defer runtime.UnlockOSThread()
	e.owner.Store(int32(syscall.Gettid()))
	e.requests.thread.claim()
	e.eps.thread.claim()
	return e.ownerShutdown(timeout)
}

// PollFD is the file descriptor a loop-mode owner watches (readable: call Progress);
// -1 in the thread modes.
func (e *Engine) PollFD() int {
	if e.opts.Mode != Loop {
		return -1
	}
	return e.epfd
}

// Progress is the owner's pass in loop mode: it dispatches what other threads
// submitted, progresses the worker, hands completions to the queue, and arms the
// worker again. It reports whether the engine has stopped (its shutdown finished).
// The caller drains the queue after each call: the completions Progress pushes do not
// wake the queue's consumer.
//
// Errors: ErrNotOwner off the owner thread or in a thread mode.
func (e *Engine) Progress() (stopped bool, err error) {
	if !e.loopOwner() {
		return false, ErrNotOwner
	}
	if e.loopDone {
		return true, nil
	}
	e.pool.drainWake()
	e.inProgress = true
	e.pass()
	if !e.loopDone {
		e.rest()
	}
	e.inProgress = false
	return e.loopDone, nil
}

// pass is one turn of the thread mode's loop without its sleep.
func (e *Engine) pass() {
	if e.loopDone {
		return
	}
	e.pool.awake()
	e.dispatch()
	e.progress()
	if e.stopping && e.finishStop() {
		e.loopDone = true
		e.timer.Stop()
		close(e.done)
	}
}

// rest ends an owner's call: the worker armed, other threads told to kick the wake
// eventfd when they submit, and the timer set for the next deadline. A worker that
// stays busy, or work that keeps coming, is left to the next Progress (the wake
// eventfd is kicked so that one comes).
func (e *Engine) rest() {
	for i := 0; i < loopPasses && !e.loopDone; i++ {
		if !e.pool.prepareSleep() {
			e.pass()
			continue
		}
		if e.stopping || e.cuda.waiting() {
			break // polled: the timer's short deadline brings the next pass
		}
		e.drainUnexpected() // as the progress thread before it sleeps: held and bounded now
		armed, err := e.worker.Arm()
		if err != nil || armed {
			e.setTimer()
			return
		}
		e.pool.awake()
		e.pass() // busy: UCX has events to progress first
	}
	if !e.loopDone {
		e.setTimer()
		e.pool.kick()
	}
}

// setTimer has the timer kick the wake eventfd by the next deadline (sleep's
// timeouts): deadlines, keepalives, polled states. Moved only when the new deadline is
// earlier, or the old one passed: a timer that fires early costs one empty Progress.
func (e *Engine) setTimer() {
	d := e.sleepTimeout()
	now := time.Now()
	at := now.Add(d)
	if now.Before(e.timerAt) && !at.Before(e.timerAt) {
		return
	}
	e.timer.Reset(d)
	e.timerAt = at
}

// ownerSubmit is submit on the owner in loop mode: the submission goes through the
// pool (so that it is dispatched after what other threads queued before it), and is
// dispatched now.
func (e *Engine) ownerSubmit(s submission) {
	e.pool.push(s)
	e.pass()
	e.rest()
}

// ownerRun is onThread on the owner in loop mode: f runs now, after what was queued.
func (e *Engine) ownerRun(f func()) {
	e.pass()
	if !e.loopDone {
		f()
	}
	e.rest()
}

// ownerTransfer is submitTransfer on the owner in loop mode: the owner dispatches the
// transfer and progresses the worker until it ended or the inline wait is over.
func (e *Engine) ownerTransfer(s submission, budget *inlineBudget) (Ticket, error) {
	t := Ticket{ID: s.id}
	if e.closing.Load() {
		s.cuda.release()
		return t, ErrEngineClosed
	}
	limit := e.opts.InlineWait
	if budget != nil && limit > 0 {
		s.slot = e.inline.acquire(s.id)
	}
	e.pool.push(s)
	e.pass()
	if s.slot != 0 {
		deadline := time.Now().Add(budget.wait(limit))
		for !e.inline.done(s.slot, s.id) && !e.loopDone && time.Now().Before(deadline) {
			yieldCPU()
			e.pass()
		}
		t.Status, t.Length, t.Done = e.inline.wait(s.slot, s.id, 0)
		budget.update(t.Done)
	}
	e.rest()
	return t, nil
}

// ownerShutdown is Shutdown on the owner in loop mode: the stop runs inline, passing
// until nothing is in flight or the deadline passed.
func (e *Engine) ownerShutdown(timeout time.Duration) error {
	stopped := make(chan error, 1)
	e.pass()
	if e.loopDone {
		return ErrEngineClosed
	}
	e.beginStop(time.Now().Add(timeout), stopped)
	for !e.loopDone {
		e.pass()
		if !e.loopDone {
			yieldCPU()
		}
	}
	e.closeWake()
	select {
	case err := <-stopped:
		return err
	default:
		return fmt.Errorf("core: loop-mode shutdown ended without a result")
	}
}

// timerKick is the timer's callback: it wakes the owner unless the wake eventfd is
// closed (its number may belong to another file by now).
func (e *Engine) timerKick() {
	e.timerMu.Lock()
	if !e.timerOff {
		e.pool.kick()
	}
	e.timerMu.Unlock()
}

// closeWake closes the pool's wake eventfd once the engine stopped.
func (e *Engine) closeWake() {
	e.timerMu.Lock()
	e.timerOff = true
	e.timerMu.Unlock()
	e.pool.wakeFD.Close()
}
