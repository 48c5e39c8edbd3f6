package executor

import (
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/core/plan"
	"github.com/ucxx-go/ucxx-go/core/reduce"
)

// Lanes that wait on each other in a way Parse cannot see: two lanes each acquiring
// the semaphore the other releases after, a lane acquiring twice before it releases,
// barriers met in opposite orders, a semaphore wait beside a barrier. Each pair of
// lists is a rank's two lanes.
var stuckLanes = []struct {
	name  string
	inits []int
	lanes [2][]string
	ops   []string // the ops a rank's failure may name
}{
	{"semaphore cycle", []int{0, 0}, [2][]string{
		{`{"name":"sem_acquire","semaphore_ids":[1]}`, `{"name":"sem_release","semaphore_ids":[0]}`},
		{`{"name":"sem_acquire","semaphore_ids":[0]}`, `{"name":"sem_release","semaphore_ids":[1]}`}}, []string{"sem_acquire"}},
	{"release after the acquire", []int{1}, [2][]string{
		{`{"name":"sem_acquire","semaphore_ids":[0]}`, `{"name":"sem_acquire","semaphore_ids":[0]}`, `{"name":"sem_release","semaphore_ids":[0]}`},
		{`{"name":"nop"}`}}, []string{"sem_acquire"}},
	{"barrier cycle", nil, [2][]string{
		{`{"name":"barrier","barrier_id":0,"num_threadblocks":2}`, `{"name":"barrier","barrier_id":1,"num_threadblocks":2}`},
		{`{"name":"barrier","barrier_id":1,"num_threadblocks":2}`, `{"name":"barrier","barrier_id":0,"num_threadblocks":2}`}}, []string{"barrier"}},
	{"semaphore beside a barrier", []int{0}, [2][]string{
		{`{"name":"sem_acquire","semaphore_ids":[0]}`, `{"name":"barrier","barrier_id":0,"num_threadblocks":2}`},
		{`{"name":"barrier","barrier_id":0,"num_threadblocks":2}`, `{"name":"sem_release","semaphore_ids":[0]}`}}, []string{"sem_acquire", "barrier"}},
}

// within runs f and ends the test binary, with every goroutine's stack, if it has
// not returned after d: a hung call holds its executor, so the test's cleanup (Close,
// which a test's own panic runs too) would hang as well.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		msg := fmt.Sprintf("%s: %s has not returned after %v", t.Name(), what, d)
		debug.SetTraceback("all")
		go panic(msg) // not on the test's goroutine, whose panic runs the cleanup
		<-done
	}
}

// TestLanesWaitingOnEachOtherTimeOut: a plan whose lanes wait on each other forever
// fails every rank's call with a *RankError wrapping ErrTimeout, naming the op, within
// the call's timeout (they hung in sem_acquire and barrier, which had no deadline);
// the next call fails at once with ErrBroken (the ranks' semaphores are off), and
// Close returns.
func TestLanesWaitingOnEachOtherTimeOut(t *testing.T) {
	const timeout = 2 * time.Second // it also bounds the context's setup (TestAbsentRankTimesOutNamingIt)
	for _, c := range stuckLanes {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p, err := plan.Parse([]byte(semPlan("stuck", 2, c.inits, c.lanes[0], c.lanes[1])))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			xs := newWorld(t, 2, Options{Timeout: timeout})
			bufs := [][]byte{cbytes(64), cbytes(64)}
			call := func(r int) Call {
				return Call{Plan: p, Send: Buffer{addr(bufs[r]), 64}, Recv: Buffer{addr(bufs[r]), 64}, DType: reduce.Float32, Op: reduce.Sum}
			}
			var errs []error
			t0 := time.Now()
			within(t, 5*timeout, "Execute", func() {
				errs = onAll(xs, func(r int, x *Executor) error { return x.Execute(call(r)) })
			})
			t.Logf("the calls failed after %v: %v", time.Since(t0), errs[0])
			for r, err := range errs {
				var re *RankError
				named := slices.ContainsFunc(c.ops, func(op string) bool { return strings.Contains(err.Error(), "("+op+")") })
				if !errors.Is(err, ErrTimeout) || !errors.As(err, &re) || !named {
					t.Fatalf("rank %d: %v, want a timeout in %s", r, err, strings.Join(c.ops, " or "))
				}
			}
			within(t, 5*time.Second, "Execute after the failure", func() {
				if err := xs[0].Execute(call(0)); !errors.Is(err, ErrBroken) {
					t.Errorf("the call after the failure: %v, want ErrBroken", err)
				}
			})
			for r, x := range xs {
				within(t, 5*time.Second, "Close", func() {
					if err := x.Close(); err != nil {
						t.Errorf("rank %d's Close: %v", r, err)
					}
				})
			}
		})
	}
}

