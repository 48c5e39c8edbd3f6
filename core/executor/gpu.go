package executor

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ucxx-go/ucxx-go/core/internal/pause"
	"github.com/ucxx-go/ucxx-go/core/plan"
	"github.com/ucxx-go/ucxx-go/core/reduce"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Device memory. A call's buffers on a GPU run the same plans on GPU lanes: each
// lane a CUDA stream its goroutine fills without waiting. Puts, gets and copies are
// cuMemcpyAsync between this process's buffers and peers' allocations opened through
// CUDA IPC (the board carries each call's IPC handles, the context record the
// scratch's); reductions are kernels from kernels/reduce.ptx (compiled from
// reduce.cu, loaded with the driver: no compiler at run time); a signal is a stream
// write of the channel's running total into the peer's counter (host shared memory,
// registered with the device: one signaller per counter, so writing the total is
// the add), a wait a stream wait until the own counter reaches the next value
// (cuStreamWaitValue64). The host blocks only where the plan makes lanes meet
// (barriers, semaphores: the lane's stream drains first) and at the end, where it
// watches the streams against the deadline and the ranks' lives; a failed call
// releases its own counters so no stream stays blocked, and breaks the executor.
//
// LL packet ops are refused on device memory: their readers spin in kernels, which
// ranks sharing one GPU from several processes cannot run side by side.

// Memory is where a call's buffers are.
type Memory uint8

const (
	MemoryHost Memory = iota // host memory (the zero value)
	MemoryCUDA               // device memory of one GPU
)

//go:embed kernels/reduce.ptx
var reducePTX []byte

//go:embed kernels/program.ptx
var programPTX []byte

// gpuState is the executor's CUDA side: the device's primary context, the reduction
// kernels, and the peer allocations opened through IPC.
type gpuState struct {
	d    *ucxx.CUDADriver
	dev  int
	cctx ucxx.CUDAContext
	mod  ucxx.CUDAModule
	// busHash identifies the GPU across processes (FNV of its PCI bus id).
	busHash uint64

	mu  sync.Mutex
	fns map[[2]uint8]ucxx.CUDAFunction
	// programMod holds the program kernels (program.go), loaded with the state
	// when programs are on; programFns caches them by type and operator ({0, 0}:
	// program_copy).
	programMod ucxx.CUDAModule
	programFns map[[2]uint8]ucxx.CUDAFunction
	opened     map[ipcKey]*ipcEntry
	order      []ipcKey // opened, oldest first
	// exported caches this process's allocations' handles by buffer id.
	exported map[uint64]exportedBuffer

	// callerEvents[:callerReady] are recorded, at the current call's start, on the
	// streams its caller queued work on its buffers; the call's lanes wait for them on
	// the device before their first op (a fenced plan's calls: callerWorkFenced).
	// Reused call after call (calls are serialized); fenced caches callerWorkFenced.
	callerEvents  []ucxx.CUDAEvent
	callerStreams []uintptr // the stream each of callerEvents[:callerReady] was recorded on
	callerReady   int
	fenced        map[*plan.Plan]bool

	// flight holds the stream-ordered calls queued and not yet seen done (ordered.go).
	flight flight
}

// ipcKey names a peer allocation: the rank and the allocation's buffer id in its
// process (ids are never reused; addresses are, and a handle's bytes differ from
// call to call).
type ipcKey struct {
	rank int
	id   uint64
}

// ipcEntry is an opened peer allocation: where it starts in the peer's process and
// where this process reaches it.
type ipcEntry struct {
	base, p uintptr
	// pinned: a context's peer scratch, closed with the context, never evicted.
	pinned bool
}

// exportedBuffer is one of this process's allocations as peers are told of it.
type exportedBuffer struct {
	h    ucxx.IPCHandle
	base uintptr
}

// maxExported bounds the exported-handle cache (cleared when full).
const maxExported = 1024

// maxOpened bounds the peer allocations kept open.
const maxOpened = 256

// useGPU returns the executor's CUDA side for device dev, making it on first use.
func (x *Executor) useGPU(dev int) (*gpuState, error) {
	if x.gpu != nil {
		if x.gpu.dev != dev {
			return nil, fmt.Errorf("executor: buffers on GPU %d after GPU %d (one GPU per communicator): %w", dev, x.gpu.dev, ErrUnsupported)
		}
		return x.gpu, nil
	}
	d, err := ucxx.CUDA()
	if err != nil {
		return nil, fmt.Errorf("executor: %v: %w", err, ErrUnsupported)
	}
	cctx, err := d.RetainPrimary(dev)
	if err != nil {
		return nil, err
	}
	g := &gpuState{d: d, dev: dev, cctx: cctx, fns: make(map[[2]uint8]ucxx.CUDAFunction), programFns: make(map[[2]uint8]ucxx.CUDAFunction),
		opened:   make(map[ipcKey]*ipcEntry),
		exported: make(map[uint64]exportedBuffer)}
	g.flight.alive = x.board.alive // the board the call was announced on: the watcher's only look at it
	g.flight.timeout = x.opts.Timeout
	if err := cctx.Use(func() (err error) { g.mod, err = d.LoadModule(reducePTX); return err }); err != nil {
		cctx.Release()
		return nil, fmt.Errorf("executor: load the reduction kernels: %w", err)
	}
	if devicePrograms {
		// Here, before any call: the driver compiles the PTX (49 kernels), which a
		// call's first program must not wait for while its peers wait for it.
		if err := cctx.Use(func() (err error) { g.programMod, err = d.LoadModule(programPTX); return err }); err != nil {
			g.mod.Unload()
			cctx.Release()
			return nil, fmt.Errorf("executor: load the program kernels: %w", err)
		}
	}
	bus, err := d.PCIBusID(dev)
	if err != nil {
		g.close()
		return nil, err
	}
	h := fnv.New64a()
	h.Write([]byte(bus))
	g.busHash = h.Sum64() | 1
	x.gpu = g
	return g, nil
}

