package executor

import (
	"errors"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/core/builtin"
	"github.com/ucxx-go/ucxx-go/core/plan"
	"github.com/ucxx-go/ucxx-go/core/reduce"
)

func mustPlan(t *testing.T, make func(int, builtin.Options) ([]byte, *plan.Plan, error), n int, o builtin.Options) *plan.Plan {
	t.Helper()
	_, p, err := make(n, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWhichPlansRunUnannounced: the rule takes the plans whose ranks write peers'
// scratch only and hear back from each such peer every call, and no others.
func TestWhichPlansRunUnannounced(t *testing.T) {
	o := builtin.Options{InPlace: true}
	for _, c := range []struct {
		name string
		make func(int, builtin.Options) ([]byte, *plan.Plan, error)
		want bool
	}{
		{"allreduce.direct", builtin.AllReduceDirect, true},
		{"reducescatter.allpairs", builtin.ReduceScatterAllPairs, true},
		{"allreduce.allpairs (writes peers' outputs)", builtin.AllReduceAllPairs, false},
		{"allgather.allpairs (writes peers' outputs)", builtin.AllGatherAllPairs, false},
		{"reduce.direct (the root never answers)", builtin.ReduceDirect, false},
	} {
		for _, n := range []int{2, 3, 8} {
			if got := runsUnannounced(mustPlan(t, c.make, n, o)); got != c.want {
				t.Errorf("%s, %d ranks: %t, want %t", c.name, n, got, c.want)
			}
		}
	}
	for _, name := range []string{"single_node__allreduce_pkt.json", "single_node__allgather.json", "allreduce_2r_example.json"} {
		if runsUnannounced(loadFixture(t, name)) {
			t.Errorf("%s runs unannounced: it reads or writes peers' own buffers or uses packets", name)
		}
	}
}

func i32s(b []byte) []int32 { return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), len(b)/4) }

