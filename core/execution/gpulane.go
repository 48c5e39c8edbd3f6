package execution

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/trace"
	"slices"
	"sync"
	"time"

	"github.com/ucxx-go/ucxx-go/core/dag"
	"github.com/ucxx-go/ucxx-go/core/internal/pause"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// GPUWork is the payload of a GPU vertex: what it queues on the stream the DAG chose,
// of the context's GPU number device.
type GPUWork interface {
	queue(drv *ucxx.CUDADriver, device int, stream uintptr) error
}

// KernelLaunch launches a kernel: Args holds one 8-byte slot per parameter.
type KernelLaunch struct {
	Kernel *Kernel
	Shape  ucxx.LaunchShape
	Args   []uint64
}

func (k *KernelLaunch) queue(_ *ucxx.CUDADriver, device int, stream uintptr) error {
	return k.Kernel.fns[device].Launch(k.Shape, stream, k.Args)
}

// DeviceCopy copies N bytes from Src to Dst, host or device memory of any device.
// ManagedDst says Dst is managed memory not mapped on every GPU: the lane prefetches
// it to the copy's device first (copyPrefetchesDst).
type DeviceCopy struct {
	Dst, Src   uintptr
	N          uint64
	ManagedDst bool
}

func (c *DeviceCopy) queue(drv *ucxx.CUDADriver, _ int, stream uintptr) error {
	if c.N == 0 {
		return nil
	}
	return drv.CopyAsync(c.Dst, c.Src, c.N, stream)
}

// deviceWait is the lane data of a vertex that a GPU vertex may wait for on the
// device: a GPU vertex's stop event, a transfer's done word.
type deviceWait interface {
	queueWait(drv *ucxx.CUDADriver, stream uintptr) error
}

// gpuState is a started GPU vertex's events: stop marks the end of its work on its
// stream; start (with timings) its beginning.
type gpuState struct {
	lane        *gpuLane
	stream      uintptr // the stream its work was queued on
	start, stop ucxx.CUDAEvent
	gpuTime     time.Duration // with timings: start to stop, read when the poller saw stop done
}

func (s *gpuState) queueWait(drv *ucxx.CUDADriver, stream uintptr) error {
	return drv.StreamWaitEvent(stream, s.stop)
}

// sweepState is a sweep's room, kept between sweeps; guarded by gpuLane.sweepMu.
type sweepState struct {
	batch, kept, spare, ended []*dag.Vertex
	errs                      []error
	busy                      []uintptr // streams whose oldest vertex in this sweep is not done
}

// gpuLane runs the GPU vertices of one device on CUDA streams it creates (it is the
// DAG's StreamPool for its device), and learns their ends by polling their stop
// events from a goroutine of its own and from host waits (Poll).
type gpuLane struct {
	name    string
	ordinal int
	drv     *ucxx.CUDADriver
	cu      ucxx.CUDAContext // the device's primary context, retained
	res     *resources
	arrays  *arrayTable // the context's, for the managed ranges of Moves

	mu       sync.Mutex // after dag.Graph's
	streams  []ucxx.CUDAStream
	events   []ucxx.CUDAEvent // free, made with timing when timings are on
	timing   bool
	inflight []*dag.Vertex
	wake     chan struct{}
	closed   bool
	done     chan struct{} // the poller has returned

	launch *dag.Launcher[*gpuLane] // the context's, for vertices whose queueing blocks (StartOrDefer)

	sweepMu  sync.Mutex // one sweep at a time, the poller's or a host wait's (Poll); before dag.Graph's
	sweeping sweepState

	stagedMu  sync.Mutex      // serializes copyStaged
	staged    ucxx.CUDAStream // copyStaged's stream, made on first use
	hasStaged bool
}

