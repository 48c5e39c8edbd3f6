package executor

import (
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/core/builtin"
	"github.com/ucxx-go/ucxx-go/core/plan"
	"github.com/ucxx-go/ucxx-go/core/reduce"
)

// TestStartRunsHereOnlyWhenEveryRankIsThere: Start returns the remainder when a rank
// has not announced the call yet (it must not wait for it), and runs the call where
// it starts once every rank has announced it; both give the right sums. The same
// holds for a plan whose calls run unannounced.
func TestStartRunsHereOnlyWhenEveryRankIsThere(t *testing.T) {
	t.Run("announced", func(t *testing.T) {
		startRunsHereOnlyWhenEveryRankIsThere(t, loadFixture(t, "allreduce_2r_example.json"))
	})
	t.Run("unannounced", func(t *testing.T) {
		startRunsHereOnlyWhenEveryRankIsThere(t, mustPlan(t, builtin.AllReduceDirect, 2, builtin.Options{}))
	})
}

func startRunsHereOnlyWhenEveryRankIsThere(t *testing.T, p *plan.Plan) {
	xs := newWorld(t, 2, Options{Timeout: 20 * time.Second})
	allreduceOn(t, xs, p, 64) // boards and the context set up
	in := [2][]byte{cbytes(64), cbytes(64)}
	out := [2][]byte{cbytes(64), cbytes(64)}
	call := func(r int) Call {
		fill(in[r], r)
		return Call{Plan: p, Send: Buffer{addr(in[r]), 64}, Recv: Buffer{addr(out[r]), 64}, DType: reduce.Float32, Op: reduce.Sum}
	}
	check := func() {
		if xs[0].lastRanUnannounced() != runsUnannounced(p) {
			t.Fatalf("ran unannounced %t, the plan may: %t", xs[0].lastRanUnannounced(), runsUnannounced(p))
		}
		for r := range 2 {
			for i, v := range f32s(out[r]) {
				if want := float32(3 * (i%97 + 1)); v != want {
					t.Fatalf("rank %d element %d = %v, want %v", r, i, v, want)
				}
			}
		}
	}
	// rank 1 absent: the remainder comes back at once
	rest, err := xs[0].Start(call(0))
	if err != nil || rest == nil {
		t.Fatalf("Start without the other rank: %v, remainder %v", err, rest != nil)
	}
	done := make(chan error, 1)
	go func() { done <- xs[1].Execute(call(1)) }()
	if err := rest(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	check()
	// a call still running holds the executor: Start hands back the remainder at
	// once instead of waiting for it
	xs[0].mu.Lock()
	rest, err = xs[0].Start(call(0))
	xs[0].mu.Unlock()
	if err != nil || rest == nil {
		t.Fatalf("Start while a call runs: %v, remainder %v", err, rest != nil)
	}
	go func() { done <- xs[1].Execute(call(1)) }()
	if err := rest(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	check()
	// rank 1 there first: Start runs the call itself
	go func() { done <- xs[1].Execute(call(1)) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		xs[0].mu.Lock()
		ready := xs[0].announced(xs[0].seq + 1)
		xs[0].mu.Unlock()
		if ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("rank 1 never announced its call")
		}
		time.Sleep(100 * time.Microsecond)
	}
	rest, err = xs[0].Start(call(0))
	if err != nil || rest != nil {
		t.Fatalf("Start with every rank there: %v, remainder %v", err, rest != nil)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	check()
	// a patient Start waits for a rank that comes later and runs the call itself
	c0 := call(0)
	c0.Patience = time.Minute
	go func() { done <- xs[1].Execute(call(1)) }()
	rest, err = xs[0].Start(c0)
	if err != nil || rest != nil {
		t.Fatalf("Start with patience: %v, remainder %v", err, rest != nil)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	check()
}
