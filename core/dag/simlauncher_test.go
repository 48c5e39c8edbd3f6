package dag

import "sync/atomic"

// deferringSimLane is a simulated GPU lane that defers the vertices choose picks to a
// Launcher shared by every lane, as core/execution's GPU lanes defer vertices that
// prefetch: the launcher's goroutine for the lane queues them later, in order, and
// calls Launched.
type deferringSimLane struct {
	*simGPULane
	launch *Launcher[*simGPULane]
	choose func(v *Vertex) bool
}

func (l deferringSimLane) StartOrDefer(v *Vertex) bool {
	if l.launch.Defer(l.simGPULane, v, l.choose(v)) {
		return false
	}
	l.Start(v)
	return true
}

// deferringLanes wraps the simulated lanes of sim with one launcher (a goroutine per
// lane, or one shared by all); choose picks the vertices deferred; launched counts
// those the launcher queued.
func deferringLanes(sim *simGPUs, shared bool, choose func(v *Vertex) bool) (lanes []Lane, launch *Launcher[*simGPULane], launched *atomic.Int64) {
	launched = new(atomic.Int64)
	queue := func(l *simGPULane, v *Vertex) bool {
		l.Start(v)
		launched.Add(1)
		return true
	}
	launch = NewLauncher(queue)
	if shared {
		launch = NewSharedLauncher(queue)
	}
	for _, l := range sim.lanes {
		lanes = append(lanes, deferringSimLane{l, launch, choose})
	}
	return lanes, launch, launched
}