func (g *gpuState) close() {
	if g == nil {
		return
	}
	if g.flight.pending() > 0 {
		// Calls in flight that did not end (Close gave them the timeout) may still
		// use the kernels, the peers' mappings and the events: leaked, as their
		// contexts are (Executor.closeContext).
		g.cctx.Release()
		return
	}
	g.cctx.Use(func() error {
		for _, e := range g.opened {
			g.d.CloseIPC(e.p)
		}
		for _, ev := range g.callerEvents {
			ev.Destroy()
		}
		g.flight.mu.Lock()
		for _, fc := range append(g.flight.calls, g.flight.spare...) {
			for _, e := range fc.ends {
				e.Destroy()
			}
			fc.start.Destroy()
		}
		g.flight.calls, g.flight.spare, g.flight.closed = nil, nil, true
		g.flight.mu.Unlock()
		g.mod.Unload()
		if g.programMod != (ucxx.CUDAModule{}) {
			g.programMod.Unload()
		}
		return nil
	})
	g.cctx.Release()
}

// awaitCaller makes the current call wait for the work its caller queued on streams
// (0: none; a stream named twice, as an in-place call's send and receive stream,
// counts once): recorded for its lanes to wait on the device where fenced (the plan
// is fenced against peers reaching buffers still in use, callerWorkFenced, and the
// call is ordered or fencedCallerWait is on), else waited for here, on the host,
// before the call is announced; with pc (not nil: on the caller's own thread, which must not
// wait for the device long) errDeviceFirst once its patience passed, unless a stream
// is the per-thread default stream, which only this thread can wait for. The events
// are the state's,
// reused call after call (an event made and destroyed a call cost 1-2 µs of a 40 µs
// small call on 2 x H100).
func (g *gpuState) awaitCaller(streams []uintptr, fenced bool, pc *patienceClock) error {
	g.callerReady = 0
	if !slices.ContainsFunc(streams, func(s uintptr) bool { return s != 0 }) {
		return nil // data the caller's streams do not write: nothing to wait for
	}
	var failed uintptr
	err := g.cctx.Use(func() error {
		for i, s := range streams {
			if s == 0 || slices.Contains(streams[:i], s) {
				continue
			}
			failed = s
			if g.callerReady == len(g.callerEvents) {
				ev, err := g.d.NewEvent(false)
				if err != nil {
					return err
				}
				g.callerEvents, g.callerStreams = append(g.callerEvents, ev), append(g.callerStreams, 0)
			}
			if err := g.callerEvents[g.callerReady].Record(s); err != nil {
				return err
			}
			g.callerStreams[g.callerReady] = s
			g.callerReady++
		}
		if fenced {
			return nil
		}
		if pc != nil && !slices.Contains(streams, ucxx.StreamPerThread) {
			if !g.callerDoneWithin(pc) {
				g.callerReady = 0
				return errDeviceFirst // the goroutine taking the call over waits
			}
			g.callerReady = 0
			return nil
		}
		for i, ev := range g.callerEvents[:g.callerReady] {
			failed = g.callerStreams[i]
			if err := ev.Wait(); err != nil {
				return err
			}
		}
		g.callerReady = 0
		return nil
	})
	if err == errDeviceFirst {
		return err
	}
	if err != nil {
		g.callerReady = 0
		return fmt.Errorf("executor: wait for stream %#x: %w", failed, err)
	}
	return nil
}

// callerDoneWithin polls the caller's recorded events within pc's patience and
// reports whether all are done (a driver error counts as not done: the waiting
// elsewhere reports it). The context is current.
func (g *gpuState) callerDoneWithin(pc *patienceClock) bool {
	for {
		if done, err := ucxx.EventsDone(g.callerEvents[:g.callerReady]); done && err == nil {
			return true
		}
		if time.Now().After(pc.until()) {
			return false
		}
		pause.Yield()
	}
}

// isFenced reports callerWorkFenced(p), cached per plan (calls repeat their plans).
func (g *gpuState) isFenced(p *plan.Plan) bool {
	fenced, ok := g.fenced[p]
	if !ok {
		if g.fenced == nil || len(g.fenced) >= maxFencedPlans {
			g.fenced = make(map[*plan.Plan]bool)
		}
		fenced = callerWorkFenced(p)
		g.fenced[p] = fenced
	}
	return fenced
}

// maxFencedPlans bounds the fenced cache (cleared when full).
const maxFencedPlans = 256

// fencedCallerWait turns on the device-side wait for the caller's stream in fenced
// plans (UCXGO_FENCED_CALLER_WAIT=1). Off by default: tests/gpu pass with it on (2 x
// H100), but it measured no faster than the host's event synchronize, the default
// (2 ranks, 8 B and 2 MiB allreduce: 65-75 against 55-63 us a call; the collective
// table within the spread of two default runs; benchmarks/RESULTS.md, session 17).
var fencedCallerWait = os.Getenv("UCXGO_FENCED_CALLER_WAIT") == "1"