// TestCloseBehindAStuckSemaphoreReturns: Close made while a call waits on a semaphore
// nothing will release returns once the call timed out (it waited forever behind the
// call, which held the executor), and the executor is closed.
func TestCloseBehindAStuckSemaphoreReturns(t *testing.T) {
	const timeout = 2 * time.Second
	c := stuckLanes[0]
	p, err := plan.Parse([]byte(semPlan("stuck", 2, c.inits, c.lanes[0], c.lanes[1])))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	xs := newWorld(t, 2, Options{Timeout: timeout})
	bufs := [][]byte{cbytes(64), cbytes(64)}
	begun := make(chan struct{}, len(xs))
	beginHook = func() { begun <- struct{}{} } // the call holds the executor from here
	defer func() { beginHook = nil }()
	calls := make(chan error, len(xs))
	for r, x := range xs {
		go func() {
			calls <- x.Execute(Call{Plan: p, Send: Buffer{addr(bufs[r]), 64}, Recv: Buffer{addr(bufs[r]), 64}, DType: reduce.Float32, Op: reduce.Sum})
		}()
	}
	for range xs { // Close goes before calls still waiting for their turn: these have begun
		<-begun
	}
	within(t, 5*timeout, "Close", func() {
		for r, err := range onAll(xs, func(_ int, x *Executor) error { return x.Close() }) {
			if err != nil {
				t.Errorf("rank %d's Close: %v", r, err)
			}
		}
	})
	for range xs {
		if err := <-calls; !errors.Is(err, ErrTimeout) {
			t.Errorf("the stuck call: %v, want ErrTimeout", err)
		}
	}
	if err := xs[0].Execute(Call{Plan: p}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Execute after Close: %v, want ErrClosed", err)
	}
}

// TestLaneSyncWakesToLookAgain: lanes woken while they wait on a barrier or semaphore
// (the timer a call armed for its deadline may fire during a later call) look again
// and wait on: calls of plans that hand semaphores between lanes and meet at barriers
// all succeed while their contexts' timers fire without end, the first times for an
// earlier call whose deadline passed.
func TestLaneSyncWakesToLookAgain(t *testing.T) {
	for _, text := range []string{handoffPlan(2, 16), barriersPlan(2, 16)} {
		p, err := plan.Parse([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		xs := newWorld(t, 2, Options{Timeout: 10 * time.Second})
		bufs := [][]byte{cbytes(64), cbytes(64)}
		run := func(calls int) {
			t.Helper()
			within(t, 60*time.Second, p.Name, func() {
				for r, err := range onAll(xs, func(r int, x *Executor) error {
					for range calls {
						if err := x.Execute(Call{Plan: p, Send: Buffer{addr(bufs[r]), 64}, Recv: Buffer{addr(bufs[r]), 64}, DType: reduce.Float32, Op: reduce.Sum}); err != nil {
							return err
						}
					}
					return nil
				}) {
					if err != nil {
						t.Fatalf("%s: rank %d: %v", p.Name, r, err)
					}
				}
			})
		}
		run(1) // makes the contexts
		ctxs := []*planContext{xs[0].ctxs[0], xs[1].ctxs[0]}
		for _, c := range ctxs {
			c.syncMu.Lock()
			c.syncCall, c.syncDeadline = 1, time.Now().Add(-time.Second) // what the first call armed, expired
			c.syncMu.Unlock()
		}
		stop := make(chan struct{})
		woken := make(chan struct{})
		go func() {
			defer close(woken)
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, c := range ctxs {
					c.syncTimeout()
				}
			}
		}()
		run(100)
		close(stop)
		<-woken
	}
}
