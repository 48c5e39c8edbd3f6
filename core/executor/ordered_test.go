package executor

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/core/builtin"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// An ordered call is queued on its distinct streams; the per-thread default stream,
// which names whichever thread queues, leaves the call unordered.
func TestOrderedStreams(t *testing.T) {
	for _, c := range []struct {
		in, want []uintptr
	}{
		{nil, nil},
		{[]uintptr{0, 0}, nil},
		{[]uintptr{7, 7}, []uintptr{7}},
		{[]uintptr{7, 9}, []uintptr{7, 9}},
		{[]uintptr{ucxx.StreamLegacy, 0}, []uintptr{ucxx.StreamLegacy}},
		{[]uintptr{7, ucxx.StreamPerThread}, nil},
		{[]uintptr{ucxx.StreamPerThread, 7}, nil},
	} {
		got := OrderedStreams(&Call{Streams: c.in}, make([]uintptr, 0, 4))
		if !slices.Equal(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("streams %v: ordered on %v, want %v", c.in, got, c.want)
		}
	}
}

// A call handed to a goroutine keeps its streams but for device memory on the
// per-thread default stream (waited for on the caller's thread; here no device, so
// only the cases that need none).
func TestHandOffLeavesOtherCallsAlone(t *testing.T) {
	for _, c := range []Call{
		{Memory: MemoryHost, Streams: []uintptr{ucxx.StreamPerThread}},
		{Memory: MemoryCUDA, Streams: []uintptr{7, ucxx.StreamLegacy}},
		{Memory: MemoryCUDA},
	} {
		want := slices.Clone(c.Streams)
		if err := HandOff(&c); err != nil || !slices.Equal(c.Streams, want) {
			t.Errorf("%+v: HandOff changed the streams to %v (%v)", want, c.Streams, err)
		}
	}
}

// Counters are let through once a context: every word of every counter of this
// rank's gains 2^62 at the first release and nothing at a second (the device
// compares as signed differences: a third 2^62 would block the waits again).
func TestReleaseOwnCountersOnce(t *testing.T) {
	xs := newWorld(t, 2, Options{})
	_, pl, err := builtin.Generate("allreduce", "allpairs", 2, builtin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctxs := make([]*planContext, 2)
	for r, err := range onAll(xs, func(r int, x *Executor) error {
		x.mu.Lock()
		defer x.mu.Unlock()
		if err := x.setUp(); err != nil {
			return err
		}
		c, err := x.context(pl, 0, MemoryHost)
		ctxs[r] = c
		return err
	}) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	c := ctxs[0]
	if len(c.expected) == 0 {
		t.Fatal("the plan has no counters")
	}
	w := c.counter(0, 0, 0)
	w.store(5)
	releaseOwnCounters(c)
	releaseOwnCounters(c)
	for k := range c.expected {
		for b := range maxSlices {
			got := c.counter(0, uint64(k), 0).at(b).load()
			want := uint64(1 << 62)
			if k == 0 && b == 0 {
				want += 5
			}
			if got != want {
				t.Fatalf("counter %d word %d = %#x after two releases, want %#x", k, b, got, want)
			}
		}
	}
}

// Retiring a device context meets every rank on a board word of its own: the
// user's barriers keep their count (a rank that retires does not pass a later user
// barrier early, nor wait on a count nobody reaches).
func TestRetireBarrierKeepsUserBarriersCount(t *testing.T) {
	xs := newWorld(t, 2, Options{Timeout: 5 * time.Second})
	step := func(name string, f func(x *Executor) error) {
		t.Helper()
		for r, err := range onAll(xs, func(_ int, x *Executor) error {
			x.mu.Lock()
			defer x.mu.Unlock()
			return f(x)
		}) {
			if err != nil {
				t.Fatalf("%s, rank %d: %v", name, r, err)
			}
		}
	}
	step("set up", func(x *Executor) error { return x.setUp() })
	for i := range 3 {
		step("retire", func(x *Executor) error { return x.retireBarrier() })
		if xs[0].barriers != 0 || xs[0].retires != uint64(i+1) {
			t.Fatalf("after %d retires: barriers %d, retires %d", i+1, xs[0].barriers, xs[0].retires)
		}
	}
	for r, err := range onAll(xs, func(_ int, x *Executor) error { return x.Barrier() }) {
		if err != nil {
			t.Fatalf("user barrier, rank %d: %v", r, err)
		}
	}
	if xs[0].barriers != 1 || xs[1].barriers != 1 {
		t.Fatalf("user barriers counted %d and %d, want 1", xs[0].barriers, xs[1].barriers)
	}
	// A rank alone at a retire times out naming the absent rank.
	xs[0].mu.Lock()
	xs[0].opts.Timeout = 200 * time.Millisecond
	err := xs[0].retireBarrier()
	xs[0].mu.Unlock()
	var re *RankError
	if !errors.As(err, &re) || re.Rank != 1 || !errors.Is(err, ErrTimeout) {
		t.Fatalf("a retire without the peer: %v, want a timeout naming rank 1", err)
	}
}

// Synchronize without device calls returns at once; it reports a broken executor,
// and a closed one.
func TestSynchronizeWithoutDeviceCalls(t *testing.T) {
	xs := newWorld(t, 1, Options{})
	x := xs[0]
	if err := x.Synchronize(); err != nil {
		t.Fatalf("a fresh executor: %v", err)
	}
	x.mu.Lock()
	x.broken = errors.New("an earlier call failed part-way")
	x.mu.Unlock()
	if err := x.Synchronize(); !errors.Is(err, ErrBroken) {
		t.Fatalf("a broken executor: %v, want ErrBroken", err)
	}
	x.Close()
	if err := x.Synchronize(); !errors.Is(err, ErrClosed) {
		t.Fatalf("a closed executor: %v, want ErrClosed", err)
	}
}