// awaitPerThreadStream waits, on the calling thread, for the work its per-thread
// default stream holds, in the context of the GPU holding c's buffers.
func awaitPerThreadStream(c Call) error {
	addr := c.bufferAddr()
	if addr == 0 {
		return nil
	}
	dev, err := deviceOf(addr)
	if err != nil {
		return err
	}
	d, err := ucxx.CUDA()
	if err != nil {
		return fmt.Errorf("executor: %v: %w", err, ErrUnsupported)
	}
	cctx, err := d.RetainPrimary(dev)
	if err != nil {
		return err
	}
	defer cctx.Release()
	if err := cctx.AwaitStream(ucxx.StreamPerThread); err != nil {
		return fmt.Errorf("executor: wait for the per-thread default stream: %w", err)
	}
	return nil
}

// deviceOf returns the GPU holding addr.
func deviceOf(addr uintptr) (int, error) {
	d, err := ucxx.CUDA()
	if err != nil {
		return 0, fmt.Errorf("executor: %v: %w", err, ErrUnsupported)
	}
	p, err := d.Pointer(addr)
	if err != nil {
		return 0, err
	}
	if !p.IsCUDA || p.Managed {
		return 0, fmt.Errorf("executor: %#x is not device memory: %w", addr, plan.ErrBuffers)
	}
	return p.Device, nil
}

// typeNames are the kernels' type suffixes by reduce.DType.
var typeNames = map[reduce.DType]string{
	reduce.Int8: "i8", reduce.Int16: "i16", reduce.Int32: "i32", reduce.Int64: "i64",
	reduce.Uint8: "u8", reduce.Uint16: "u16", reduce.Uint32: "u32", reduce.Uint64: "u64",
	reduce.Float16: "f16", reduce.BFloat16: "bf16", reduce.Float32: "f32", reduce.Float64: "f64",
}

// kernel returns the reduction kernel of a type and operator.
func (g *gpuState) kernel(t reduce.DType, op reduce.Op) (ucxx.CUDAFunction, error) {
	k := [2]uint8{uint8(t), uint8(op)}
	g.mu.Lock()
	defer g.mu.Unlock()
	if f, ok := g.fns[k]; ok {
		return f, nil
	}
	tn, ok := typeNames[t]
	if !ok || op < reduce.Sum || op > reduce.Max {
		return ucxx.CUDAFunction{}, fmt.Errorf("executor: reduce %v over %v on a GPU: %w", op, t, ErrUnsupported)
	}
	f, err := g.mod.Function(fmt.Sprintf("reduce_%s_%s", op, tn))
	if err != nil {
		return ucxx.CUDAFunction{}, err
	}
	g.fns[k] = f
	return f, nil
}

// open returns where this process reaches rank's allocation id, which starts at
// base in rank's process (handle h), opening it once. The driver refuses to map an
// allocation at a peer address this process still maps from a freed allocation
// (CUDA_ERROR_ALREADY_MAPPED): those stale mappings are closed and the open retried.
// Call it with the context current.
func (g *gpuState) open(rank int, id uint64, base uintptr, h ucxx.IPCHandle, pin bool) (uintptr, error) {
	k := ipcKey{rank, id}
	g.mu.Lock()
	defer g.mu.Unlock()
	if e := g.opened[k]; e != nil {
		return e.p, nil
	}
	p, err := g.d.OpenIPC(h)
	var ce *ucxx.CUDAError
	if err != nil && errors.As(err, &ce) && ce.Code == cudaErrorAlreadyMapped {
		if err := g.settle(); err != nil { // a call in flight may use what is closed here
			return 0, err
		}
		for ok, e := range g.opened {
			if ok.rank == rank && e.base == base && !e.pinned {
				g.closeLocked(ok)
			}
		}
		p, err = g.d.OpenIPC(h)
	}
	if err != nil {
		return 0, &RankError{Rank: rank, Op: "open its device buffer", Err: err}
	}
	if len(g.order) >= maxOpened {
		if err := g.settle(); err != nil { // a call in flight may use what is closed here
			g.d.CloseIPC(p)
			return 0, err
		}
		for _, old := range g.order {
			if !g.opened[old].pinned {
				g.closeLocked(old)
				break
			}
		}
	}
	g.opened[k], g.order = &ipcEntry{base: base, p: p, pinned: pin}, append(g.order, k)
	return p, nil
}

// closeLocked closes an opened allocation; g.mu is held.
func (g *gpuState) closeLocked(k ipcKey) {
	e := g.opened[k]
	if e == nil {
		return
	}
	g.d.CloseIPC(e.p)
	delete(g.opened, k)
	for i, o := range g.order {
		if o == k {
			g.order = append(g.order[:i:i], g.order[i+1:]...)
			break
		}
	}
}

// forget closes a pinned mapping (its context closed).
func (g *gpuState) forget(rank int, id uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closeLocked(ipcKey{rank, id})
}

// cudaErrorAlreadyMapped is CUDA_ERROR_ALREADY_MAPPED.
const cudaErrorAlreadyMapped = 208

