package dag

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rendezvous fails the test unless n goroutines reach it together within 10 s: a
// proof that n vertices ran concurrently (the bound only turns a hang into a failure).
type rendezvous struct {
	mu    sync.Mutex
	n     int
	ready chan struct{}
}

func newRendezvous(n int) *rendezvous { return &rendezvous{n: n, ready: make(chan struct{})} }

func (r *rendezvous) arrive() error {
	r.mu.Lock()
	r.n--
	if r.n == 0 {
		close(r.ready)
	}
	r.mu.Unlock()
	select {
	case <-r.ready:
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("the others never came: not run concurrently")
	}
}

func TestIndependentVerticesRunConcurrently(t *testing.T) {
	g := newGraph(t, Options{HostLanes: 4})
	closeGraph(t, g)
	r := newRendezvous(4)
	var vs []*Vertex
	// Disjoint slices of one array, and reads of one range: no edges.
	for _, a := range []Access{acc(1, 0, 8, Write), acc(1, 8, 8, Write), acc(2, 0, 8, Read), acc(2, 0, 8, Read)} {
		v, err := g.Add(Task{Accesses: []Access{a}, Run: r.arrive})
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	for _, v := range vs {
		if err := v.Wait(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

func TestDependentVerticesRunInOrder(t *testing.T) {
	g := newGraph(t, Options{HostLanes: 4})
	closeGraph(t, g)
	var log []int
	var mu sync.Mutex
	step := func(i int) func() error {
		return func() error {
			mu.Lock()
			log = append(log, i)
			mu.Unlock()
			return nil
		}
	}
	for i := range 50 {
		// Each writes a range overlapping the previous one's: a chain.
		if _, err := g.Add(Task{Accesses: []Access{acc(1, uint64(i), 2, Write)}, Run: step(i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitIdle(t, g)
	if !slices.IsSorted(log) || len(log) != 50 {
		t.Errorf("ran in order %v", log)
	}
}

var errBoom = errors.New("boom")

func TestFailurePropagation(t *testing.T) {
	g := newGraph(t, Options{HostLanes: 4})
	closeGraph(t, g)
	gate, gateA := make(chan struct{}), make(chan struct{})
	var ran sync.Map
	run := func(name string, err error) func() error {
		return func() error {
			ran.Store(name, true)
			switch name {
			case "a":
				<-gateA // fail only once every vertex is added: a failure reaches
				// the descendants that exist when it happens
			case "d":
				<-gate
			}
			return err
		}
	}
	add := func(name string, err error, a ...Access) *Vertex {
		t.Helper()
		v, e := g.Add(Task{Name: name, Accesses: a, Run: run(name, err)})
		if e != nil {
			t.Fatal(e)
		}
		return v
	}
	// a fails; b reads what a wrote; c reads what b wrote: both fail.
	// d is unrelated (held by gate); e depends on d only; f on a and d.
	a := add("a", errBoom, acc(1, 0, 8, Write))
	b := add("b", nil, acc(1, 0, 8, Read), acc(2, 0, 8, Write))
	c := add("c", nil, acc(2, 0, 8, Read))
	d := add("d", nil, acc(3, 0, 8, Write))
	e := add("e", nil, acc(3, 0, 8, Read))
	f := add("f", nil, acc(1, 0, 4, Read), acc(3, 4, 4, Read))
	close(gateA)

	for _, v := range []*Vertex{a, b, c} {
		<-v.Done()
	}
	// f's parent a has failed, but f must not finish before its parent d.
	if s := f.State(); s != Pending {
		t.Errorf("f is %v while its parent d runs, want pending", s)
	}
	close(gate)
	waitIdle(t, g)

	for _, v := range []*Vertex{a, b, c, f} {
		err := v.Err()
		if v.State() != Failed || !errors.Is(err, errBoom) {
			t.Errorf("vertex %s: %v %v, want failed with boom", v.Name(), v.State(), err)
			continue
		}
		var ve *VertexError
		if !errors.As(err, &ve) || ve.Vertex != v.ID() || ve.Root != a.ID() || ve.Kind != KindHost || ve.Name != v.Name() {
			t.Errorf("vertex %s: %#v, want a VertexError of itself rooted at a", v.Name(), ve)
		}
		if v != a && !strings.Contains(err.Error(), `ancestor vertex 1 (host "a") failed: boom`) {
			t.Errorf("vertex %s: message %q does not name the root", v.Name(), err)
		}
	}
	for _, name := range []string{"b", "c", "f"} {
		if _, ok := ran.Load(name); ok {
			t.Errorf("%s ran after its ancestor failed", name)
		}
	}
	for _, v := range []*Vertex{d, e} {
		if v.State() != Done || v.Err() != nil {
			t.Errorf("unrelated vertex %s: %v %v", v.Name(), v.State(), v.Err())
		}
	}
	// The graph is usable: new work on a's range runs.
	h := add("h", nil, acc(1, 0, 8, ReadWrite), acc(2, 0, 8, Read))
	if err := h.Wait(context.Background()); err != nil || h.State() != Done {
		t.Errorf("vertex after the failure: %v %v", h.State(), err)
	}
	if s := g.Stats(); s.Active != 0 || s.Segments != 0 {
		t.Errorf("not cleaned up after the failure: %+v", s)
	}
}

func TestPanicFailsVertex(t *testing.T) {
	g := newGraph(t, Options{HostLanes: 1})
	closeGraph(t, g)
	gate := make(chan struct{})
	v, _ := g.Add(Task{Accesses: []Access{acc(1, 0, 1, Write)}, Run: func() error { <-gate; panic("oops") }})
	w, _ := g.Add(Task{Accesses: []Access{acc(1, 0, 1, Read)}})
	close(gate)
	if err := w.Wait(context.Background()); err == nil || !strings.Contains(err.Error(), "oops") {
		t.Errorf("child of a panicking vertex: %v", err)
	}
	if v.State() != Failed {
		t.Errorf("panicking vertex %v", v.State())
	}
}

func TestSyncPolicySerializes(t *testing.T) {
	g := newGraph(t, Options{Execution: Sync, HostLanes: 4})
	closeGraph(t, g)
	var running, maxRunning atomic.Int32
	var order []int
	var mu sync.Mutex
	var vs []*Vertex
	for i := range 40 {
		run := func() error {
			n := running.Add(1)
			if n > maxRunning.Load() {
				maxRunning.Store(n)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			running.Add(-1)
			if i == 5 {
				return errBoom
			}
			return nil
		}
		// Independent accesses: only the Sync policy orders them.
		v, err := g.Add(Task{Accesses: []Access{acc(ArrayID(i), 0, 8, Write)}, Run: run})
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	waitIdle(t, g)
	if maxRunning.Load() != 1 || !slices.IsSorted(order) || len(order) != 40 {
		t.Errorf("sync ran %d at once, in order %v", maxRunning.Load(), order)
	}
	// Ordering edges carry no failure: only vertex 5 failed.
	for i, v := range vs {
		if (v.State() == Failed) != (i == 5) {
			t.Errorf("vertex %d %v", i, v.State())
		}
	}
}

func TestCloseAndAddAfterClose(t *testing.T) {
	g := newGraph(t, Options{})
	v, _ := g.Add(Task{Accesses: []Access{acc(1, 0, 1, Write)}})
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if v.State() != Done {
		t.Errorf("Close returned before vertex finished: %v", v.State())
	}
	if _, err := g.Add(Task{}); !errors.Is(err, ErrClosed) || !errors.Is(err, os.ErrClosed) {
		t.Errorf("Add after Close: %v", err)
	}
	if err := g.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}

func TestAddErrors(t *testing.T) {
	g := newGraph(t, Options{})
	closeGraph(t, g)
	for _, task := range []Task{
		{Kind: KindGPU},
		{Kind: KindTransfer},
		{Kind: 9},
		{Accesses: []Access{{Array: 1, Off: 1 << 63, Len: 1 << 63, Mode: Read}}},
		{Accesses: []Access{{Array: 1, Len: 1, Mode: 0}}},
	} {
		if v, err := g.Add(task); err == nil {
			t.Errorf("Add(%+v) = %v, want an error", task, v.ID())
		}
	}
	if s := g.Stats(); s.Added != 0 {
		t.Errorf("failed Adds left vertices: %+v", s)
	}
}

func TestEndMisusePanics(t *testing.T) {
	lane := &manualLane{name: "m"}
	g := newGraph(t, Options{})
	v, _ := g.Add(Task{Lane: lane})
	lane.endAll()
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(r.(string), "dag: ") {
			t.Errorf("second End: recovered %v", r)
		}
	}()
	v.End(nil)
}

// TestChainingLane checks the contract a GPU stream lane relies on, with a manual
// chaining lane: a child chained after a parent starts once the parent was started,
// without waiting for it to finish, but finishes only after it; a host parent is
// waited for; Release comes once the parent finished and its chained children
// launched.
type releasingLane struct {
	chainingManual
	mu       sync.Mutex
	released []*Vertex
}

func (l *releasingLane) Release(v *Vertex) {
	l.mu.Lock()
	l.released = append(l.released, v)
	l.mu.Unlock()
}

func TestChainingLane(t *testing.T) {
	gpu := &releasingLane{chainingManual: chainingManual{&manualLane{name: "gpu0"}}}
	gpu.chain = func(p, v *Vertex) bool { return p.Lane() == gpu }
	host := &manualLane{name: "h"}
	g := newGraph(t, Options{GPUs: 1, GPULanes: []Lane{gpu}})

	g.Add(Task{Name: "h", Lane: host, Accesses: []Access{acc(1, 0, 8, Write)}})
	p, _ := g.Add(Task{Name: "p", Kind: KindGPU, Accesses: []Access{acc(1, 0, 8, Read), acc(2, 0, 8, Write)}})
	c, _ := g.Add(Task{Name: "c", Kind: KindGPU, Accesses: []Access{acc(2, 0, 8, Read), acc(3, 0, 8, Write)}})
	c2, _ := g.Add(Task{Name: "c2", Kind: KindGPU, Accesses: []Access{acc(2, 0, 8, Read), acc(4, 0, 8, Write)}})

	if s := gpu.take(); len(s) != 0 {
		t.Fatalf("GPU vertices %v started before their host parent ended", ids(s))
	}
	host.endAll() // h ends: p starts, and then c and c2, chained after p
	started := gpu.take()
	if got := ids(started); !slices.Equal(got, []VertexID{p.ID(), c2.ID(), c.ID()}) && !slices.Equal(got, []VertexID{p.ID(), c.ID(), c2.ID()}) {
		t.Fatalf("started %v, want p then its chained children", got)
	}
	ps, _ := p.Stream()
	cs, _ := c.Stream()
	c2s, _ := c2.Stream()
	// Same-as-parent: c inherits p's stream (no wait); c2, a sibling, gets another
	// stream and waits on p's stop event.
	if !cs.same(ps) || len(c.Waits()) != 0 {
		t.Errorf("c on %v with waits %v, p on %v", cs, c.Waits(), ps)
	}
	if c2s.same(ps) || len(c2.Waits()) != 1 || c2.Waits()[0].Parent != p || !c2.Waits()[0].Stream.same(ps) {
		t.Errorf("c2 on %v with waits %+v", c2s, c2.Waits())
	}
	// The children end before the parent is seen to: they stay running.
	c.End(nil)
	c2.End(errBoom)
	if c.State() != Running || c2.State() != Running {
		t.Errorf("children finished before their parent: %v %v", c.State(), c2.State())
	}
	p.End(nil)
	if c.State() != Done || c2.State() != Failed || p.State() != Done {
		t.Errorf("after p: p %v, c %v, c2 %v", p.State(), c.State(), c2.State())
	}
	gpu.mu.Lock()
	rel := ids(gpu.released)
	gpu.mu.Unlock()
	slices.Sort(rel)
	if !slices.Equal(rel, []VertexID{p.ID(), c.ID(), c2.ID()}) {
		t.Errorf("released %v, want p, c, c2", rel)
	}
	if s := g.Stats(); s.Active != 0 || s.BusyStreams != 0 || s.Streams != 2 {
		t.Errorf("%+v", s)
	}
}

// A chained child running when its parent fails fails too, naming the parent.
func TestChainedChildOfFailedParent(t *testing.T) {
	gpu := chainingManual{&manualLane{name: "gpu0"}}
	gpu.chain = func(p, v *Vertex) bool { return true }
	g := newGraph(t, Options{GPUs: 1, GPULanes: []Lane{gpu}})
	p, _ := g.Add(Task{Kind: KindGPU, Accesses: []Access{acc(1, 0, 8, Write)}})
	c, _ := g.Add(Task{Kind: KindGPU, Accesses: []Access{acc(1, 0, 8, Read)}})
	d, _ := g.Add(Task{Kind: KindGPU, Accesses: []Access{acc(1, 0, 8, Write)}})
	if got := ids(gpu.take()); len(got) != 3 {
		t.Fatalf("started %v, want all three (chained)", got)
	}
	p.End(errBoom)
	c.End(nil)
	d.End(nil)
	for _, v := range []*Vertex{c, d} {
		var ve *VertexError
		if !errors.As(v.Err(), &ve) || ve.Root != p.ID() || !errors.Is(v.Err(), errBoom) {
			t.Errorf("vertex %d: %v", v.ID(), v.Err())
		}
	}
}

func TestTimings(t *testing.T) {
	g := newGraph(t, Options{Timings: true, HostLanes: 1})
	closeGraph(t, g)
	v, _ := g.Add(Task{})
	if err := v.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	start, stop := v.Times()
	if start.IsZero() || stop.Before(start) {
		t.Errorf("times %v %v", start, stop)
	}
}

// TestMemoryPerActiveVertexBounded: a long stream of short-lived vertices leaves no
// trace; finished vertices let go of their parents and children.
func TestMemoryFreedAsVerticesFinish(t *testing.T) {
	g := newGraph(t, Options{HostLanes: 2})
	closeGraph(t, g)
	var first *Vertex
	for i := range 5000 {
		v, err := g.Add(Task{Accesses: []Access{acc(ArrayID(i%7), uint64(i%13)*8, 16, Mode(1+i%4))}})
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = v
		}
	}
	waitIdle(t, g)
	if s := g.Stats(); s.Active != 0 || s.Arrays != 0 || s.Segments != 0 {
		t.Errorf("after all finished: %+v", s)
	}
	if p := first.Parents(); p != nil || first.children != nil || first.nextActive != nil {
		t.Errorf("a finished vertex still holds other vertices")
	}
	if vs := g.ActiveVertices(); len(vs) != 0 {
		t.Errorf("active %v", ids(vs))
	}
}

// deferringManual is a chaining manual lane that defers the vertices defer says to:
// their children chained after them wait for Launched.
type deferringManual struct {
	chainingManual
	deferIt func(v *Vertex) bool
}

func (l deferringManual) StartOrDefer(v *Vertex) bool {
	l.Start(v)
	return !l.deferIt(v)
}

// TestDeferredLaunchHoldsChainedChildren: a child chained after a vertex its lane
// deferred starts only once the lane says the vertex launched; a deferred vertex that
// fails to launch (End without Launched) lets its children fail instead of hang.
func TestDeferredLaunchHoldsChainedChildren(t *testing.T) {
	gpu := deferringManual{chainingManual: chainingManual{&manualLane{name: "gpu0"}}}
	gpu.chain = func(p, v *Vertex) bool { return true }
	gpu.deferIt = func(v *Vertex) bool { return v.Name() == "p" || v.Name() == "q" }
	g := newGraph(t, Options{GPUs: 1, GPULanes: []Lane{gpu}})
	p, _ := g.Add(Task{Name: "p", Kind: KindGPU, Accesses: []Access{acc(1, 0, 8, Write)}})
	c, _ := g.Add(Task{Name: "c", Kind: KindGPU, Accesses: []Access{acc(1, 0, 8, Read), acc(2, 0, 8, Write)}})
	if got := ids(gpu.take()); !slices.Equal(got, []VertexID{p.ID()}) {
		t.Fatalf("started %v before p launched, want only p", got)
	}
	p.Launched()
	if got := ids(gpu.take()); !slices.Equal(got, []VertexID{c.ID()}) {
		t.Fatalf("started %v after p launched, want c", got)
	}
	p.Launched() // a second call changes nothing
	c.End(nil)
	p.End(nil)
	if p.State() != Done || c.State() != Done {
		t.Fatalf("p %v, c %v", p.State(), c.State())
	}

	q, _ := g.Add(Task{Name: "q", Kind: KindGPU, Accesses: []Access{acc(3, 0, 8, Write)}})
	d, _ := g.Add(Task{Name: "d", Kind: KindGPU, Accesses: []Access{acc(3, 0, 8, Read)}})
	if got := ids(gpu.take()); !slices.Equal(got, []VertexID{q.ID()}) {
		t.Fatalf("started %v, want only q", got)
	}
	q.End(errBoom) // failed to launch: never Launched
	if d.State() != Failed || !errors.Is(d.Err(), errBoom) {
		t.Errorf("d after q failed to launch: %v %v", d.State(), d.Err())
	}
	q.Launched() // after its End: nothing
	if s := g.Stats(); s.Active != 0 {
		t.Errorf("%+v", s)
	}
}
