package dag

import "sync"

// simLauncher makes simulated GPU lanes DeferringLanes, as core/execution's GPU lanes
// are: a vertex its choice picks (or any while an earlier vertex of the same lane is
// deferred) is queued later by one launcher goroutine for every lane, in the order
// deferred, which then calls Launched; the others are queued in the caller's thread.
type simLauncher struct {
	mu      sync.Mutex
	queue   []*Vertex
	lanes   map[*Vertex]*simGPULane
	pending map[*simGPULane]int
	running bool
	done    sync.WaitGroup
	choose  func(v *Vertex) bool
	// launched counts the vertices the launcher queued.
	launched int
}

// deferringSimLane is a simulated GPU lane whose vertices may be deferred.
type deferringSimLane struct {
	*simGPULane
	launch *simLauncher
}

// deferringLanes wraps the simulated lanes of sim with one launcher; choose picks
// the vertices deferred.
func deferringLanes(sim *simGPUs, choose func(v *Vertex) bool) ([]Lane, *simLauncher) {
	L := &simLauncher{lanes: map[*Vertex]*simGPULane{}, pending: map[*simGPULane]int{}, choose: choose}
	out := make([]Lane, len(sim.lanes))
	for i, l := range sim.lanes {
		out[i] = deferringSimLane{l, L}
	}
	return out, L
}

func (l deferringSimLane) StartOrDefer(v *Vertex) bool {
	L := l.launch
	L.mu.Lock()
	if L.pending[l.simGPULane] == 0 && !L.choose(v) {
		L.mu.Unlock()
		l.Start(v)
		return true
	}
	L.pending[l.simGPULane]++
	L.lanes[v] = l.simGPULane
	L.queue = append(L.queue, v)
	if !L.running {
		L.running = true
		L.done.Add(1)
		go L.run()
	}
	L.mu.Unlock()
	return false
}

func (L *simLauncher) run() {
	defer L.done.Done()
	for {
		L.mu.Lock()
		if len(L.queue) == 0 {
			L.running = false
			L.mu.Unlock()
			return
		}
		v := L.queue[0]
		L.queue = L.queue[1:]
		l := L.lanes[v]
		delete(L.lanes, v)
		L.mu.Unlock()
		l.Start(v)
		L.mu.Lock()
		L.pending[l]--
		L.launched++
		L.mu.Unlock()
		v.Launched()
	}
}

// wait returns once nothing is left to launch.
func (L *simLauncher) wait() { L.done.Wait() }