// gpuContext is the device side of a plan context.
type gpuContext struct {
	scratch       uintptr // device scratch (0 without)
	scratchHandle ucxx.IPCHandle
	counters      uintptr   // the device's view of this rank's counters
	peerCounters  []uintptr // the device's view of each peer's counters
	peerScratch   []uintptr // each peer's scratch, opened
	peerIDs       []uint64  // each peer's scratch's buffer id (0: none)
	scratchID     uint64    // the scratch's buffer id
	registered    []uintptr // host ranges registered with the device
	streams       []ucxx.CUDAStream
	tmp           []uintptr        // per lane: a tmpBytes device buffer (glres), or 0
	programs      []*deviceProgram // per lane: its program (program.go), when programs are on
	// sent[q][k] is the running total this rank wrote into peer q's counter k.
	sent [][]uint64
}

func (g *gpuState) newContext(c *planContext) (*gpuContext, error) {
	n := len(c.peers)
	gc := &gpuContext{peerCounters: make([]uintptr, n), peerScratch: make([]uintptr, n), peerIDs: make([]uint64, n),
		sent: make([][]uint64, n)}
	rk := &c.plan.Ranks[c.rank]
	err := g.cctx.Use(func() error {
		if c.capacity > 0 {
			p, err := g.d.MemAlloc(c.capacity)
			if err != nil {
				return err
			}
			gc.scratch = p
			if gc.scratchHandle, _, _, err = g.d.IPCHandleOf(p); err != nil {
				return err
			}
			if gc.scratchID, err = g.d.BufferID(p); err != nil {
				return err
			}
		}
		dev, err := g.d.MapHost(c.seg.base(), uint64(len(c.seg.mem)))
		if err != nil {
			return err
		}
		gc.counters, gc.registered = dev, append(gc.registered, c.seg.base())
		for range rk.Lanes {
			s, err := g.d.NewStream()
			if err != nil {
				return err
			}
			gc.streams = append(gc.streams, s)
			gc.tmp = append(gc.tmp, 0)
			if devicePrograms {
				gc.programs = append(gc.programs, new(deviceProgram))
			}
		}
		return nil
	})
	if err != nil {
		g.free(gc)
		return nil, fmt.Errorf("executor: device context: %w", err)
	}
	return gc, nil
}

// connect maps the peers' counters for the device and opens their scratch buffers.
func (g *gpuState) connect(c *planContext, records []*record) error {
	gc := c.gpu
	return g.cctx.Use(func() error {
		for q, r := range records {
			if r == nil {
				continue
			}
			s := c.peers[q]
			dev, err := g.d.MapHost(s.base(), uint64(len(s.mem)))
			if err != nil {
				return fmt.Errorf("executor: register rank %d's counters with the device: %w", q, err)
			}
			gc.peerCounters[q], gc.registered = dev, append(gc.registered, s.base())
			gc.sent[q] = make([]uint64, counterCount(c.plan, q))
			if r.scratchCap > 0 {
				id := binary.LittleEndian.Uint64(r.nonce[:8])
				if gc.peerScratch[q], err = g.open(q, id, uintptr(r.segAddr), r.handle, true); err != nil {
					return err
				}
				gc.peerIDs[q] = id
			}
		}
		return nil
	})
}

func (g *gpuState) closeContext(c *planContext) {
	g.cctx.Use(func() error {
		for _, s := range c.gpu.streams {
			s.Sync()
		}
		for q, id := range c.gpu.peerIDs {
			if id != 0 {
				g.forget(q, id)
			}
		}
		g.free(c.gpu)
		return nil
	})
	c.gpu = nil
}

// free releases what a device context holds; the context must be current.
func (g *gpuState) free(gc *gpuContext) {
	for _, s := range gc.streams {
		s.Destroy()
	}
	for _, p := range gc.tmp {
		if p != 0 {
			g.d.MemFree(p)
		}
	}
	for _, a := range gc.registered {
		g.d.UnmapHost(a)
	}
	if gc.scratch != 0 {
		g.d.MemFree(gc.scratch)
	}
}

// cudaCall is a device call's view of the peers' buffers, opened.
type cudaCall struct {
	in, out []uintptr // per rank, 0 where not opened
	// programs: the lanes record their ops into device programs (program.go).
	programs bool
	// hostWaits: the lanes wait for signals on the host, not on the device, because
	// a stream blocked in cuStreamWaitValue would hold up work the call needs:
	//   - another rank's process uses this GPU too, a peer of this rank's or not (4
	//     ranks on 2 GPUs: a ring's neighbours are on the other GPU): the blocked
	//     stream keeps its context on the GPU until the time slice ends (about 1 ms
	//     on the H100), while the other context, whose work the call's progress may
	//     need, waits for its turn;
	//   - the plan gives this rank more lanes than deviceWaitLanes: the driver
	//     multiplexes streams onto a fixed number of hardware queues
	//     (CUDA_DEVICE_MAX_CONNECTIONS, 8 by default), so two lanes may share one, and
	//     a lane's signal queued behind another lane's wait is never sent while the
	//     wait needs a peer whose own wait needs that signal (MSCCL++'s 8-block
	//     allreduce on 4 GPUs, one rank each, hung so; with 32 connections it ran).
	hostWaits bool
	// slices: the lanes' programs run on this many blocks, each on its slice of
	// every op, signalling and waiting on its own word of each counter (slices.go);
	// 0 for an unsliced call.
	slices int
	// waitsOnly: the programs hold only signals and waits (Call.ProgramWaits).
	waitsOnly bool
}

