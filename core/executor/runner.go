package executor

import "sync"

// laneRunner runs this rank's part of a call once every rank has announced it and
// the plan context is ready: every lane's ops, in order, with the signals, waits,
// barriers and semaphores between lanes and ranks that the plan says. Two exist:
// hostLanes (a goroutine per lane: memmove, process_vm_readv/writev, C reductions,
// futex waits) and gpuLanes (a CUDA stream per lane: copies, reduction kernels,
// stream writes and waits on counters, then a drain). MSCCL++'s own design for
// device memory, one persistent kernel per rank running every lane as a thread block
// with device-side channels and a proxy FIFO to the progress thread, is a third
// runner: it takes the same laid-out plan, board and context, so neither the plan
// format nor the API change with it.
type laneRunner interface {
	// runLanes returns once every lane ended; a lane's failure is in r.err (r.fail
	// records the first and aborts the rest).
	runLanes(r *callRun)
}

// hostLanes runs host-memory lanes on goroutines, the first on the caller's.
type hostLanes struct{}

func (hostLanes) runLanes(r *callRun) {
	if len(r.c.Plan.Ranks[r.me].Lanes) == 1 {
		r.runLane(0) // no goroutine, no method value to allocate
		return
	}
	eachLane(r, r.runLane)
}

// gpuLanes queues each lane on its CUDA stream (from a goroutine per lane, the first
// on the caller's) and drains it.
type gpuLanes struct{}

func (gpuLanes) runLanes(r *callRun) { eachLane(r, r.runGPULane) }

// eachLane calls run for every lane of this rank, lane 0 on this goroutine and the
// others on goroutines of their own, and returns when all returned.
func eachLane(r *callRun, run func(lane int)) {
	wait := goLanes(r, run, 1)
	if len(r.c.Plan.Ranks[r.me].Lanes) > 0 {
		run(0)
	}
	wait()
}

// noLanes is goLanes's wait when there is nothing to wait for.
func noLanes() {}

// goLanes calls run for lanes from, from+1, ... of this rank, each on a goroutine
// of its own, and returns a wait for them all.
func goLanes(r *callRun, run func(lane int), from int) (wait func()) {
	var wg sync.WaitGroup
	for i := from; i < len(r.c.Plan.Ranks[r.me].Lanes); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(i)
		}()
	}
	return wg.Wait
}
