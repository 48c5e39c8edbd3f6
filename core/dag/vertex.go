package dag

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// VertexID numbers the vertices of a Graph in the order they were added, from 1.
type VertexID uint64

// Kind is what a vertex does, which decides the lane it runs on when its Task names
// none.
type Kind uint8

const (
	// KindHost: a Go function run by a host lane's workers.
	KindHost Kind = iota
	// KindGPU: work queued on a CUDA stream of a device the DeviceSelectionPolicy
	// picks.
	KindGPU
	// KindTransfer: a transfer to or from a peer, posted by the engine's progress
	// thread.
	KindTransfer
)

// String returns "host", "gpu" or "transfer".
func (k Kind) String() string {
	switch k {
	case KindHost:
		return "host"
	case KindGPU:
		return "gpu"
	case KindTransfer:
		return "transfer"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// State is where a vertex is in its life.
type State uint32

const (
	// Pending: waiting for parents.
	Pending State = iota
	// Running: handed to its lane (Lane.Start was or is being called).
	Running
	// Done: its lane reported success and every parent finished.
	Done
	// Failed: its work or an ancestor's failed; Err says which.
	Failed
)

// String returns "pending", "running", "done" or "failed".
func (s State) String() string {
	switch s {
	case Pending:
		return "pending"
	case Running:
		return "running"
	case Done:
		return "done"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("State(%d)", uint32(s))
}

// Host is the location of host memory in a LocationSet and a Vertex's Device.
const Host = -1

// Vertex is one computation in a Graph: what it accesses, whom it waits for, where it
// runs and how it ended. Graph.Add makes it; its lane runs it and calls End.
//
// The accessors that describe placement (Device, Stream, Waits, Moves, Accesses) are
// fixed when Add returns and may be read from any goroutine. State, Err and Done may be
// read at any time.
type Vertex struct {
	id       VertexID
	kind     Kind
	name     string
	accesses []Access
	run      func() error // KindHost work; cleared when the vertex finishes
	payload  any          // work for other lanes; cleared when the vertex finishes
	lane     Lane
	g        *Graph

	writesInPlace bool // Task.WritesInPlace

	device    int          // Host, or the GPU the vertex runs on
	stream    Stream       // valid when hasStream
	hasStream bool         // a GPU vertex placed on a stream
	waits     []StreamWait // chained parents on other streams
	moves     []Move       // ranges to bring to device before the work
	laneData  any          // the lane's, e.g. a stop event

	state atomic.Uint32 // State; err and stop are written before Done/Failed is stored
	err   error         // *VertexError once Failed
	start time.Time     // when handed to the lane (Options.Timings)
	stop  time.Time     // when the lane reported its end (Options.Timings)

	// Bookkeeping under Graph.mu.
	self         [1]*Vertex // self[:] is the one-member group of the interval maps
	parents      []*Vertex  // until the vertex finishes
	children     []edge     // until the vertex finishes
	chained      []*Vertex  // parents the lane waits for itself, until launched
	waiting      int32      // parents to finish (or, when chained, to launch) before Start
	unfinished   int32      // parents not finished: the vertex finishes after them
	holds        int32      // chained children not launched yet, which need our stop event
	seen         uint64     // Graph.seq of the last Add that found this vertex a parent
	launched     bool       // its work is queued: Start returned, or Launched was called (or it finished unstarted)
	started      bool       // Lane.Start was called
	ended        bool       // End was called, or the vertex was doomed and will not start
	endErr       error      // what End reported
	cause        *VertexError
	finished     bool
	streamReused bool // a child took this vertex's stream (the disjoint parent-stream policies)
	done         chan struct{}
	prevActive   *Vertex
	nextActive   *Vertex
}

// edge is a vertex's link to one child.
type edge struct {
	child *Vertex
	// chained: the child's lane waits for this vertex itself (a stream order or event
	// wait), so the child may start once this vertex has been started.
	chained bool
	// order: an ordering edge of the Sync execution policy, not a data dependency: a
	// failure does not travel along it.
	order bool
}

// ID returns the vertex's number in its graph.
func (v *Vertex) ID() VertexID { return v.id }

// Kind returns what the vertex does.
func (v *Vertex) Kind() Kind { return v.kind }

// Name returns the Task's name.
func (v *Vertex) Name() string { return v.name }

// Accesses returns the vertex's accesses, empty ones left out and reductions first
// (the order the dependencies were computed in). The slice must not be modified.
func (v *Vertex) Accesses() []Access { return v.accesses }

// Lane returns the lane that runs the vertex.
func (v *Vertex) Lane() Lane { return v.lane }

// Device returns the GPU a KindGPU vertex runs on, or Host.
func (v *Vertex) Device() int { return v.device }

// Stream returns the stream a KindGPU vertex is queued on; ok is false for other
// vertices.
func (v *Vertex) Stream() (s Stream, ok bool) { return v.stream, v.hasStream }

// Waits returns the parents the vertex's lane must wait for itself, on the device,
// before the vertex's work: each is a ChainingLane parent on another stream (one on
// the vertex's own stream is ordered by the stream). A GPU lane turns each into
// cuStreamWaitEvent on the parent's stop event. When the lane's Start runs, every one
// of them has been started; some may have finished.
func (v *Vertex) Waits() []StreamWait { return v.waits }

// Moves returns the byte ranges a KindGPU vertex needs that are not on its device,
// with the best place to copy each from, as the LocationTracker saw them when the
// vertex was added. The lane copies them before the work.
func (v *Vertex) Moves() []Move { return v.moves }

// Payload returns the Task's Payload until the vertex finishes.
func (v *Vertex) Payload() any { return v.payload }

// LaneData returns what the vertex's lane stored with SetLaneData.
func (v *Vertex) LaneData() any { return v.laneData }

// SetLaneData stores lane-private data with the vertex, e.g. a GPU lane's stop event,
// which children's lanes read through Waits. Only the vertex's lane calls it, in
// Start: what Start stores is visible to the lanes of children started after it.
func (v *Vertex) SetLaneData(x any) { v.laneData = x }

// State returns where the vertex is in its life.
func (v *Vertex) State() State { return State(v.state.Load()) }

// Err returns nil until the vertex has failed, then its *VertexError.
func (v *Vertex) Err() error {
	if v.State() != Failed {
		return nil
	}
	return v.err
}

// Times returns when the vertex was handed to its lane and when the lane reported its
// end, with Options.Timings on; zero times otherwise or before then.
func (v *Vertex) Times() (start, stop time.Time) {
	if s := v.State(); s != Done && s != Failed {
		return time.Time{}, time.Time{}
	}
	return v.start, v.stop
}

// Parents returns the vertices v was ordered after when it was added (each once), or
// nil once v has finished.
func (v *Vertex) Parents() []*Vertex {
	v.g.mu.Lock()
	defer v.g.mu.Unlock()
	return append([]*Vertex(nil), v.parents...)
}

// Done returns a channel closed when the vertex has finished (Done or Failed).
func (v *Vertex) Done() <-chan struct{} {
	v.g.mu.Lock()
	defer v.g.mu.Unlock()
	if v.finished {
		return closedChan
	}
	if v.done == nil {
		v.done = make(chan struct{})
	}
	return v.done
}

// Wait blocks until the vertex has finished and returns its Err, or ctx's error.
func (v *Vertex) Wait(ctx context.Context) error {
	if err := v.g.awaitClosed(ctx, v.Done()); err != nil {
		return err
	}
	return v.Err()
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// End reports that the vertex's work has ended, with its error or nil. Only the
// vertex's lane calls it, exactly once per Start, from any goroutine, as soon as it
// learns it (a worker after the function returns, an event poller, the progress
// thread): that is what frees the vertex's streams and starts its children. It may be
// called before Start returns, but then children may start on the caller's stack.
//
// End panics when the vertex is not running or has ended already.
func (v *Vertex) End(err error) {
	g := v.g
	var ob outbox
	g.mu.Lock()
	if v.State() != Running || v.ended {
		g.mu.Unlock()
		panic(fmt.Sprintf("dag: End of vertex %d, which is %v and ended=%v", v.id, v.State(), v.ended))
	}
	if g.opts.Timings {
		v.stop = time.Now()
	}
	v.ended = true
	v.endErr = err
	if v.unfinished == 0 {
		g.finish(v, &ob)
	}
	g.mu.Unlock()
	g.deliver(&ob)
}

// Launched tells the graph that the DeferringLane that deferred v has queued its
// work: the children chained after v may start. A lane calls it at most once per
// vertex it deferred; an End that came first (the work ended before the lane said so,
// or failed to launch) already let the chained children go, and Launched then does
// nothing.
func (v *Vertex) Launched() {
	g := v.g
	var ob outbox
	g.mu.Lock()
	g.markLaunched(v, &ob)
	g.mu.Unlock()
	g.deliver(&ob)
}

// VertexError is how a vertex failed: its own work returned Err (Root == Vertex), or
// an ancestor's failed first (Err is then the root's *VertexError, so errors.Is and
// errors.As reach the root's own error through Unwrap).
type VertexError struct {
	Vertex VertexID
	Kind   Kind
	Name   string
	Root   VertexID
	Err    error
}

// Error says which vertex failed and why.
func (e *VertexError) Error() string {
	name := ""
	if e.Name != "" {
		name = fmt.Sprintf(" %q", e.Name)
	}
	if root, ok := e.Err.(*VertexError); ok && e.Root != e.Vertex {
		return fmt.Sprintf("dag: vertex %d (%v%s) not completed: ancestor %s", e.Vertex, e.Kind, name, root.describe())
	}
	return fmt.Sprintf("dag: vertex %d (%v%s) failed: %v", e.Vertex, e.Kind, name, e.Err)
}

// describe is Error without the package prefix.
func (e *VertexError) describe() string {
	return strings.TrimPrefix(e.Error(), "dag: ")
}

// Unwrap returns the vertex's own error, or its root's *VertexError.
func (e *VertexError) Unwrap() error { return e.Err }