// deviceWaitLanes is the most lanes a rank's device call may give streams that
// wait on the device: half the hardware queues the driver multiplexes streams onto
// (CUDA_DEVICE_MAX_CONNECTIONS as this process started; 8 when unset). A context's
// lane streams are made one after another, but which queue a stream gets is the
// driver's choice (8 lanes on 8 queues hung), so the half is a margin, not a proof;
// with more lanes a call waits on the host, which is always safe.
//
// The driver reads the variable when it makes a context; this reads it when the
// process starts, so a value set later (from Python, before CUDA starts) is missed,
// and streams of other communicators, staging copies and the application share the
// same queues unseen. With one queue (CUDA_DEVICE_MAX_CONNECTIONS=1) every stream
// shares it: 0, every device call waits on the host.
var deviceWaitLanes = deviceWaitLanesFor(os.Getenv("CUDA_DEVICE_MAX_CONNECTIONS"))

// deviceWaitLanesFor is deviceWaitLanes for a CUDA_DEVICE_MAX_CONNECTIONS value
// ("" or not a positive number: the driver's default, 8).
func deviceWaitLanesFor(connections string) int {
	n, err := strconv.Atoi(connections)
	if err != nil || n < 1 {
		n = 8
	}
	return min(n, maxDeviceConnections) / 2
}

// maxDeviceConnections is the most hardware queues CUDA_DEVICE_MAX_CONNECTIONS gives.
const maxDeviceConnections = 32

// deviceBuffers returns the IPC handle, offset and buffer id of a buffer (zeros
// when empty); handles are made once per allocation.
func (g *gpuState) deviceBuffers(b Buffer) (h ucxx.IPCHandle, off, id uint64, err error) {
	if b.Bytes == 0 {
		return h, 0, 0, nil
	}
	err = g.cctx.Use(func() error {
		var e error
		if id, e = g.d.BufferID(b.Addr); e != nil {
			return e
		}
		g.mu.Lock()
		x, ok := g.exported[id]
		g.mu.Unlock()
		if !ok {
			if x.h, x.base, _, e = g.d.IPCHandleOf(b.Addr); e != nil {
				return e
			}
			g.mu.Lock()
			if len(g.exported) >= maxExported {
				clear(g.exported)
			}
			g.exported[id] = x
			g.mu.Unlock()
		}
		h, off = x.h, uint64(b.Addr-x.base)
		return nil
	})
	return h, off, id, err
}

// openPeers opens the connected peers' buffers of a device call.
func (g *gpuState) openPeers(p *plan.Plan, me int, peers []peerCall) (*cudaCall, error) {
	cc := &cudaCall{in: make([]uintptr, len(peers)), out: make([]uintptr, len(peers))}
	err := g.cctx.Use(func() error {
		for _, q := range setupPeers(p, me) {
			pc := &peers[q]
			if pc.memory != MemoryCUDA {
				return &RankError{Rank: q, Op: "device call", Err: fmt.Errorf("the rank's buffers are not device memory: %w", ErrMismatch)}
			}
			for _, side := range []struct {
				b       Buffer
				h       ucxx.IPCHandle
				off, id uint64
				at      *uintptr
			}{{pc.in, pc.inHandle, pc.inOffset, pc.inID, &cc.in[q]}, {pc.out, pc.outHandle, pc.outOffset, pc.outID, &cc.out[q]}} {
				if side.b.Bytes == 0 {
					continue
				}
				base, err := g.open(q, side.id, side.b.Addr-uintptr(side.off), side.h, false)
				if err != nil {
					return err
				}
				*side.at = base + uintptr(side.off)
			}
		}
		return nil
	})
	return cc, err
}

// runGPULane runs lane li on its stream, then waits for the stream to drain.
func (r *callRun) runGPULane(li int) {
	g := r.x.gpu
	rk := &r.c.Plan.Ranks[r.me]
	lr := &laneRun{r: r, id: li, lane: &rk.Lanes[li], rk: rk, stream: r.ctx.gpu.streams[li].Handle()}
	if r.cuda.programs {
		lr.prog = r.ctx.gpu.programs[li]
		lr.prog.reset()
	}
	aborted := false
	err := g.cctx.Use(func() error {
		for _, ev := range g.callerEvents[:g.callerReady] {
			if err := g.d.StreamWaitEvent(lr.stream, ev); err != nil {
				return err
			}
		}
		if li == 0 && r.flight != nil { // the call's start, for its timeout (ordered.go)
			if err := r.flight.start.Record(lr.stream); err != nil {
				return err
			}
		}
		ops := lr.lane.Ops
		for oi := r.ctx.skip[li]; oi < len(ops); oi++ {
			if r.scope.aborted.Load() {
				aborted = true
				return nil
			}
			if err := lr.gpuOp(&ops[oi], &r.l.Lanes[li][oi], nil, 0); err != nil {
				return lr.locate(err, oi, &ops[oi])
			}
		}
		if r.flight != nil { // stream-ordered: the lane's end is an event, not a wait
			if err := lr.launchProgram(); err != nil {
				return err
			}
			return r.flight.ends[li].Record(lr.stream)
		}
		return lr.drain()
	})
	switch {
	case err != nil:
		r.fail(err)
		r.releaseCounters()
		g.cctx.Use(func() error { return r.ctx.gpu.streams[li].Sync() })
	case aborted:
		// Another lane failed (and released the counters): what this lane queued
		// must not run after the call returned into buffers the caller may free.
		g.cctx.Use(func() error { return r.ctx.gpu.streams[li].Sync() })
	}
}

