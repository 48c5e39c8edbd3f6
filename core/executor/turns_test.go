package executor

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/core/builtin"
	"github.com/ucxx-go/ucxx-go/core/reduce"
)

// TestTurnsHoldTheLockInTheOrderTaken: turns taken one after another hold the lock in
// that order, however their goroutines are scheduled (here, started last first);
// busy is true while one waits.
func TestTurnsHoldTheLockInTheOrderTaken(t *testing.T) {
	var ts turns
	var mu sync.Mutex
	if ts.busy() {
		t.Fatal("busy before any turn")
	}
	mu.Lock() // something holds the lock while the turns are taken
	const n = 8
	tns := make([]turn, n)
	for i := range tns {
		tns[i] = ts.take()
	}
	if !ts.busy() {
		t.Fatal("not busy with turns waiting")
	}
	var order []int
	var wg sync.WaitGroup
	for i := n - 1; i >= 0; i-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tns[i].lock(&mu)
			order = append(order, i) // under mu
			time.Sleep(time.Millisecond)
			mu.Unlock()
		}()
	}
	time.Sleep(10 * time.Millisecond) // the goroutines line up on their turns
	mu.Unlock()
	wg.Wait()
	for i, v := range order {
		if v != i {
			t.Fatalf("turns held the lock in the order %v", order)
		}
	}
	if ts.busy() {
		t.Fatal("busy after every turn held the lock")
	}
}

// TestStartNeverOvertakesAHandedOffCall: a call Start hands to a goroutine (here
// because a call still held the executor) runs before a call Start is given after
// it, though the executor is free again when the second comes: the ranks pair the
// calls in the order each made them (the two calls have the same shape, so an
// overtaking one would silently sum the wrong buffers).
func TestStartNeverOvertakesAHandedOffCall(t *testing.T) {
	p := loadFixture(t, "allreduce_2r_example.json")
	xs := newWorld(t, 2, Options{Timeout: 20 * time.Second})
	allreduceOn(t, xs, p, 64) // boards and the context set up
	type bufs struct{ in, out [2][]byte }
	var a, b bufs
	set := func(x *bufs, base float32) {
		for r := range 2 {
			x.in[r], x.out[r] = cbytes(64), cbytes(64)
			for i := range f32s(x.in[r]) {
				f32s(x.in[r])[i] = base * float32(r+1)
			}
		}
	}
	set(&a, 1)  // sums to 3
	set(&b, 10) // sums to 30
	call := func(x *bufs, r int) Call {
		return Call{Plan: p, Send: Buffer{addr(x.in[r]), 64}, Recv: Buffer{addr(x.out[r]), 64}, DType: reduce.Float32, Op: reduce.Sum}
	}
	xs[0].mu.Lock() // a call still running
	restA, err := xs[0].Start(call(&a, 0))
	if err != nil || restA == nil {
		t.Fatalf("Start while a call runs: %v, remainder %v", err, restA != nil)
	}
	xs[0].mu.Unlock()
	restB, err := xs[0].Start(call(&b, 0))
	if err != nil || restB == nil {
		t.Fatalf("Start after a handed-off call: %v, remainder %v (it must not run or announce before it)", err, restB != nil)
	}
	peer := make(chan error, 1)
	go func() {
		if err := xs[1].Execute(call(&a, 1)); err != nil {
			peer <- err
			return
		}
		peer <- xs[1].Execute(call(&b, 1))
	}()
	errs := make(chan error, 2)
	go func() { errs <- restB() }()
	time.Sleep(5 * time.Millisecond) // B's goroutine first in line for the lock
	go func() { errs <- restA() }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-peer; err != nil {
		t.Fatal(err)
	}
	for name, x := range map[string]*bufs{"first": &a, "second": &b} {
		want := float32(3)
		if x == &b {
			want = 30
		}
		for r := range 2 {
			if v := f32s(x.out[r])[0]; v != want {
				t.Fatalf("the %s call's sum on rank %d is %v, want %v", name, r, v, want)
			}
		}
	}
}

