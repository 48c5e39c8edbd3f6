package dag

import "sync"

// Launcher is a DeferringLane's launcher: it queues the vertices a lane defers to it
// on a goroutine of that lane's own, one at a time, in the order deferred, and calls
// Launched for each it queued. Lanes do not wait for each other: the vertices of two
// lanes deferred at once are queued at once (two GPUs' prefetches from the host
// overlap). A lane's vertices stay in order: while one of a lane's vertices is
// deferred (or being queued), Defer defers the lane's later ones too. L is the lanes'
// type; queue, given at NewLauncher, queues a vertex on its lane and reports false
// when it ended the vertex instead (failing to queue it).
type Launcher[L comparable] struct {
	queue func(L, *Vertex) bool

	mu      sync.Mutex
	waiting map[L][]*Vertex // per lane: its vertices deferred and not yet queued, in order
	busy    map[L]bool      // per lane: its goroutine runs (is queueing or will)
	done    sync.WaitGroup
}

// NewLauncher returns a launcher whose goroutines queue vertices with queue.
func NewLauncher[L comparable](queue func(L, *Vertex) bool) *Launcher[L] {
	return &Launcher[L]{queue: queue, waiting: make(map[L][]*Vertex), busy: make(map[L]bool)}
}

// Defer defers v, lane's vertex, and reports true, if blocks (queueing v would block
// its caller) or an earlier vertex of lane is still deferred or being queued; false:
// the caller queues v itself, now, behind every earlier vertex of its lane (the
// launcher may meanwhile queue a vertex of the lane deferred after v, from another
// goroutine's start: one that does not depend on v, or it would not have started).
func (x *Launcher[L]) Defer(lane L, v *Vertex, blocks bool) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !blocks && !x.busy[lane] {
		return false
	}
	x.waiting[lane] = append(x.waiting[lane], v)
	if !x.busy[lane] {
		x.busy[lane] = true
		x.done.Add(1)
		go x.run(lane)
	}
	return true
}

// run queues lane's deferred vertices in order and returns when none is left.
func (x *Launcher[L]) run(lane L) {
	defer x.done.Done()
	for {
		x.mu.Lock()
		q := x.waiting[lane]
		if len(q) == 0 {
			delete(x.waiting, lane)
			delete(x.busy, lane)
			x.mu.Unlock()
			return
		}
		v := q[0]
		q[0] = nil
		x.waiting[lane] = q[1:]
		x.mu.Unlock()
		if x.queue(lane, v) {
			v.Launched()
		}
	}
}

// Wait returns once the launcher has nothing left to queue (call it once no vertex
// will be deferred any more: the graph has finished).
func (x *Launcher[L]) Wait() { x.done.Wait() }