// releaseCounters lets every stream wait on this rank's counters through (a failed
// call: nothing must stay blocked on the device). The executor is broken after.
func (r *callRun) releaseCounters() { releaseOwnCounters(r.ctx) }

// drain waits until the lane's stream is done, watching the call's deadline and
// abort and the connected ranks' lives: polled (cuStreamQuery) without sleeping for
// the first drainSpin, then every drainPause, the other checks once a millisecond.
func (lr *laneRun) drain() error {
	if err := lr.launchProgram(); err != nil {
		return err
	}
	r := lr.r
	s := r.ctx.gpu.streams[lr.id]
	peers := r.ctx.connected
	start := time.Now()
	next := start
	for {
		done, err := s.Done()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		now := time.Now()
		if now.Sub(start) < drainSpin {
			pause.Yield()
			continue
		}
		if now.After(next) {
			next = now.Add(time.Millisecond)
			if r.scope.aborted.Load() {
				return errAborted
			}
			for _, q := range peers {
				if !r.scope.alive(q) {
					return &RankError{Rank: q, Op: "waiting for the device", Err: fmt.Errorf("the rank's process ended: %w", ErrRankFailed)}
				}
			}
			if now.After(r.scope.deadline) {
				return &RankError{Rank: -1, Op: "waiting for the device", Err: fmt.Errorf("the lane's stream did not finish in %v: %w", r.scope.timeout, ErrTimeout)}
			}
		}
		pause.For(drainPause)
	}
}

const (
	drainSpin  = 200 * time.Microsecond
	drainPause = 10 * time.Microsecond
)

// gpuOp queues one op on the lane's stream.
func (lr *laneRun) gpuOp(op *plan.Op, ol *plan.OpLayout, pipe *plan.Op, it uint64) error {
	r := lr.r
	switch op.Code {
	case plan.OpNop, plan.OpFlush:
		return nil
	case plan.OpBarrier, plan.OpSemAcquire, plan.OpSemRelease:
		if err := lr.drain(); err != nil {
			return err
		}
		return lr.op(op, ol, pipe, it)
	case plan.OpSignal, plan.OpRelaxedSignal:
		return lr.gpuSignals(op)
	case plan.OpWait, plan.OpRelaxedWait:
		if r.cuda.hostWaits {
			// The host waits for a peer that may wait for what this lane recorded.
			if err := lr.launchProgram(); err != nil {
				return err
			}
		}
		lr.wordOps = lr.wordOps[:0]
		for _, id := range op.ChannelIDs {
			idx, _ := lr.channel(op.Channel, id)
			k := counterIndex(r.c.Plan, r.me, op.Channel, idx)
			want := atomic.AddUint64(&r.ctx.expected[k], 1)
			if r.cuda.hostWaits {
				_, ch := lr.channel(op.Channel, id)
				// A sliced call's signal is a word a block: every one must arrive.
				w := r.ctx.counter(r.me, k, r.me)
				for b := range max(r.cuda.slices, 1) {
					if err := r.scope.polled(w.at(b), func(v uint64) bool { return v >= want }, ch.Peer,
						func() string { return fmt.Sprintf("waiting for signal %d on %s channel %d", want, op.Channel, idx) }); err != nil {
						return err
					}
				}
				continue
			}
			lr.wordOps = append(lr.wordOps, ucxx.StreamWordOp{Wait: true, Addr: r.ctx.gpu.counters + uintptr(counterOffset(k)), Value: want})
		}
		return lr.gpuWordOps()
	case plan.OpPut, plan.OpPutWithSignal, plan.OpPutWithSignalAndFlush:
		for i := range op.Dst {
			src := lr.span(op, op.Src, ol.Src, i, pipe, it)
			dst := lr.span(op, op.Dst, ol.Dst, i, pipe, it)
			pr, err := lr.remote(&op.Dst[i], dst)
			if err != nil {
				return err
			}
			if err := lr.copyAsync(pr.mapped, lr.local(op.Src[i].Buffer, src), dst.Length); err != nil {
				return err
			}
		}
		if op.Code != plan.OpPut {
			return lr.gpuSignals(op)
		}
		return nil
	case plan.OpGet:
		for i := range op.Src {
			src := lr.span(op, op.Src, ol.Src, i, pipe, it)
			dst := lr.span(op, op.Dst, ol.Dst, i, pipe, it)
			pr, err := lr.remote(&op.Src[i], src)
			if err != nil {
				return err
			}
			if err := lr.copyAsync(lr.local(op.Dst[i].Buffer, dst), pr.mapped, src.Length); err != nil {
				return err
			}
		}
		return nil
	case plan.OpCopy:
		src := lr.span(op, op.Src, ol.Src, 0, pipe, it)
		dst := lr.span(op, op.Dst, ol.Dst, 0, pipe, it)
		return lr.copyAsync(lr.local(op.Dst[0].Buffer, dst), lr.local(op.Src[0].Buffer, src), src.Length)
	case plan.OpReduce, plan.OpReduceSend, plan.OpReadReduce, plan.OpReadReduceSend:
		return lr.gpuReduce(op, ol, pipe, it)
	case plan.OpMultiLoadReduceStore:
		return lr.gpuMultiLoadReduceStore(op, ol, pipe, it)
	case plan.OpPipeline:
		for i := uint64(0); i < ol.Iterations; i++ {
			for j := range op.Ops {
				if err := lr.gpuOp(&op.Ops[j], &ol.Ops[j], op, i); err != nil {
					return fmt.Errorf("pipeline iteration %d, inner op %d (%s): %w", i, j, op.Ops[j].Code, err)
				}
			}
		}
		return nil
	}
	return fmt.Errorf("op %q on device memory: %w", op.Code, ErrUnsupported)
}

