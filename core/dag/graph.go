package dag

import (
	"context"
	"fmt"
	"os"
	"runtime/trace"
	"slices"
	"sync"
	"time"
)

// Task describes a computation to add to a Graph.
type Task struct {
	// Name labels the vertex in errors and DOT output.
	Name string
	// Kind decides the lane when Lane is nil, and whether the vertex is placed on a
	// GPU and a stream.
	Kind Kind
	// Accesses are the byte ranges the work touches and how. The graph copies them.
	Accesses []Access
	// Run is the work of a vertex on a HostLane; nil does nothing (a barrier).
	Run func() error
	// Payload is the work for other lanes (a kernel launch, a transfer descriptor),
	// read by the lane through Vertex.Payload.
	Payload any
	// Lane runs the vertex; nil: the graph's HostLane for KindHost, the device's
	// Options.GPULanes entry for KindGPU, Options.TransferLane for KindTransfer.
	Lane Lane
	// WritesInPlace says the work writes its Write ranges where their bytes lie, through
	// a mapping, without moving them (a copy engine writing managed memory that every
	// GPU maps): the location model leaves those ranges where it had them. Its reads,
	// and its ReadWrite ranges, are recorded as any vertex's.
	WritesInPlace bool
}

// ErrClosed is returned by Add after Close.
var ErrClosed = fmt.Errorf("dag: graph closed: %w", os.ErrClosed)

// Graph is a run-time dependency DAG: Add orders each new vertex after the active
// vertices it conflicts with and hands it to its lane when it may run; vertices leave
// the graph, and free what they held, as soon as they finish.
//
// A Graph is safe for concurrent use. Program order, which dependencies follow, is the
// order in which Add calls take the graph's lock: one goroutine adding gives its own
// order. Memory is proportional to the active (unfinished) vertices and the ranges
// they access, not to the history, unless Options.DOT asks to keep it.
type Graph struct {
	opts   Options
	policy DeviceSelectionPolicy // nil without GPUs

	mu      sync.Mutex // before any lane's lock
	closed  bool
	nextID  VertexID
	seq     uint64 // one per Add: marks parents found, to count each once
	deps    *depTracker
	streams *StreamManager   // nil without GPUs
	locs    *LocationTracker // nil without GPUs
	host    *HostLane        // made at the first KindHost task that names no lane
	active  activeList
	last    *Vertex       // the vertex added last, for the Sync policy
	idle    chan struct{} // closed when the last active vertex finishes, if made
	parents []*Vertex     // scratch of Add
	dot     *dotRecord    // with Options.DOT
	pollers []Poller      // the GPU and transfer lanes that are Pollers (host waits poll them)
	placing *Vertex       // the GPU vertex Add is placing, for pick
	pick    DevicePicker  // asks the policy about placing; made once
}

// New returns an empty graph configured by opts.
//
// Errors: a description of the first option that cannot work (too many GPUs, lanes
// or a bandwidth matrix not matching GPUs, a transfer-time policy without bandwidths).
func New(opts Options) (*Graph, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	g := &Graph{opts: opts, deps: newDepTracker(opts.Dependency)}
	if opts.GPUs > 0 {
		p, err := NewDeviceSelectionPolicy(opts.DeviceSelection, opts.Bandwidth, opts.DataThreshold)
		if err != nil {
			return nil, err
		}
		if !opts.RoundRobinFallback {
			p = withBlockFallback(p)
		}
		g.policy = p
		g.pick = func(among []int) int { return g.policy.SelectDevice(g.placing.accesses, among, g.streams, g.locs) }
		g.streams = NewStreamManager(opts.GPUs, opts.StreamPool, opts.NewStream, opts.ParentStream, opts.MaxStreamsPerDevice)
		g.locs = NewLocationTracker()
	}
	if opts.DOT {
		g.dot = &dotRecord{}
	}
	for _, l := range append(slices.Clone(opts.GPULanes), opts.TransferLane) {
		if p, ok := l.(Poller); ok {
			g.pollers = append(g.pollers, p)
		}
	}
	return g, nil
}

// outbox collects, under the graph's lock, what must be done once it is released:
// vertices to start and to release, and (while the lock is held) vertices to finish.
type outbox struct {
	start, release, finish []*Vertex
}

