package execution

import (
	"os"
	"sync"

	"github.com/ucxx-go/ucxx-go/core/dag"
)

// launcher queues the GPU vertices whose queueing would block the thread adding
// vertices (a managed-memory prefetch: gpuLane.StartOrDefer) on a goroutine of the
// context's own, one vertex at a time, in the order the lanes deferred them, and
// tells the graph as each is queued (Vertex.Launched). One goroutine for every GPU of
// the context: the driver sees one prefetch from the host at a time, as it did when
// the adding thread queued them all (a goroutine per GPU prefetching at once hung the
// multi-GPU benchmark once on 2 x H100, cause unknown: RESULTS.md, session 17).
type launcher struct {
	mu      sync.Mutex
	queue   []deferredVertex
	running bool           // the goroutine runs
	done    sync.WaitGroup // the goroutine, for close
}

// deferredVertex is a vertex waiting for the launcher, and its lane.
type deferredVertex struct {
	lane *gpuLane
	v    *dag.Vertex
}

// deferPrefetches turns the launcher on (UCXGO_DAG_DEFER_PREFETCH=0 turns it off:
// the thread that starts a vertex queues it, prefetches and all, as before it).
var deferPrefetches = os.Getenv("UCXGO_DAG_DEFER_PREFETCH") != "0"

// take defers v to the launcher, and reports true, if it prefetches managed memory or
// an earlier vertex of its lane is still deferred; false: the caller queues v itself,
// now, behind every earlier vertex of its lane (the launcher may meanwhile queue a
// vertex of the lane deferred after v, from another goroutine's start: one that does
// not depend on v, or it would not have started).
func (L *launcher) take(l *gpuLane, v *dag.Vertex) bool {
	L.mu.Lock()
	defer L.mu.Unlock()
	if l.pending == 0 && (!deferPrefetches || !l.prefetches(v.Moves())) {
		return false
	}
	l.pending++
	L.queue = append(L.queue, deferredVertex{l, v})
	if !L.running {
		L.running = true
		L.done.Add(1)
		go L.run()
	}
	return true
}

// run queues the deferred vertices in order and returns when none is left.
func (L *launcher) run() {
	defer L.done.Done()
	for {
		L.mu.Lock()
		if len(L.queue) == 0 {
			L.running = false
			L.mu.Unlock()
			return
		}
		d := L.queue[0]
		L.queue[0] = deferredVertex{}
		L.queue = L.queue[1:]
		L.mu.Unlock()
		launched := d.lane.queue(d.v)
		L.mu.Lock()
		d.lane.pending--
		L.mu.Unlock()
		if launched {
			d.v.Launched()
		}
	}
}

// wait returns once the launcher has nothing left to queue (the graph has finished).
func (L *launcher) wait() { L.done.Wait() }