func (lr *laneRun) copyAsync(dst, src uintptr, n uint64) error {
	if n == 0 || dst == src {
		return nil
	}
	if lr.prog != nil {
		return lr.recordCopy(dst, src, n)
	}
	return lr.r.x.gpu.d.CopyAsync(dst, src, n, lr.stream)
}

// gpuSignals queues op's signals, one per channel: each the write of the channel's
// next total into the peer's counter, all in one gpuWordOps.
func (lr *laneRun) gpuSignals(op *plan.Op) error {
	r := lr.r
	lr.wordOps = lr.wordOps[:0]
	for _, id := range op.ChannelIDs {
		_, ch := lr.channel(op.Channel, id)
		k := counterIndex(r.c.Plan, ch.Peer, op.Channel, ch.Reverse)
		total := atomic.AddUint64(&r.ctx.gpu.sent[ch.Peer][k], 1)
		lr.wordOps = append(lr.wordOps, ucxx.StreamWordOp{Addr: r.ctx.gpu.peerCounters[ch.Peer] + uintptr(counterOffset(k)), Value: total})
	}
	return lr.gpuWordOps()
}

// gpuWordOps queues the lane's collected signals and device waits (wordOps) on its
// stream: in one driver call where the driver batches stream memory operations, one
// by one where it does not.
func (lr *laneRun) gpuWordOps() error {
	if lr.prog != nil {
		for _, op := range lr.wordOps {
			if err := lr.recordWordOp(op); err != nil {
				return err
			}
		}
		return nil
	}
	switch d := lr.r.x.gpu.d; len(lr.wordOps) {
	case 0:
		return nil
	case 1:
		return lr.gpuWordOp(lr.wordOps[0])
	default:
		queued := 0
		if !noWordBatches.Load() {
			var err error
			queued, err = d.StreamWordOps(lr.stream, lr.wordOps, &lr.wordArgs)
			var ce *ucxx.CUDAError
			if !errors.As(err, &ce) || ce.Code != ucxx.CUDAErrorNotSupported {
				return err
			}
			noWordBatches.Store(true)
		}
		for _, op := range lr.wordOps[queued:] {
			if err := lr.gpuWordOp(op); err != nil {
				return err
			}
		}
		return nil
	}
}

// noWordBatches: the driver lacks cuStreamBatchMemOp (learnt at the first try);
// gpuWordOps then queues one op a call.
var noWordBatches atomic.Bool

func (lr *laneRun) gpuWordOp(op ucxx.StreamWordOp) error {
	d := lr.r.x.gpu.d
	if op.Wait {
		return d.StreamWaitAtLeast(lr.stream, op.Addr, op.Value)
	}
	return d.StreamWriteWord(lr.stream, op.Addr, op.Value)
}

// reduceMaxSources is the most sources one reduction kernel reads (kernels/reduce.cu's
// ReduceArgs); a reduction of more is one kernel a group, each after the first
// folding dst into the next sources.
const reduceMaxSources = 8

// reduceThreads is a reduction kernel's block; reduceMaxBlocks bounds its grid (the
// kernel strides over the rest).
const (
	reduceThreads   = 512
	reduceMaxBlocks = 4096
)

// launchReduce queues dst = srcs[0] op srcs[1] op ... over n elements, folded left
// (at least two sources). In a device program, as pairwise ops (the program's
// format); else as one kernel reading every source once.
func (lr *laneRun) launchReduce(dst uintptr, srcs []uintptr, n uint64, t reduce.DType, op reduce.Op) error {
	if n == 0 {
		return nil
	}
	if lr.prog != nil {
		recorded, err := lr.recordReduce(dst, srcs[0], srcs[1], n, t, op)
		if err != nil || recorded {
			for k := 2; k < len(srcs) && err == nil; k++ {
				_, err = lr.recordReduce(dst, dst, srcs[k], n, t, op)
			}
			return err
		}
	}
	f, err := lr.r.x.gpu.kernel(t, op)
	if err != nil {
		return err
	}
	vectors := (n*t.Size() + 15) / 16
	blocks := min(max((vectors+reduceThreads-1)/reduceThreads, 1), reduceMaxBlocks)
	shape := ucxx.LaunchShape{Grid: [3]uint32{uint32(blocks), 1, 1}, Block: [3]uint32{reduceThreads, 1, 1}}
	for _, group := range reduceGroups(dst, srcs) {
		if err := f.LaunchPacked(shape, lr.stream, reduceArgs(dst, group, n)); err != nil {
			return err
		}
	}
	return nil
}

