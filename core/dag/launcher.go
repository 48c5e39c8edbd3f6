package dag

import "sync"

// Launcher is a DeferringLane's launcher: it queues the vertices lanes defer to it on
// goroutines of its own, each lane's one at a time in the order deferred, and calls
// Launched for each it queued. By default every lane has a goroutine of its own, so
// lanes do not wait for each other: the vertices of two lanes deferred at once are
// queued at once (two GPUs' prefetches from the host overlap, in whichever order the
// goroutines run). A shared launcher (NewSharedLauncher) queues every lane's on one
// goroutine, in the order deferred across lanes. Either way a lane's vertices stay in
// order: while one of a lane's vertices is deferred, being queued or being reported
// Launched, Defer defers the lane's later ones too (children that Launched starts on
// the lane included). L is the lanes' type; queue, given at the start, queues a
// vertex on its lane and reports false when it ended the vertex instead (failing to
// queue it).
type Launcher[L comparable] struct {
	queue  func(L, *Vertex) bool
	shared bool // one goroutine for every lane

	mu      sync.Mutex
	waiting map[L][]launch[L] // per goroutine (its lane, or the zero L when shared): deferred, in order
	running map[L]bool        // per goroutine: it runs
	pending map[L]int         // per lane: its vertices deferred and not yet through Launched
	done    sync.WaitGroup
}

// launch is a deferred vertex and its lane.
type launch[L comparable] struct {
	lane L
	v    *Vertex
}

// NewLauncher returns a launcher with a goroutine per lane that queues vertices with
// queue.
func NewLauncher[L comparable](queue func(L, *Vertex) bool) *Launcher[L] {
	return &Launcher[L]{queue: queue, waiting: make(map[L][]launch[L]), running: make(map[L]bool), pending: make(map[L]int)}
}

// NewSharedLauncher returns a launcher whose one goroutine queues every lane's
// vertices with queue.
func NewSharedLauncher[L comparable](queue func(L, *Vertex) bool) *Launcher[L] {
	x := NewLauncher(queue)
	x.shared = true
	return x
}

// Defer defers v, lane's vertex, and reports true, if blocks (queueing v would block
// its caller) or an earlier vertex of lane is still deferred (or being queued, or
// being reported Launched); false: the caller queues v itself, now, behind every
// earlier vertex of its lane (the launcher may meanwhile queue a vertex of the lane
// deferred after v, from another goroutine's start: one that does not depend on v,
// or it would not have started).
func (x *Launcher[L]) Defer(lane L, v *Vertex, blocks bool) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !blocks && x.pending[lane] == 0 {
		return false
	}
	x.pending[lane]++
	var g L // the goroutine: the lane's own, or the shared one
	if !x.shared {
		g = lane
	}
	x.waiting[g] = append(x.waiting[g], launch[L]{lane, v})
	if !x.running[g] {
		x.running[g] = true
		x.done.Add(1)
		go x.run(g)
	}
	return true
}

// run queues goroutine g's deferred vertices in order and returns when none is left.
func (x *Launcher[L]) run(g L) {
	defer x.done.Done()
	for {
		x.mu.Lock()
		q := x.waiting[g]
		if len(q) == 0 {
			delete(x.waiting, g)
			delete(x.running, g)
			x.mu.Unlock()
			return
		}
		d := q[0]
		q[0] = launch[L]{}
		x.waiting[g] = q[1:]
		x.mu.Unlock()
		if x.queue(d.lane, d.v) {
			d.v.Launched()
		}
		x.mu.Lock()
		if x.pending[d.lane]--; x.pending[d.lane] == 0 {
			delete(x.pending, d.lane)
		}
		x.mu.Unlock()
	}
}

// Wait returns once the launcher has nothing left to queue (call it once no vertex
// will be deferred any more: the graph has finished).
func (x *Launcher[L]) Wait() { x.done.Wait() }