func newGPULane(drv *ucxx.CUDADriver, ordinal int, timing bool, res *resources, arrays *arrayTable, launch *dag.Launcher[*gpuLane]) (*gpuLane, error) {
	cu, err := drv.RetainPrimary(ordinal)
	if err != nil {
		return nil, err
	}
	l := &gpuLane{name: fmt.Sprintf("gpu%d", ordinal), ordinal: ordinal, drv: drv, cu: cu, res: res, arrays: arrays, timing: timing,
		launch: launch, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go l.poll()
	return l, nil
}

func (l *gpuLane) Name() string { return l.name }

// NewStream makes a stream of the lane's device (dag.StreamPool; the DAG calls it for
// this lane's device only).
func (l *gpuLane) NewStream(int) (uintptr, error) {
	var s ucxx.CUDAStream
	err := l.cu.Use(func() (err error) { s, err = l.drv.NewStream(); return err })
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	l.streams = append(l.streams, s)
	l.mu.Unlock()
	l.res.streams.Add(1)
	return s.Handle(), nil
}

// copyStaged copies n bytes between pageable host memory and the lane's device on the
// calling thread (a host worker's), on a stream of its own with nothing else queued,
// and waits for the copy. cuMemcpyAsync with pageable memory stages it through the
// driver and blocks its caller until the stream reaches the copy, holding a lock of
// the driver's: queued on a DAG stream behind a wait for a transfer's done word, it
// held up the progress thread's own CUDA calls (UCX's copies) and so the transfer
// that word waited for (H200, CUDA 13). Such copies therefore run as host vertices,
// once their parents have ended.
func (l *gpuLane) copyStaged(dst, src uintptr, n uint64) error {
	if n == 0 {
		return nil
	}
	l.stagedMu.Lock()
	defer l.stagedMu.Unlock()
	return l.cu.Use(func() error {
		if !l.hasStaged {
			s, err := l.drv.NewStream()
			if err != nil {
				return err
			}
			l.staged, l.hasStaged = s, true
			l.res.streams.Add(1)
		}
		if err := l.drv.CopyAsync(dst, src, n, l.staged.Handle()); err != nil {
			return err
		}
		return l.staged.Sync()
	})
}

// Chains: a GPU vertex follows GPU parents (stream order or their stop events) and
// transfers (their done words) on the device, without the host waiting.
func (l *gpuLane) Chains(parent, v *dag.Vertex) bool {
	return parent.Kind() == dag.KindGPU || parent.Kind() == dag.KindTransfer
}

// event takes a free event, or makes one. In l.cu.
func (l *gpuLane) event() (ucxx.CUDAEvent, error) {
	l.mu.Lock()
	if n := len(l.events); n > 0 {
		ev := l.events[n-1]
		l.events = l.events[:n-1]
		l.mu.Unlock()
		return ev, nil
	}
	l.mu.Unlock()
	ev, err := l.drv.NewEvent(l.timing)
	if err == nil {
		l.res.events.Add(1)
	}
	return ev, err
}

// Start queues v on its stream in the caller's thread (dag.Lane; the graph calls
// StartOrDefer).
func (l *gpuLane) Start(v *dag.Vertex) { l.queue(v) }

// StartOrDefer queues v in the caller's thread, as Start does, unless that would block
// it: a vertex that prefetches managed memory (cuMemPrefetchAsync from the host moves
// the host's pages before it returns: on 2 x H100 the thread adding vertices spent
// 25-40 ms of a 35-85 ms repetition there, one GPU's uploads after the other's) goes
// to the context's launcher, and so does every later vertex of this lane while one
// of its vertices is there, so that the lane queues its vertices in the order the
// graph started them (dag.DeferringLane).
func (l *gpuLane) StartOrDefer(v *dag.Vertex) bool {
	if l.launch.Defer(l, v, deferPrefetches && (l.prefetches(v.Moves()) || prefetchesDst(v))) {
		return false
	}
	return l.queue(v) // false: it ended v, failing to queue it
}

// prefetchesDst reports whether v is a copy that prefetches its destination
// (copyPrefetchesDst).
func prefetchesDst(v *dag.Vertex) bool {
	c, ok := v.Payload().(*DeviceCopy)
	return ok && c.ManagedDst && c.N > 0 && copyPrefetchesDst
}

// queue queues v on its stream: the waits for its chained parents on other streams,
// its work, its stop event; the poller ends it. It reports false when it ended v
// instead, failing to queue it.
func (l *gpuLane) queue(v *dag.Vertex) bool {
	st, _ := v.Stream()
	work, ok := v.Payload().(GPUWork)
	if !ok {
		v.End(fmt.Errorf("execution: GPU vertex %q has no GPU work (%T)", v.Name(), v.Payload()))
		return false
	}
	// v.Moves is the DAG's location model (GrCUDA's): it steers the device policies,
	// and its managed ranges are prefetched here (arrays.go).
	state := &gpuState{lane: l, stream: st.Handle}
	err := l.cu.Use(func() error {
		region := trace.StartRegion(context.Background(), "gpu.waits")
		defer func() { region.End() }()
		for _, w := range v.Waits() {
			dw, ok := w.Parent.LaneData().(deviceWait)
			if !ok {
				return fmt.Errorf("execution: vertex %q waits for %q, which left nothing to wait on", v.Name(), w.Parent.Name())
			}
			if err := dw.queueWait(l.drv, st.Handle); err != nil {
				return err
			}
		}
		region.End()
		region = trace.StartRegion(context.Background(), "gpu.prefetch")
		if err := l.prefetchMoves(v.Moves(), st.Handle); err != nil {
			return err
		}
		if prefetchesDst(v) {
			c := work.(*DeviceCopy)
			// Best effort: where the driver cannot prefetch (no concurrent managed
			// access), the copy still runs, as before the prefetch was added.
			_ = l.drv.PrefetchAsync(c.Dst, c.N, l.ordinal, st.Handle)
		}
		var err error
		if l.timing {
			if state.start, err = l.event(); err != nil {
				return err
			}
			if err := state.start.Record(st.Handle); err != nil {
				return err
			}
		}
		region.End()
		region = trace.StartRegion(context.Background(), "gpu.work")
		if err := work.queue(l.drv, st.Device, st.Handle); err != nil {
			return err
		}
		region.End()
		region = trace.StartRegion(context.Background(), "gpu.stop")
		if state.stop, err = l.event(); err != nil {
			return err
		}
		return state.stop.Record(st.Handle)
	})
	if err != nil {
		l.recycle(state)
		v.End(err)
		return false
	}
	v.SetLaneData(state)
	l.mu.Lock()
	l.inflight = append(l.inflight, v)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return true
}

// Release takes back v's events once no child will wait on them any more.
func (l *gpuLane) Release(v *dag.Vertex) {
	if s, ok := v.LaneData().(*gpuState); ok {
		l.recycle(s)
	}
}

// maxFreeEvents bounds the events a lane keeps for reuse: a burst of many vertices in
// flight makes many, and the pool gives back what it cannot hold.
const maxFreeEvents = 256

func (l *gpuLane) recycle(s *gpuState) {
	l.mu.Lock()
	for _, ev := range []ucxx.CUDAEvent{s.start, s.stop} {
		switch {
		case ev == (ucxx.CUDAEvent{}):
		case len(l.events) < maxFreeEvents:
			l.events = append(l.events, ev)
		default:
			ev.Destroy() // any thread: the driver needs no current context for it
			l.res.events.Add(-1)
		}
	}
	l.mu.Unlock()
	s.start, s.stop = ucxx.CUDAEvent{}, ucxx.CUDAEvent{}
}

// GPUTime is how long v's work ran on its stream, with timings on, once v ended.
func GPUTime(v *dag.Vertex) (time.Duration, bool) {
	s, ok := v.LaneData().(*gpuState)
	if !ok || s.gpuTime == 0 {
		return 0, false
	}
	return s.gpuTime, true
}

// How the poller waits for stop events. With vertices in flight it polls without
// sleeping for pollBusy after the last end (or after work arrived), as CUDA's own
// synchronisation spins: a sleeping thread's wake-up costs tens of microseconds on an
// idle core and, on a virtual machine whose CPUs all went idle, milliseconds (a Go
// trace on the lent H200 VM showed 20 µs nanosleeps coming back after 6 ms, making
// a 0.7 ms DAG repetition take 6.9). Past pollBusy (long kernels) it polls every
// pollSleep (a pause.For: time.Sleep would make it about a millisecond). With nothing
// in flight it keeps looking for pollSpin, then parks until a Start wakes it.
const (
	pollSpin  = 200 * time.Microsecond
	pollBusy  = 5 * time.Millisecond
	pollSleep = 20 * time.Microsecond
)

// poll ends the lane's vertices as their stop events complete: the moment a GPU
// vertex's work is done, its host and transfer children may start. Host waits sweep
// too (Poll), so a waiter learns the end it wants on its own thread.
func (l *gpuLane) poll() {
	defer close(l.done)
	lastEnd := time.Now() // or the moment work arrived after none was in flight
	idle := false
	var spin spinner
	for {
		l.sweepMu.Lock()
		ended, inflight := l.sweep()
		l.sweepMu.Unlock()
		if ended > 0 {
			lastEnd, idle = time.Now(), false
			continue
		}
		if !inflight {
			l.mu.Lock()
			closed := l.closed && len(l.inflight) == 0
			l.mu.Unlock()
			idle = true
			switch {
			case closed:
				return
			case time.Since(lastEnd) < pollSpin:
				spin.turn()
			default:
				<-l.wake
				lastEnd = time.Now()
			}
			continue
		}
		if idle {
			idle, lastEnd = false, time.Now()
		}
		if time.Since(lastEnd) < pollBusy {
			spin.turn()
		} else {
			pause.For(pollSleep)
		}
	}
}

// spinner paces the poller's spin. Each turn gives the CPU to any other thread
// waiting for it (pause.Yield); every spinGoschedEvery turns it also lets the Go
// scheduler run what the poller readied on its P (runtime.Gosched). Gosched on every
// turn kept the runtime waking and parking threads to look for work, and the
// launching thread was preempted (bs: 20-29 involuntary context switches of the
// Python thread a repetition, launches of 400-800 µs, on the lent H200); Yield alone
// left a waiter readied on the poller's P unrun (bs 3.07 ms instead of 0.61), which
// now matters less since waiters poll themselves (Poll).
type spinner struct{ n uint }

const spinGoschedEvery = 32

func (s *spinner) turn() {
	s.n++
	if s.n%spinGoschedEvery == 0 {
		runtime.Gosched()
		return
	}
	pause.Yield()
}

// Poll sweeps once on the caller's goroutine, unless a sweep is running (dag.Poller).
func (l *gpuLane) Poll() {
	if l.sweepMu.TryLock() {
		l.sweep()
		l.sweepMu.Unlock()
	}
}

// sweep ends the in-flight vertices whose stop events are done, and says how many it
// ended and whether any were in flight; l.sweepMu is held.
//
// A stream's work completes in the order it was queued, so of each stream only the
// oldest vertex in flight is queried: a sweep costs one cuEventQuery per busy stream,
// not one per vertex. The queries run without l.mu, which Start takes to add a
// vertex (the driver's calls would make every launch wait behind a sweep).
func (l *gpuLane) sweep() (ended int, inflight bool) {
	sw := &l.sweeping
	l.mu.Lock()
	if len(l.inflight) == 0 {
		l.mu.Unlock()
		return 0, false
	}
	sw.batch, l.inflight = l.inflight, sw.spare[:0]
	l.mu.Unlock()
	sw.busy = sw.busy[:0]
	for _, v := range sw.batch {
		s := v.LaneData().(*gpuState)
		if slices.Contains(sw.busy, s.stream) {
			sw.kept = append(sw.kept, v)
			continue
		}
		switch done, err := s.stop.Done(); {
		case err != nil:
			sw.ended, sw.errs = append(sw.ended, v), append(sw.errs, err)
		case done:
			if s.start != (ucxx.CUDAEvent{}) {
				s.gpuTime, _ = ucxx.Elapsed(s.start, s.stop) // before Release recycles the events
			}
			sw.ended, sw.errs = append(sw.ended, v), append(sw.errs, nil)
		default:
			sw.kept = append(sw.kept, v)
			sw.busy = append(sw.busy, s.stream)
		}
	}
	l.mu.Lock()
	added := l.inflight // what Start queued during the sweep, after everything kept
	l.inflight = append(sw.kept, added...)
	l.mu.Unlock()
	clear(added)
	clear(sw.batch)
	sw.spare, sw.kept = added[:0], sw.batch[:0]
	for i, v := range sw.ended {
		v.End(sw.errs[i])
	}
	ended = len(sw.ended)
	clear(sw.ended)
	sw.ended, sw.errs = sw.ended[:0], sw.errs[:0]
	return ended, true
}

// close stops the poller once nothing is in flight (the caller waited for the graph)
// and destroys the lane's streams and events.
func (l *gpuLane) close() error {
	l.launch.Wait() // the graph has finished: it has nothing left to launch
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	<-l.done
	// A host wait may be sweeping still: its End has finished the graph (so the
	// caller's wait returned) but not yet released the vertex, whose events the
	// release hands back to l.events. Wait for it before destroying them.
	l.sweepMu.Lock()
	defer l.sweepMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	err := l.cu.Use(func() error {
		for _, s := range l.streams {
			errs = append(errs, s.Sync(), s.Destroy())
			l.res.streams.Add(-1)
		}
		for _, ev := range l.events {
			errs = append(errs, ev.Destroy())
			l.res.events.Add(-1)
		}
		return nil
	})
	l.streams, l.events = nil, nil
	l.stagedMu.Lock()
	if l.hasStaged {
		errs = append(errs, l.cu.Use(func() error { return errors.Join(l.staged.Sync(), l.staged.Destroy()) }))
		l.res.streams.Add(-1)
		l.hasStaged = false
	}
	l.stagedMu.Unlock()
	errs = append(errs, err, l.cu.Release())
	return errors.Join(errs...)
}
