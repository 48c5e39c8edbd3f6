package dag

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
)

// Lane runs vertices. The graph calls Start once per vertex, without its lock held,
// when the vertex may begin: every parent has finished, except, for a ChainingLane,
// the parents it said it orders the vertex after itself (those have been started). The
// lane then reports the vertex's end with Vertex.End, exactly once, as soon as it
// learns it, from any goroutine: completion is active, never deferred until the host
// next synchronizes.
//
// Three lanes fit this:
//   - HostLane: workers run the vertex's function, then call End.
//   - a GPU stream lane (a ChainingLane): Start queues, on Vertex.Stream, a
//     cuStreamWaitEvent for each of Vertex.Waits (the parents' stop events, kept in
//     their LaneData), the copies of Vertex.Moves, the work, then records a stop event
//     and stores it with SetLaneData; a poller (cuEventQuery from the progress
//     thread) calls End when the event is done. The host never blocks on a parent.
//   - a transfer lane: Start queues the transfer to the engine's progress thread,
//     which posts it and calls End from its completion.
type Lane interface {
	// Name identifies the lane in DOT output: "host", "gpu0", "ucx".
	Name() string
	// Start begins v's work. It must not block: it hands v to a worker, a stream or a
	// thread. It may call v.End before returning (a failure to launch).
	Start(v *Vertex)
}

// ChainingLane is a Lane that can order a vertex after some of its parents without
// the host waiting for them to finish, as a CUDA stream can after GPU work (stream
// order, or cuStreamWaitEvent on the parent's stop event).
type ChainingLane interface {
	Lane
	// Chains reports whether the lane orders v after parent by itself once parent
	// has been started, so that v may be started before parent finishes. The graph
	// calls it under its lock, while adding v: it must be quick and must not call the
	// graph. The parents it chains appear in v.Waits when on another stream.
	Chains(parent, v *Vertex) bool
}

// DeferringLane is a ChainingLane that may hand a vertex to a launcher of its own
// rather than queue its work in the caller's thread: a GPU lane whose queueing can
// block (a managed-memory prefetch blocks its caller while the driver moves the host's
// pages) keeps that off the thread adding vertices, and off the other GPUs'.
type DeferringLane interface {
	ChainingLane
	// StartOrDefer begins v's work as Start does, and reports whether the work is
	// queued when it returns. If not, the lane calls v.Launched once it is (or v.End,
	// failing to launch it); until then the children chained after v wait. A
	// Launcher does the deferring for a lane that has one.
	StartOrDefer(v *Vertex) (launched bool)
}

// Releaser is a Lane that keeps something per vertex after the vertex ends, such as
// a GPU lane's stop event, which children started later still wait on. The graph calls
// Release, without its lock held, once v has finished and no child that chains after
// v remains to be started; the lane may then free it. Release is called only for
// vertices that were started.
type Releaser interface {
	Lane
	Release(v *Vertex)
}

// Poller is a Lane that can look for ended vertices on the caller's thread, as its
// own poller does: a host wait (Vertex.Wait, Graph.Wait) calls Poll while it spins,
// so the end it waits for is learned by the thread that wants it, without a hand-off
// between threads. Poll must be safe to call from any goroutine at any time, return
// at once when another caller is polling the lane, and call End like the lane's
// poller.
type Poller interface {
	Lane
	Poll()
}

// ErrLaneClosed is the error of a vertex started on a HostLane after Close.
var ErrLaneClosed = fmt.Errorf("dag: host lane closed: %w", os.ErrClosed)

// HostLane is a bounded pool of worker goroutines that run KindHost vertices (the
// Task's Run function). Ready vertices are taken last in, first out, as Dask's local
// scheduler does: a worker that has just finished a vertex usually takes its child
// next, which finishes chains and keeps the working set small. A function that
// panics fails its vertex with the panic's value.
type HostLane struct {
	name string

	mu     sync.Mutex // after Graph.mu
	cond   sync.Cond  // signalled when ready grows or the lane closes
	ready  []*Vertex  // LIFO
	closed bool

	workers sync.WaitGroup
}

// NewHostLane starts a lane of workers goroutines (GOMAXPROCS when workers <= 0).
// Close stops them.
func NewHostLane(name string, workers int) *HostLane {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	l := &HostLane{name: name}
	l.cond.L = &l.mu
	l.workers.Add(workers)
	for range workers {
		go l.work()
	}
	return l
}

// Name returns the name given to NewHostLane.
func (l *HostLane) Name() string { return l.name }

// Start queues v for a worker. After Close, v ends at once with ErrLaneClosed.
func (l *HostLane) Start(v *Vertex) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		v.End(ErrLaneClosed)
		return
	}
	l.ready = append(l.ready, v)
	l.mu.Unlock()
	l.cond.Signal()
}

// work is one worker: it runs ready vertices until the lane is closed and drained.
func (l *HostLane) work() {
	defer l.workers.Done()
	l.mu.Lock()
	for {
		for len(l.ready) == 0 && !l.closed {
			l.cond.Wait()
		}
		n := len(l.ready)
		if n == 0 {
			l.mu.Unlock()
			return
		}
		v := l.ready[n-1]
		l.ready[n-1] = nil
		l.ready = l.ready[:n-1]
		l.mu.Unlock()
		v.End(runHost(v))
		l.mu.Lock()
	}
}

// runHost runs v's function, turning a panic into an error.
func runHost(v *Vertex) (err error) {
	if v.run == nil {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("dag: vertex %d panicked: %v", v.id, r)
		}
	}()
	return v.run()
}

// Close runs the vertices already queued, stops the workers and waits for them. A
// second Close returns an error wrapping os.ErrClosed.
func (l *HostLane) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return fmt.Errorf("dag: close host lane %q: %w", l.name, os.ErrClosed)
	}
	l.closed = true
	l.mu.Unlock()
	l.cond.Broadcast()
	l.workers.Wait()
	return nil
}

// errNoLane is returned by Add for a task whose kind has no lane configured.
var errNoLane = errors.New("no lane for this kind: set Task.Lane or the Options lane")
