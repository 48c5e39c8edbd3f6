package executor

import (
	"errors"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/core/reduce"
)

// TestAPanicBreaksTheExecutorInsteadOfHoldingIt: a panic while a call holds the
// executor (a bug; pybridge recovers it into an error) must not leave the executor
// locked, which would hang every later operation: Start (on the caller's thread, or
// handed over and run in its turn) and Execute let it go, the panic goes on to the
// caller, and every later call fails at once with ErrBroken.
func TestAPanicBreaksTheExecutorInsteadOfHoldingIt(t *testing.T) {
	p := loadFixture(t, "allreduce_2r_example.json")
	for _, how := range []string{"start", "start handed over", "execute"} {
		t.Run(how, func(t *testing.T) {
			xs := newWorld(t, 2, Options{Timeout: 5 * time.Second})
			allreduceOn(t, xs, p, 64) // boards set up: Start may run the call inline
			in, out := cbytes(64), cbytes(64)
			c := Call{Plan: p, Send: Buffer{addr(in), 64}, Recv: Buffer{addr(out), 64}, DType: reduce.Float32, Op: reduce.Sum}
			if how == "start handed over" {
				xs[0].turns.take().lock(&xs[0].mu) // a turn ahead holds the executor: Start hands the call over
			}
			beginHook = func() { panic("a bug") }
			defer func() { beginHook = nil }()
			panicked := func(f func()) (r any) {
				defer func() { r = recover() }()
				f()
				return nil
			}
			var rest func() error
			var r any
			switch how {
			case "start":
				r = panicked(func() { rest, _ = xs[0].Start(c) })
			case "start handed over":
				var err error
				if rest, err = xs[0].Start(c); err != nil || rest == nil {
					t.Fatalf("Start behind a held executor: rest %t, %v", rest != nil, err)
				}
				xs[0].mu.Unlock()
				r = panicked(func() { rest() })
			case "execute":
				r = panicked(func() { xs[0].Execute(c) })
			}
			if r == nil || rest != nil && how == "start" {
				t.Fatalf("no panic reached the caller (%v), or a remainder came back", r)
			}
			beginHook = nil
			done := make(chan error, 1)
			go func() { done <- xs[0].Execute(c) }()
			select {
			case err := <-done:
				if !errors.Is(err, ErrBroken) {
					t.Fatalf("the call after a panic: %v, want ErrBroken", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the call after a panic still waits for the executor")
			}
		})
	}
}