// TestCloseGoesBeforeWaitingTurns: Close does not wait for a call handed off and not
// started (here its remainder has not even been run); the call then fails with
// ErrClosed instead of waiting for a rank.
func TestCloseGoesBeforeWaitingTurns(t *testing.T) {
	p := loadFixture(t, "allreduce_2r_example.json")
	xs := newWorld(t, 2, Options{Timeout: 20 * time.Second})
	allreduceOn(t, xs, p, 64)
	in, out := cbytes(64), cbytes(64)
	xs[0].mu.Lock() // a call still running
	rest, err := xs[0].Start(Call{Plan: p, Send: Buffer{addr(in), 64}, Recv: Buffer{addr(out), 64}, DType: reduce.Float32, Op: reduce.Sum})
	xs[0].mu.Unlock()
	if err != nil || rest == nil {
		t.Fatalf("Start while a call runs: %v, remainder %v", err, rest != nil)
	}
	closed := make(chan error, 1)
	go func() { closed <- xs[0].Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		go rest() // its turn must pass for the cleanup's Close
		t.Fatal("Close waited for a call that had not started")
	}
	if err := rest(); !errors.Is(err, ErrClosed) {
		t.Fatalf("the handed-off call after Close: %v, want ErrClosed", err)
	}
}

// TestStartSynchronizeTakesItsPlaceWhenMade: a synchronize started before a call
// does not wait for that call, though its wait runs after the call was made (it took
// its place when started: the call, finding it there, is handed off behind it).
func TestStartSynchronizeTakesItsPlaceWhenMade(t *testing.T) {
	p := loadFixture(t, "allreduce_2r_example.json")
	xs := newWorld(t, 2, Options{Timeout: 20 * time.Second})
	allreduceOn(t, xs, p, 64)
	call := func() Call {
		return Call{Plan: p, Send: Buffer{addr(cbytes(64)), 64}, Recv: Buffer{addr(cbytes(64)), 64}, DType: reduce.Float32, Op: reduce.Sum}
	}
	wait := xs[0].StartSynchronize()
	rest, err := xs[0].Start(call()) // the peer is not there: it cannot end yet
	if err != nil || rest == nil {
		t.Fatalf("Start with the peer absent: %v, remainder %v", err, rest != nil)
	}
	synced := make(chan error, 1)
	go func() { synced <- wait() }()
	select {
	case err := <-synced:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		go func() { _ = xs[1].Execute(call()) }() // let the call end, for the cleanup
		go rest()
		t.Fatal("synchronize waited for a call made after it")
	}
	peer := make(chan error, 1)
	go func() { peer <- xs[1].Execute(call()) }()
	if err := rest(); err != nil {
		t.Fatal(err)
	}
	if err := <-peer; err != nil {
		t.Fatal(err)
	}
}

// TestTurnPassGivesUpOnlyAnUnusedTurn: Pass after Execute, or a second Pass, does
// nothing (so a caller defers it where it takes a turn over), and turns given up
// release the operations made after them: a call then runs at once.
func TestTurnPassGivesUpOnlyAnUnusedTurn(t *testing.T) {
	xs := newWorld(t, 2, Options{Timeout: 5 * time.Second})
	p := mustPlan(t, builtin.AllReduceDirect, 2, builtin.Options{})
	call := func() Call {
		in, out := cbytes(64), cbytes(64)
		return Call{Plan: p, Send: Buffer{addr(in), 64}, Recv: Buffer{addr(out), 64}, DType: reduce.Float32, Op: reduce.Sum}
	}
	used, unused := xs[0].TakeTurn(), xs[0].TakeTurn()
	done := make(chan error, 2)
	go func() { // rank 1 makes the same two calls plainly
		for range 2 {
			if err := xs[1].Execute(call()); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	go func() {
		if err := used.Execute(call()); err != nil {
			done <- err
			return
		}
		used.Pass() // used: nothing to give up
		unused.Pass()
		unused.Pass() // given up already
		done <- xs[0].Execute(call())
	}()
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a call after turns used and given up still waits")
		}
	}
}