// Add adds a vertex for t, ordered after every active vertex whose accesses conflict
// with t's, and returns it. The vertex starts as soon as its parents allow, possibly
// before Add returns.
//
// A GPU vertex whose stream cannot be made is still added, and fails.
//
// Errors: ErrClosed after Close; a malformed access; a kind with no lane (a GPU task
// when Options.GPUs is 0, a transfer without a transfer lane).
func (g *Graph) Add(t Task) (*Vertex, error) {
	if t.Kind > KindTransfer {
		return nil, fmt.Errorf("dag: add %q: unknown kind %v", t.Name, t.Kind)
	}
	for _, a := range t.Accesses {
		if err := a.validate(); err != nil {
			return nil, err
		}
	}
	v := &Vertex{
		kind: t.Kind, name: t.Name, accesses: normalizeAccesses(t.Accesses),
		run: t.Run, payload: t.Payload, lane: t.Lane, g: g, device: Host, writesInPlace: t.WritesInPlace,
	}
	v.self[0] = v
	var ob outbox

	region := trace.StartRegion(context.Background(), "dag.lock")
	g.mu.Lock()
	region.End()
	region = trace.StartRegion(context.Background(), "dag.graph")
	if err := g.checkLane(v); err != nil {
		region.End()
		g.mu.Unlock()
		return nil, fmt.Errorf("dag: add %q: %w", t.Name, err)
	}
	g.nextID++
	v.id = g.nextID

	// Parents: the interval maps, each parent once.
	g.seq++
	for _, a := range v.accesses {
		g.deps.add(v, a)
	}
	parents := g.parents[:0]
	for _, d := range g.deps.deps {
		if d.parent.seen != g.seq {
			d.parent.seen = g.seq
			parents = append(parents, d.parent)
		}
	}
	var order *Vertex // the Sync policy's extra parent
	if g.opts.Execution == Sync && g.last != nil && !g.last.finished && g.last.seen != g.seq {
		order = g.last
	}
	g.last = v

	// Placement: device, copies, stream, locations.
	var failure error
	if v.kind == KindGPU {
		g.placing = v
		if _, err := g.streams.Place(v, parents, g.pick); err != nil {
			failure = err
		}
		g.placing = nil
		if v.lane == nil {
			v.lane = g.opts.GPULanes[v.device]
		}
		v.moves = g.locs.Missing(v.accesses, v.device, g.opts.Bandwidth)
	}
	if g.locs != nil && v.kind != KindTransfer {
		if v.writesInPlace {
			g.locs.RecordInPlace(v.accesses, v.device)
		} else {
			g.locs.Record(v.accesses, v.device)
		}
	}

	// Edges.
	cl, _ := v.lane.(ChainingLane)
	for _, p := range parents {
		g.link(p, v, cl != nil && cl.Chains(p, v), false)
	}
	if order != nil {
		g.link(order, v, false, true)
		parents = append(parents, order)
	}
	if len(parents) > 0 {
		v.parents = slices.Clone(parents)
	}
	if len(v.chained) > 0 {
		v.waits = streamWaits(v, v.chained)
	}
	if g.dot != nil {
		g.dot.add(v, g.deps.deps, order)
	}
	clear(parents)
	g.parents = parents[:0]
	clear(g.deps.deps)
	g.deps.deps = g.deps.deps[:0]

	g.active.push(v)
	if failure != nil {
		v.cause = &VertexError{Vertex: v.id, Kind: v.kind, Name: v.name, Root: v.id, Err: failure}
	}
	g.check(v, &ob)
	g.settle(&ob)
	g.mu.Unlock()
	region.End()
	region = trace.StartRegion(context.Background(), "dag.deliver")
	g.deliver(&ob)
	region.End()
	return v, nil
}

// checkLane gives v its lane when its kind has one lane, and checks that a GPU
// vertex will have one.
func (g *Graph) checkLane(v *Vertex) error {
	if g.closed {
		return ErrClosed
	}
	switch v.kind {
	case KindHost:
		if v.lane == nil {
			if g.host == nil {
				g.host = NewHostLane("host", g.opts.HostLanes)
			}
			v.lane = g.host
		}
	case KindGPU:
		if g.opts.GPUs == 0 {
			return fmt.Errorf("a GPU vertex in a graph of 0 GPUs")
		}
		if v.lane == nil && len(g.opts.GPULanes) == 0 {
			return errNoLane
		}
	case KindTransfer:
		if v.lane == nil {
			v.lane = g.opts.TransferLane
		}
		if v.lane == nil {
			return errNoLane
		}
	}
	return nil
}

