package core

import (
	"fmt"
	"sync"

	"github.com/ucxx-go/ucxx-go/core/topology"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// CUDA buffers. Nothing here runs, and CUDA is never loaded, until the application
// hands the engine a buffer it says is CUDA memory, or a peer sends CUDA frames.
//
// Three things make CUDA transfers right:
//   - Stream order. A buffer's producer may still be writing it on a stream. The
//     submitting thread records an event on that stream (the stream
//     __cuda_array_interface__ names), and the progress thread posts the operation only
//     once the event is done. Only that stream's work is waited for, never the device,
//     and nobody blocks: the progress thread polls the event between its other work
//     (GrCUDA's dependency-aware scheduling, at the scale of one stream). While a
//     submission waits, those queued after it wait too (gated, in order): messages on
//     one tag must be posted in the order they were sent.
//   - The context. UCX's CUDA transports act in the progress thread's current context,
//     so before a CUDA operation the progress thread makes the buffer's device's
//     primary context current (the context CuPy, PyTorch and RMM use), and no context
//     is created on any other device.
//   - Received frames. A multi-buffer message's CUDA frames are allocated on the
//     engine's CUDA device (the device of the last CUDA buffer submitted, else
//     Options.CUDADevice) and handed to the application, which frees them with
//     FreeCUDA.

// primaryContexts holds one reference on the primary context of each device the
// process used, for its whole life: frames received into a device must stay freeable
// (FreeCUDA) after the engine that allocated them is gone, and the application holds
// the same contexts anyway.
var primaryContexts struct {
	sync.Mutex
	byDevice map[int]ucxx.CUDAContext
}

// primaryContext returns device's primary context, retaining it on first use.
func primaryContext(drv *ucxx.CUDADriver, device int) (ucxx.CUDAContext, error) {
	primaryContexts.Lock()
	defer primaryContexts.Unlock()
	if c, ok := primaryContexts.byDevice[device]; ok {
		return c, nil
	}
	c, err := drv.RetainPrimary(device)
	if err != nil {
		return ucxx.CUDAContext{}, err
	}
	if primaryContexts.byDevice == nil {
		primaryContexts.byDevice = make(map[int]ucxx.CUDAContext)
	}
	primaryContexts.byDevice[device] = c
	return c, nil
}

// primeCUDA puts the allocation behind [addr, addr+size) in UCX's memory-type cache
// if it is device memory (ucxx.PrimeCUDA). Application thread.
func primeCUDA(addr uintptr, size uint64) error {
	drv, err := ucxx.CUDA()
	if err != nil {
		return fmt.Errorf("core: a CUDA buffer, but %w", err)
	}
	p, err := drv.Pointer(addr)
	if err != nil {
		return err
	}
	_, err = drv.PrimeCUDA(addr, size, p)
	return err
}

// cudaBuffers is what a submission with CUDA buffers waits for: the events their
// producing streams must reach before UCX may touch them, and the device whose
// context the progress thread needs. The zero value: no CUDA buffer.
type cudaBuffers struct {
	device int // ordinal + 1 of the (first) buffer's device; 0: no CUDA buffer
	events []ucxx.CUDAEvent
}

// add checks that addr is device memory, puts its allocation in UCX's memory-type
// cache (ucxx.PrimeCUDA: UCX must find it there, and not ask CUDA on the progress
// thread) and, when stream is not 0 and still has work queued, records an event on it
// (ucxx.CUDAContext.MarkStream). Application thread.
func (b *cudaBuffers) add(addr uintptr, size uint64, stream uintptr) error {
	drv, err := ucxx.CUDA()
	if err != nil {
		return fmt.Errorf("core: a CUDA buffer, but %w", err)
	}
	if addr == 0 {
		return nil // an empty buffer: nothing to wait for or to move
	}
	p, err := drv.Pointer(addr)
	if err != nil {
		return err
	}
	if !p.IsCUDA {
		return fmt.Errorf("%w (address %#x)", ErrNotCUDA, addr)
	}
	if _, err := drv.PrimeCUDA(addr, size, p); err != nil {
		return err
	}
	if b.device == 0 {
		b.device = p.Device + 1
	}
	if stream != 0 {
		ctx, err := primaryContext(drv, p.Device)
		if err != nil {
			return err
		}
		ev, err := ctx.MarkStream(stream)
		if err != nil {
			return err
		}
		if !ev.IsZero() { // a stream with work still queued
			b.events = append(b.events, ev)
		}
	}
	return nil
}

// done reports whether every event is done, destroying them once they are. An event
// that fails to query cannot become done: it counts as done, and UCX reports.
func (b *cudaBuffers) done() bool {
	for _, ev := range b.events {
		if done, err := ev.Done(); !done && err == nil {
			return false
		}
	}
	b.release()
	return true
}

// release destroys the events (shutdown, or a submission that failed).
func (b *cudaBuffers) release() {
	for _, ev := range b.events {
		ev.Destroy()
	}
	b.events = nil
}

// addCUDA prepares a submission whose buffer the caller says is CUDA memory.
func (s *submission) addCUDA(stream uintptr) error {
	if s.memType != ucxx.MemoryCUDA {
		return nil
	}
	if err := s.cuda.add(s.addr, s.size, stream); err != nil {
		s.cuda.release()
		return err
	}
	return nil
}

// submitOrRelease submits s, destroying its stream events if it cannot be queued.
func (e *Engine) submitOrRelease(s submission) error {
	err := e.submit(s)
	if err != nil {
		s.cuda.release()
	}
	return err
}

// cudaGate is the progress thread's CUDA state: the current context, the device
// received frames go to, and the submissions gated on stream events. It knows nothing
// of UCX: what passes the gate goes to post. Progress thread only.
type cudaGate struct {
	post          func(*submission) // dispatches a submission that passed
	defaultDevice int               // Options.CUDADevice
	noAffinity    bool              // Options.NoGPUAffinity

	drv     *ucxx.CUDADriver
	current int // ordinal + 1 of the device whose context is current; 0: none
	device  int // ordinal + 1 of the device received frames are allocated on; 0: not chosen
	gated   []submission
	pinned  bool  // pinNearGPU ran
	cpus    []int // the CPUs the progress thread was pinned to, if it was
	// nearCPUs brings the NVML lookup's answer (the CPUs near the GPU, nil for none)
	// to pinWhenKnown; nil once taken, or when no lookup runs.
	nearCPUs chan []int
}

// ready reports whether s may be dispatched: its stream event is done, and its
// device's context is current.
func (c *cudaGate) ready(s *submission) bool {
	if s.cuda.device == 0 {
		return true
	}
	if !s.cuda.done() {
		return false
	}
	c.useDevice(s.cuda.device - 1)
	return true
}

// useDevice makes device's primary context current on the progress thread. A failure
// leaves the thread as it was; UCX then fails the operation with its own status.
func (c *cudaGate) useDevice(device int) {
	c.device = device + 1
	if c.current == device+1 {
		return
	}
	if c.drv == nil {
		drv, err := ucxx.CUDA()
		if err != nil {
			return
		}
		c.drv = drv
	}
	ctx, err := primaryContext(c.drv, device)
	if err != nil {
		return
	}
	if ctx.MakeCurrent() == nil {
		c.current = device + 1
		c.pinNearGPU(device)
	}
}

// pass posts s now if nothing is gated and s is ready, else queues it behind the
// gated submissions. Once the engine is closing nothing waits: the stop queued behind
// must run, and it cancels what was posted.
func (c *cudaGate) pass(s *submission, closing bool) {
	if closing {
		c.release(true) // empty unless closing began during this batch
		c.forceReady(s)
		c.post(s)
		return
	}
	if len(c.gated) == 0 && c.ready(s) {
		c.post(s)
		return
	}
	c.gated = append(c.gated, *s)
}

// waiting reports whether submissions wait for stream events.
func (c *cudaGate) waiting() bool { return len(c.gated) > 0 }

// forceReady makes s ready without waiting for its streams.
func (c *cudaGate) forceReady(s *submission) {
	if s.cuda.device != 0 {
		s.cuda.release()
		c.useDevice(s.cuda.device - 1)
	}
}

// release posts gated submissions, in order, while they are ready; with force
// (shutdown), all of them without waiting.
func (c *cudaGate) release(force bool) {
	g := c.gated
	i := 0
	for ; i < len(g) && (force || c.ready(&g[i])); i++ {
		if force {
			c.forceReady(&g[i])
		}
		c.post(&g[i])
		g[i] = submission{}
	}
	if i > 0 {
		n := copy(g, g[i:])
		clear(g[n:])
		c.gated = g[:n]
	}
}

// alloc allocates a received frame on the engine's CUDA device.
func (c *cudaGate) alloc(size uint64) (uintptr, error) {
	device := c.defaultDevice
	if c.device != 0 {
		device = c.device - 1
	}
	c.useDevice(device)
	if c.current != device+1 {
		return 0, fmt.Errorf("core: no CUDA context on device %d", device)
	}
	if size == 0 {
		size = 1 // a distinct, freeable address for an empty frame
	}
	p, err := c.drv.MemAlloc(size)
	if err != nil {
		return 0, err
	}
	if _, err := c.drv.PrimeCUDA(p, size, ucxx.CUDAPointer{IsCUDA: true, Device: device}); err != nil {
		c.drv.MemFree(p)
		return 0, err
	}
	return p, nil
}

// frameType is the block record's memory type word of a frame alloc allocated.
func (c *cudaGate) frameType() uint64 { return cudaFrameType(c.current - 1) }

// free frees frames alloc allocated, in the context they were allocated in (still
// current).
func (c *cudaGate) free(frames []uintptr) {
	for _, p := range frames {
		c.drv.MemFree(p)
	}
}

// FreeCUDA frees a CUDA frame a multi-buffer receive allocated, from any thread, with
// or without an engine: the memory belongs to the device's primary context, which the
// process keeps.
func FreeCUDA(device int, ptr uintptr) error {
	ctx, err := devicePrimaryContext(device)
	if err != nil {
		return err
	}
	return ctx.MemFree(ptr)
}

// CopyCUDAToHost copies n bytes of a CUDA frame a multi-buffer receive allocated on
// device to the host address dst, from any thread, as FreeCUDA.
func CopyCUDAToHost(device int, dst, src uintptr, n uint64) error {
	ctx, err := devicePrimaryContext(device)
	if err != nil {
		return err
	}
	return ctx.CopyToHost(dst, src, n)
}

// devicePrimaryContext is device's primary context, loading the driver if needed.
func devicePrimaryContext(device int) (ucxx.CUDAContext, error) {
	drv, err := ucxx.CUDA()
	if err != nil {
		return ucxx.CUDAContext{}, err
	}
	return primaryContext(drv, device)
}

// pinNearGPU binds the progress thread, once, to the CPUs NVML reports close to
// device, as MSCCL++ binds its proxy thread to its GPU's NUMA node: the thread that
// drives the GPU's transfers then runs where its memory traffic is short. The device
// is found in NVML by PCI bus id (CUDA's ordinals and NVML's indexes may differ).
// The lookup (NVML's start and a walk over every GPU, ~10 ms) runs on a goroutine of
// its own, off the path of the transfer that made the device current: the thread
// pins itself when it next dispatches after the answer came (pinWhenKnown). Nothing
// happens when NVML or the bus id is unavailable, or Options.NoGPUAffinity.
func (c *cudaGate) pinNearGPU(device int) {
	if c.noAffinity || c.pinned {
		return
	}
	c.pinned = true
	bus, err := c.drv.PCIBusID(device)
	if err != nil {
		return
	}
	near := make(chan []int, 1)
	c.nearCPUs = near
	go func() {
		cpus, _ := topology.CPUsNearGPU(bus)
		near <- cpus
	}()
}

// pinWhenKnown pins the calling thread (the progress thread: it dispatches) to the
// CPUs pinNearGPU's lookup found, once its answer is in; a look at a nil channel
// otherwise.
func (c *cudaGate) pinWhenKnown() {
	if c.nearCPUs == nil {
		return
	}
	select {
	case cpus := <-c.nearCPUs:
		c.nearCPUs = nil
		if len(cpus) > 0 && topology.PinThreadToCPUs(cpus) == nil {
			c.cpus, _ = topology.ThreadCPUs()
		}
	default:
	}
}
