package executor

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/core/reduce"
)

// TestBarrierWaitsForTheLastRank: no rank leaves a barrier before the last one has
// entered it, round after round.
func TestBarrierWaitsForTheLastRank(t *testing.T) {
	xs := newWorld(t, 4, Options{Timeout: 20 * time.Second})
	for round := range 20 {
		var entered atomic.Int32
		errs := onAll(xs, func(r int, x *Executor) error {
			if r == round%len(xs) {
				time.Sleep(2 * time.Millisecond) // the late rank of this round
			}
			entered.Add(1)
			if err := x.Barrier(); err != nil {
				return err
			}
			if n := entered.Load(); n != int32(len(xs)) {
				t.Errorf("round %d: rank %d left with %d ranks in", round, r, n)
			}
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("round %d: rank %d: %v", round, r, err)
			}
		}
	}
}

// TestBarrierTimeoutKeepsTheExecutor: a rank that never comes fails the others'
// barrier with ErrTimeout naming it, and nothing else: when it comes late its barrier
// passes, the next barrier holds every rank again, and calls still run.
func TestBarrierTimeoutKeepsTheExecutor(t *testing.T) {
	p := loadFixture(t, "allreduce_2r_example.json")
	xs := newWorld(t, 2, Options{Timeout: 2 * time.Second})
	allreduceOn(t, xs, p, 4096) // sets up the boards
	var re *RankError
	if err := xs[0].Barrier(); !errors.Is(err, ErrTimeout) || !errors.As(err, &re) || re.Rank != 1 {
		t.Fatalf("barrier without rank 1: %v, want a timeout naming rank 1", err)
	}
	if err := xs[1].Barrier(); err != nil {
		t.Fatalf("the late rank's barrier: %v", err)
	}
	var left atomic.Bool
	errs := onAll(xs, func(r int, x *Executor) error {
		if r == 1 {
			time.Sleep(20 * time.Millisecond)
			if left.Load() {
				t.Error("rank 0 left the next barrier before rank 1 entered it")
			}
		}
		err := x.Barrier()
		if r == 0 {
			left.Store(true)
		}
		return err
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("next barrier, rank %d: %v", r, err)
		}
	}
	allreduceOn(t, xs, p, 4096)
}

// TestBarrierSetsTheBoardUp: a barrier as the executors' first use makes the boards.
func TestBarrierSetsTheBoardUp(t *testing.T) {
	xs := newWorld(t, 3, Options{Timeout: 20 * time.Second})
	for r, err := range onAll(xs, func(r int, x *Executor) error { return x.Barrier() }) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// TestStartBarrier: with every rank there within the patience the barrier ends in the
// call; a late rank leaves a remainder that ends once it comes.
func TestStartBarrier(t *testing.T) {
	xs := newWorld(t, 2, Options{Timeout: 20 * time.Second})
	onAll(xs, func(r int, x *Executor) error { return x.Barrier() }) // sets the boards up
	rest, err := xs[0].StartBarrier(time.Millisecond)
	if err != nil || rest == nil {
		t.Fatalf("rank 0 alone: rest %v, err %v; want a remainder", rest != nil, err)
	}
	done := make(chan error, 1)
	go func() { done <- rest() }()
	select {
	case err := <-done:
		t.Fatalf("the remainder ended (%v) before rank 1 came", err)
	case <-time.After(20 * time.Millisecond):
	}
	rest1, err := xs[1].StartBarrier(time.Second)
	if err != nil || rest1 != nil {
		t.Fatalf("rank 1, last to come: rest %v, err %v; want the barrier done in the call", rest1 != nil, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("rank 0's remainder: %v", err)
	}
}

// TestBarrierOnABrokenExecutor: a call that timed out breaks the executor for calls,
// not for barriers: its board still serves them.
func TestBarrierOnABrokenExecutor(t *testing.T) {
	p := loadFixture(t, "allreduce_2r_example.json")
	xs := newWorld(t, 2, Options{Timeout: 500 * time.Millisecond})
	allreduceOn(t, xs, p, 4096)
	b := cbytes(4096)
	if err := xs[0].Execute(Call{Plan: p, Send: Buffer{addr(b), 4096}, Recv: Buffer{addr(b), 4096}, DType: reduce.Float32}); !errors.Is(err, ErrTimeout) {
		t.Fatalf("a call rank 1 never makes: %v, want a timeout", err)
	}
	for r, err := range onAll(xs, func(r int, x *Executor) error { return x.Barrier() }) {
		if err != nil {
			t.Fatalf("rank %d's barrier after rank 0's executor broke: %v", r, err)
		}
	}
}

// failingWorld is a memWorld whose messages all fail: the boards cannot be set up.
type failingWorld struct{ memWorld }

func (w *failingWorld) Send(int, uint16, []byte) error { return errors.New("no network") }
func (w *failingWorld) Recv(int, uint16, []byte) (int, error) {
	return 0, errors.New("no network")
}

// TestBarrierWithoutABoard: ranks whose boards cannot be set up get ErrNoBoard from
// every barrier (the collective layer then meets by messages), at once, not a hang.
func TestBarrierWithoutABoard(t *testing.T) {
	x := New(&failingWorld{memWorld{rank: 0, size: 2}}, Options{Timeout: 20 * time.Second})
	defer x.Close()
	for i := range 2 {
		if err := x.Barrier(); !errors.Is(err, ErrNoBoard) {
			t.Fatalf("barrier %d: %v, want ErrNoBoard", i, err)
		}
	}
	if rest, err := x.StartBarrier(time.Millisecond); rest != nil {
		if err := rest(); !errors.Is(err, ErrNoBoard) {
			t.Fatalf("StartBarrier's remainder: %v, want ErrNoBoard", err)
		}
	} else if !errors.Is(err, ErrNoBoard) {
		t.Fatalf("StartBarrier: %v, want ErrNoBoard", err)
	}
}