// link makes p a parent of v. p is unfinished.
func (g *Graph) link(p, v *Vertex, chained, order bool) {
	p.children = append(p.children, edge{child: v, chained: chained, order: order})
	v.unfinished++
	if chained {
		v.chained = append(v.chained, p)
		p.holds++
		if !p.launched {
			v.waiting++
		}
	} else {
		v.waiting++
	}
}

// check starts v, or dooms it, if nothing it waits for is left.
func (g *Graph) check(v *Vertex, ob *outbox) {
	if v.State() != Pending || v.ended || v.waiting > 0 {
		return
	}
	if v.cause != nil {
		// An ancestor failed (or v could not be placed): v never starts, and fails
		// once its parents have finished, so that it never finishes before them.
		v.ended = true
		if v.unfinished == 0 {
			ob.finish = append(ob.finish, v)
		}
		return
	}
	v.state.Store(uint32(Running))
	v.started = true
	ob.start = append(ob.start, v)
}

// settle finishes the vertices queued in ob.finish, and those their finishing lets
// finish, iteratively (a failure can doom long chains).
func (g *Graph) settle(ob *outbox) {
	for n := len(ob.finish); n > 0; n = len(ob.finish) {
		v := ob.finish[n-1]
		ob.finish[n-1] = nil
		ob.finish = ob.finish[:n-1]
		g.finishOne(v, ob)
	}
}

// finish finishes v, which has ended and whose parents have all finished, and what
// that lets finish.
func (g *Graph) finish(v *Vertex, ob *outbox) {
	ob.finish = append(ob.finish, v)
	g.settle(ob)
}

// finishOne moves v to Done or Failed, takes it out of the graph's state, and updates
// its children: one fewer parent, maybe ready, maybe doomed.
func (g *Graph) finishOne(v *Vertex, ob *outbox) {
	v.finished = true
	var verr, root *VertexError
	switch {
	case v.cause != nil && v.cause.Vertex == v.id:
		verr, root = v.cause, v.cause
	case v.cause != nil:
		verr = &VertexError{Vertex: v.id, Kind: v.kind, Name: v.name, Root: v.cause.Root, Err: v.cause}
		root = v.cause
	case v.endErr != nil:
		verr = &VertexError{Vertex: v.id, Kind: v.kind, Name: v.name, Root: v.id, Err: v.endErr}
		root = verr
	}
	if verr != nil {
		v.err = verr
		v.state.Store(uint32(Failed))
	} else {
		v.state.Store(uint32(Done))
	}

	g.active.remove(v)
	if v.hasStream {
		g.streams.Release(v)
	}
	for _, a := range v.accesses {
		g.deps.finished(a.Array)
	}
	wasLaunched := v.launched
	if !wasLaunched {
		// Never started, or Start has not returned yet: the children chained after v
		// need not wait for a launch that will not matter any more.
		v.launched = true
		g.unhold(v, ob)
	}
	for _, e := range v.children {
		c := e.child
		c.unfinished--
		if !e.chained || !wasLaunched {
			c.waiting--
		}
		if root != nil && !e.order && c.cause == nil {
			c.cause = root
		}
		if c.ended {
			if c.unfinished == 0 {
				ob.finish = append(ob.finish, c)
			}
		} else {
			g.check(c, ob)
		}
	}
	clear(v.children)
	v.children, v.parents, v.run, v.payload = nil, nil, nil, nil
	if v.holds == 0 && v.started {
		ob.release = append(ob.release, v)
	}
	if v.done != nil {
		close(v.done)
	}
	if g.active.n == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
}

// unhold ends v's holds on the parents it chains after: v has been launched, or
// never will be.
func (g *Graph) unhold(v *Vertex, ob *outbox) {
	for _, p := range v.chained {
		p.holds--
		if p.holds == 0 && p.finished && p.started {
			ob.release = append(ob.release, p)
		}
	}
	clear(v.chained)
	v.chained = nil
}

// markLaunched records that v's work is queued (its Start has returned, or its
// DeferringLane said so): children chained after v may start now.
func (g *Graph) markLaunched(v *Vertex, ob *outbox) {
	if v.launched {
		return
	}
	v.launched = true
	g.unhold(v, ob)
	for _, e := range v.children {
		if e.chained {
			e.child.waiting--
			g.check(e.child, ob)
		}
	}
	g.settle(ob)
}

