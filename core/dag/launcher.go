package dag

import "sync"

// Launcher is a DeferringLane's launcher: it queues the vertices lanes defer to it on
// one goroutine of its own, one at a time, in the order deferred, and calls Launched
// for each it queued. A lane's vertices stay in order: while one of a lane's vertices
// is deferred (or being queued), Defer defers the lane's later ones too. L is the
// lanes' type; queue, given at NewLauncher, queues a vertex on its lane and reports
// false when it ended the vertex instead (failing to queue it).
type Launcher[L comparable] struct {
	queue func(L, *Vertex) bool

	mu      sync.Mutex
	waiting []launch[L]
	pending map[L]int // per lane: its vertices deferred and not yet queued
	running bool      // the goroutine runs
	done    sync.WaitGroup
}

// launch is a deferred vertex and its lane.
type launch[L comparable] struct {
	lane L
	v    *Vertex
}

// NewLauncher returns a launcher whose goroutine queues vertices with queue.
func NewLauncher[L comparable](queue func(L, *Vertex) bool) *Launcher[L] {
	return &Launcher[L]{queue: queue, pending: make(map[L]int)}
}

// Defer defers v, lane's vertex, and reports true, if blocks (queueing v would block
// its caller) or an earlier vertex of lane is still deferred; false: the caller
// queues v itself, now, behind every earlier vertex of its lane (the launcher may
// meanwhile queue a vertex of the lane deferred after v, from another goroutine's
// start: one that does not depend on v, or it would not have started).
func (x *Launcher[L]) Defer(lane L, v *Vertex, blocks bool) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !blocks && x.pending[lane] == 0 {
		return false
	}
	x.pending[lane]++
	x.waiting = append(x.waiting, launch[L]{lane, v})
	if !x.running {
		x.running = true
		x.done.Add(1)
		go x.run()
	}
	return true
}

// run queues the deferred vertices in order and returns when none is left.
func (x *Launcher[L]) run() {
	defer x.done.Done()
	for {
		x.mu.Lock()
		if len(x.waiting) == 0 {
			x.running = false
			x.mu.Unlock()
			return
		}
		d := x.waiting[0]
		x.waiting[0] = launch[L]{}
		x.waiting = x.waiting[1:]
		x.mu.Unlock()
		queued := x.queue(d.lane, d.v)
		x.mu.Lock()
		x.pending[d.lane]--
		x.mu.Unlock()
		if queued {
			d.v.Launched()
		}
	}
}

// Wait returns once the launcher has nothing left to queue (call it once no vertex
// will be deferred any more: the graph has finished).
func (x *Launcher[L]) Wait() { x.done.Wait() }