// directCalls runs calls allreduces of elems int32 on every rank, each call with
// new inputs (rank r, call k: r·1000 + k + i), checking every result; rank 0 lags
// now and then, so that the others run a call ahead of it.
func directCalls(t *testing.T, xs []*Executor, p *plan.Plan, elems, calls int) {
	t.Helper()
	n := len(xs)
	errs := onAll(xs, func(r int, x *Executor) error {
		buf := cbytes(4 * elems)
		for k := range calls {
			for i := range elems {
				i32s(buf)[i] = int32(r*1000 + k + i)
			}
			if r == 0 && k%7 == 3 {
				for range 50 {
					runtime.Gosched()
				}
			}
			if err := x.Execute(Call{Plan: p, Send: Buffer{addr(buf), uint64(4 * elems)}, Recv: Buffer{addr(buf), uint64(4 * elems)},
				DType: reduce.Int32, Op: reduce.Sum}); err != nil {
				return err
			}
			if !x.lastRanUnannounced() {
				t.Errorf("rank %d call %d: announced", r, k)
			}
			for i, v := range i32s(buf) {
				if want := int32(1000*n*(n-1)/2 + n*(k+i)); v != want {
					t.Errorf("rank %d call %d element %d: %d, want %d", r, k, i, v, want)
					return nil
				}
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// lastRanUnannounced reports whether this rank's latest call ran unannounced (its
// announcement says so).
func (x *Executor) lastRanUnannounced() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return *x.board.self.u64(slotOff(x.seq) + slotPlan) != 0
}

// TestUnannouncedCallsAreRight: back-to-back direct allreduces with new data each
// call, ranks drifting a call apart, give every rank the sum every call, with 2, 3
// and 5 ranks and sizes that grow the context.
func TestUnannouncedCallsAreRight(t *testing.T) {
	for _, n := range []int{2, 3, 5} {
		p := mustPlan(t, builtin.AllReduceDirect, n, builtin.Options{InPlace: true})
		xs := newWorld(t, n, Options{Timeout: 20 * time.Second})
		for _, elems := range []int{2, 1000, 3} {
			allreduceOn(t, xs, p, 4*elems) // the first call of a size is announced: it makes the context
			directCalls(t, xs, p, elems, 200)
		}
	}
}

// TestUnannouncedMismatchFailsEveryRankAndKeepsTheExecutor: after calls that ran
// unannounced, ranks calling with other sizes, another plan, or a call failing its
// own checks all fail with ErrMismatch, and the next matching calls are right.
func TestUnannouncedMismatchFailsEveryRankAndKeepsTheExecutor(t *testing.T) {
	const n = 3
	direct := mustPlan(t, builtin.AllReduceDirect, n, builtin.Options{InPlace: true})
	other := mustPlan(t, builtin.AllReduceAllPairs, n, builtin.Options{InPlace: true})
	xs := newWorld(t, n, Options{Timeout: 20 * time.Second})
	warm := func() {
		allreduceOn(t, xs, direct, 48)
		directCalls(t, xs, direct, 12, 20)
	}
	bufs := make([][]byte, n)
	for r := range bufs {
		bufs[r] = cbytes(64)
	}
	for _, c := range []struct {
		name string
		call func(r int) Call
	}{
		{"rank 1 with 32 bytes", func(r int) Call {
			size := uint64(48)
			if r == 1 {
				size = 32
			}
			return Call{Plan: direct, Send: Buffer{addr(bufs[r]), size}, Recv: Buffer{addr(bufs[r]), size}, DType: reduce.Int32}
		}},
		{"rank 2 with another plan", func(r int) Call {
			p := direct
			if r == 2 {
				p = other
			}
			return Call{Plan: p, Send: Buffer{addr(bufs[r]), 48}, Recv: Buffer{addr(bufs[r]), 48}, DType: reduce.Int32}
		}},
		{"rank 0 failing its own checks", func(r int) Call {
			c := Call{Plan: direct, Send: Buffer{addr(bufs[r]), 48}, Recv: Buffer{addr(bufs[r]), 48}, DType: reduce.Int32}
			if r == 0 {
				c.Recv = Buffer{addr(bufs[r][16:]), 48} // in-place plan, buffers that are not one
			}
			return c
		}},
	} {
		warm()
		errs := onAll(xs, func(r int, x *Executor) error { return x.Execute(c.call(r)) })
		for r, err := range errs {
			if !errors.Is(err, ErrMismatch) && !(r == 0 && errors.Is(err, plan.ErrBuffers)) {
				t.Fatalf("%s: rank %d: %v, want ErrMismatch", c.name, r, err)
			}
		}
	}
	warm()
}

// TestUnannouncedCallsOfChangingSizes: matching calls whose sizes change from call to
// call (every third one half as long) on one context stay right: the scratch halves
// have fixed places, whatever each call's layout (they moved with the size once, and
// a call overwrote scratch the peer's previous call still read).
func TestUnannouncedCallsOfChangingSizes(t *testing.T) {
	const n = 2
	p := mustPlan(t, builtin.AllReduceDirect, n, builtin.Options{InPlace: true})
	xs := newWorld(t, n, Options{Timeout: 20 * time.Second})
	big, small := 1<<16, 1<<15 // elements
	allreduceOn(t, xs, p, 4*big)
	errs := onAll(xs, func(r int, x *Executor) error {
		buf := cbytes(4 * big)
		for k := range 300 {
			elems := big
			if k%3 == 1 {
				elems = small
			}
			for i := range elems {
				i32s(buf)[i] = int32(r*1000 + k + i)
			}
			if err := x.Execute(Call{Plan: p, Send: Buffer{addr(buf), uint64(4 * elems)}, Recv: Buffer{addr(buf), uint64(4 * elems)},
				DType: reduce.Int32, Op: reduce.Sum}); err != nil {
				return err
			}
			if !x.lastRanUnannounced() {
				t.Errorf("rank %d call %d: announced", r, k)
			}
			for i, v := range i32s(buf)[:elems] {
				if want := int32(1000*n*(n-1)/2 + n*(k+i)); v != want {
					t.Errorf("rank %d call %d (%d elements) element %d: %d, want %d", r, k, elems, i, v, want)
					return nil
				}
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// TestStartOfAnUnannouncedCallNeverWaitsForALateRank: Start hands back the rest at
// once when a rank has not come, also for a plan whose lanes wait on semaphores and
// other lanes (MSCCL++'s alltoall ring), and the call is right once the rank comes.
func TestStartOfAnUnannouncedCallNeverWaitsForALateRank(t *testing.T) {
	p := loadFixture(t, "single_node__alltoall__alltoall_ring.json")
	if !runsUnannounced(p) {
		t.Fatal("the alltoall ring does not run unannounced")
	}
	const n, size = 4, 1024
	xs := newWorld(t, n, Options{Timeout: 20 * time.Second})
	bufs := make([][]byte, n)
	fillAll := func() {
		for r := range n {
			for i := range bufs[r] {
				bufs[r][i] = byte(r*n + i/(size/n))
			}
		}
	}
	call := func(r int) Call {
		return Call{Plan: p, Send: Buffer{addr(bufs[r]), size}, Recv: Buffer{addr(bufs[r]), size}, DType: reduce.Uint8}
	}
	check := func() {
		t.Helper()
		for r := range n {
			for i, v := range bufs[r] {
				if want := byte((i/(size/n))*n + r); v != want {
					t.Fatalf("rank %d byte %d: %d, want %d", r, i, v, want)
				}
			}
		}
	}
	for r := range bufs {
		bufs[r] = cbytes(size)
	}
	for range 2 { // the first call makes the context
		fillAll()
		for r, err := range onAll(xs, func(r int, x *Executor) error { return x.Execute(call(r)) }) {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
		check()
	}
	fillAll()
	rests := make([]func() error, n-1)
	for r := range n - 1 {
		t0 := time.Now()
		rest, err := xs[r].Start(call(r))
		if err != nil || rest == nil {
			t.Fatalf("rank %d's Start without rank %d: %v, rest %t", r, n-1, err, rest != nil)
		}
		if d := time.Since(t0); d > 5*time.Second {
			t.Fatalf("rank %d's Start took %v", r, d)
		}
		rests[r] = rest
	}
	done := make(chan error, n)
	for _, rest := range rests {
		go func() { done <- rest() }()
	}
	go func() { done <- xs[n-1].Execute(call(n - 1)) }()
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	check()
}