// deliver does, without the lock, what ob collected: releases, then starts (each
// start may make more ready).
func (g *Graph) deliver(ob *outbox) {
	for {
		for i, v := range ob.release {
			if r, ok := v.lane.(Releaser); ok {
				r.Release(v)
			}
			ob.release[i] = nil
		}
		ob.release = ob.release[:0]
		n := len(ob.start)
		if n == 0 {
			return
		}
		v := ob.start[n-1]
		ob.start[n-1] = nil
		ob.start = ob.start[:n-1]
		if g.opts.Timings {
			v.start = time.Now()
		}
		launched := true
		if dl, ok := v.lane.(DeferringLane); ok {
			launched = dl.StartOrDefer(v)
		} else {
			v.lane.Start(v)
		}
		if launched {
			g.mu.Lock()
			g.markLaunched(v, ob)
			g.mu.Unlock()
		}
	}
}

// Wait blocks until no vertex is active (every vertex added has finished), or ctx is
// done. Vertices added meanwhile are waited for too.
//
// Errors: ctx.Err() when ctx ends first.
func (g *Graph) Wait(ctx context.Context) error {
	g.mu.Lock()
	if g.active.n == 0 {
		g.mu.Unlock()
		return nil
	}
	if g.idle == nil {
		g.idle = make(chan struct{})
	}
	idle := g.idle
	g.mu.Unlock()
	return g.awaitClosed(ctx, idle)
}

// Close refuses further Adds, waits for the active vertices to finish, and stops the
// graph's own HostLane. Lanes passed in Options or Tasks are the caller's to close. A
// second Close returns an error wrapping os.ErrClosed.
func (g *Graph) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return fmt.Errorf("dag: close: %w", os.ErrClosed)
	}
	g.closed = true
	g.mu.Unlock()
	_ = g.Wait(context.Background())
	g.mu.Lock()
	host := g.host
	g.mu.Unlock()
	if host != nil {
		return host.Close()
	}
	return nil
}

// Stats is a snapshot of a graph's size.
type Stats struct {
	Added       uint64 // vertices added so far
	Active      int    // vertices added and not finished
	Arrays      int    // arrays with an interval map
	Segments    int    // segments of all interval maps
	Streams     int    // streams created, over all GPUs
	BusyStreams int    // streams holding unfinished vertices
}

// Stats returns the graph's current size. It walks the interval maps: O(arrays).
func (g *Graph) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := Stats{Added: uint64(g.nextID), Active: g.active.n, Arrays: len(g.deps.arrays), Segments: g.deps.segments()}
	if g.streams != nil {
		for d := range g.streams.Devices() {
			s.Streams += g.streams.Streams(d)
			s.BusyStreams += g.streams.BusyStreams(d)
		}
	}
	return s
}

// ActiveVertices returns the vertices added and not finished, newest first.
func (g *Graph) ActiveVertices() []*Vertex {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*Vertex, 0, g.active.n)
	for v := g.active.head; v != nil; v = v.nextActive {
		out = append(out, v)
	}
	return out
}

// Describe records where array's size bytes are (a GPU, or Host) and whether they
// migrate with the work on them (managed memory) or stay there (pinned: device or
// host memory), replacing what was known. Without GPUs it does nothing.
func (g *Graph) Describe(array ArrayID, size uint64, loc int, migrates bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.locs == nil {
		return
	}
	g.locs.Forget(array)
	g.locs.Place(array, 0, size, loc)
	g.locs.SetSize(array, size)
	if !migrates {
		g.locs.Pin(array)
	}
}

// Forget drops what the graph knows of where array is (its memory is going away).
func (g *Graph) Forget(array ArrayID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.locs != nil {
		g.locs.Forget(array)
	}
}

// activeList is the intrusive list of active vertices: O(1) insert and remove, no
// allocation.
type activeList struct {
	head *Vertex
	n    int
}

func (l *activeList) push(v *Vertex) {
	v.nextActive = l.head
	if l.head != nil {
		l.head.prevActive = v
	}
	l.head = v
	l.n++
}

func (l *activeList) remove(v *Vertex) {
	if v.prevActive != nil {
		v.prevActive.nextActive = v.nextActive
	} else {
		l.head = v.nextActive
	}
	if v.nextActive != nil {
		v.nextActive.prevActive = v.prevActive
	}
	v.prevActive, v.nextActive = nil, nil
	l.n--
}