// reduceGroups splits a reduction of srcs into dst into its kernels' sources, in
// order: the first reduceMaxSources sources, then dst and the next
// reduceMaxSources-1, and so on.
func reduceGroups(dst uintptr, srcs []uintptr) [][]uintptr {
	k := min(len(srcs), reduceMaxSources)
	groups := [][]uintptr{srcs[:k]}
	for rest := srcs[k:]; len(rest) > 0; rest = rest[k:] {
		k = min(len(rest), reduceMaxSources-1)
		groups = append(groups, append([]uintptr{dst}, rest[:k]...))
	}
	return groups
}

// reduceArgs packs a reduction kernel's parameter (kernels/reduce.cu's ReduceArgs):
// dst, n, the count of sources, then reduceMaxSources source addresses.
func reduceArgs(dst uintptr, srcs []uintptr, n uint64) []byte {
	b := make([]byte, 8*(3+reduceMaxSources))
	binary.LittleEndian.PutUint64(b[0:], uint64(dst))
	binary.LittleEndian.PutUint64(b[8:], n)
	binary.LittleEndian.PutUint64(b[16:], uint64(len(srcs)))
	for i, s := range srcs {
		binary.LittleEndian.PutUint64(b[24+8*i:], uint64(s))
	}
	return b
}

// gpuReduce is reduce's device form: kernels reading local and peer memory alike.
func (lr *laneRun) gpuReduce(op *plan.Op, ol *plan.OpLayout, pipe *plan.Op, it uint64) error {
	t, rop, n, dst, a, err := lr.reduction(op, ol, pipe, it)
	if err != nil || n == 0 {
		return err
	}
	remoteSrc := op.Code == plan.OpReadReduce || op.Code == plan.OpReadReduceSend
	srcs := []uintptr{a}
	for k := 1; k < len(op.Src); k++ {
		sp := lr.span(op, op.Src, ol.Src, k, pipe, it)
		sp.Length = n
		if remoteSrc {
			pr, err := lr.remote(&op.Src[k], sp)
			if err != nil {
				return err
			}
			srcs = append(srcs, pr.mapped)
		} else {
			srcs = append(srcs, lr.local(op.Src[k].Buffer, sp))
		}
	}
	// A later source that is dst itself is folded first, before dst is written
	// (pairwise in a program, or by a kernel after the first of a reduction of more
	// than reduceMaxSources; the operators commute; a float sum's order then differs
	// from a left fold).
	for k := 2; k < len(srcs); k++ {
		if srcs[k] == dst {
			srcs[1], srcs[k] = srcs[k], srcs[1]
			break
		}
	}
	if len(srcs) == 1 {
		if err := lr.copyAsync(dst, a, n); err != nil {
			return err
		}
	}
	if len(srcs) > 1 {
		if err := lr.launchReduce(dst, srcs, n/t.Size(), t, rop); err != nil {
			return err
		}
	}
	if op.Code == plan.OpReduceSend || op.Code == plan.OpReadReduceSend {
		for k := 1; k < len(op.Dst); k++ {
			pr, err := lr.remote(&op.Dst[k], plan.Span{Offset: lr.span(op, op.Dst, ol.Dst, k, pipe, it).Offset, Length: n})
			if err != nil {
				return err
			}
			if err := lr.copyAsync(pr.mapped, dst, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// gpuMultiLoadReduceStore is glres on the device: the group's sources reduced into a
// lane buffer by kernels reading peers' memory, then copied to every destination.
func (lr *laneRun) gpuMultiLoadReduceStore(op *plan.Op, ol *plan.OpLayout, pipe *plan.Op, it uint64) error {
	r := lr.r
	g := r.x.gpu
	t, rop := r.c.DType, r.reduceOp(op)
	src := lr.span(op, op.Src, ol.Src, 0, pipe, it)
	dst := lr.span(op, op.Dst, ol.Dst, 0, pipe, it)
	n := src.Length
	if n%t.Size() != 0 {
		return fmt.Errorf("a %d-byte reduction of %d-byte %s elements: %w", n, t.Size(), t, plan.ErrMessageSize)
	}
	in := &lr.rk.SwitchChannels[op.Src[0].SwitchChannel]
	out := &lr.rk.SwitchChannels[op.Dst[0].SwitchChannel]
	acc := &r.ctx.gpu.tmp[lr.id]
	if *acc == 0 {
		p, err := g.d.MemAlloc(tmpBytes)
		if err != nil {
			return err
		}
		*acc = p
	}
	block := uint64(tmpBytes) / t.Size() * t.Size()
	srcs := make([]uintptr, len(in.Ranks))
	for off := uint64(0); off < n; off += block {
		m := min(block, n-off)
		for i, q := range in.Ranks {
			pr, err := lr.at(q, in.Buffer, plan.Span{Offset: src.Offset + off, Length: m})
			if err != nil {
				return err
			}
			srcs[i] = pr.mapped
		}
		var err error
		switch len(srcs) {
		case 0:
		case 1:
			err = lr.copyAsync(*acc, srcs[0], m)
		default:
			err = lr.launchReduce(*acc, srcs, m/t.Size(), t, rop)
		}
		if err != nil {
			return err
		}
		for _, q := range out.Ranks {
			pr, err := lr.at(q, out.Buffer, plan.Span{Offset: dst.Offset + off, Length: m})
			if err != nil {
				return err
			}
			if err := lr.copyAsync(pr.mapped, *acc, m); err != nil {
				return err
			}
		}
	}
	return nil
}
