package execution

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/ucxx-go/ucxx-go/core"
	"github.com/ucxx-go/ucxx-go/core/dag"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Errors of a Context.
var (
	// ErrClosed: the context was closed.
	ErrClosed = fmt.Errorf("execution: context closed: %w", os.ErrClosed)
	// ErrNoGPU: GPU work on a context made without devices.
	ErrNoGPU = errors.New("execution: the context has no GPU")
	// ErrNoEngine: a transfer on a context made without an engine.
	ErrNoEngine = errors.New("execution: the context has no engine for transfers")
)

// roundRobinFallback sets dag.Options.RoundRobinFallback in every context
// (UCXGO_DAG_FALLBACK=round-robin when the process starts: GrCUDA's own fallback,
// for measuring against it).
var roundRobinFallback = os.Getenv("UCXGO_DAG_FALLBACK") == "round-robin"

// Options configure a Context.
type Options struct {
	// Graph holds the DAG's policies (execution, dependency, streams, devices,
	// timings, DOT, host workers). New fills in its GPUs, lanes and stream pool.
	Graph dag.Options
	// Devices are the CUDA device ordinals GPU vertices are placed on, in the DAG's
	// GPU numbering; none: a host-only context.
	Devices []int
	// Engine posts transfer vertices; nil: the context takes no transfers.
	Engine *core.Engine
}

// Context is a DAG with its lanes: one per GPU (CUDA streams), the host workers, and
// transfers through an engine. Its methods may be called from any goroutine; each
// adds one vertex and returns at once.
type Context struct {
	graph  *dag.Graph
	gpus   []*gpuLane
	xfer   *transferLane
	drv    *ucxx.CUDADriver
	res    resources
	arrays arrayTable
	launch *dag.Launcher[*gpuLane] // the GPU lanes' deferred vertices (launcher.go)

	mu      sync.Mutex
	closed  bool
	modules []*Module
}

// New makes a context.
//
// Errors: the DAG's option errors; ucxx.ErrNoCUDA and CUDA's errors when Devices are
// given.
func New(opts Options) (_ *Context, err error) {
	c := &Context{launch: newLauncher()}
	defer func() {
		if err != nil {
			c.closeLanes()
		}
	}()
	g := opts.Graph
	if len(opts.Devices) > 0 {
		if c.drv, err = ucxx.CUDA(); err != nil {
			return nil, err
		}
		for _, ord := range opts.Devices {
			l, err := newGPULane(c.drv, ord, g.Timings, &c.res, &c.arrays, c.launch)
			if err != nil {
				return nil, err
			}
			c.gpus = append(c.gpus, l)
		}
		if err := enablePeerAccess(c.gpus); err != nil {
			return nil, err
		}
		g.GPUs = len(c.gpus)
		g.GPULanes = make([]dag.Lane, len(c.gpus))
		for i, l := range c.gpus {
			g.GPULanes[i] = l
		}
		g.StreamPool = gpuStreams(c.gpus)
		if g.Bandwidth == nil && len(c.gpus) > 1 {
			if links := deviceLinks(c.drv, opts.Devices); links != nil {
				g.Bandwidth = bandwidthMatrix(links)
			}
		}
		if g.Bandwidth == nil {
			g.Bandwidth = uniformBandwidth(len(c.gpus))
		}
	} else {
		g.GPUs, g.GPULanes, g.StreamPool = 0, nil, nil
	}
	if opts.Engine != nil {
		var cu ucxx.CUDAContext
		if len(c.gpus) > 0 {
			cu = c.gpus[0].cu
		}
		c.xfer = newTransferLane(opts.Engine, c.drv, cu, &c.res)
		g.TransferLane = c.xfer
	} else {
		g.TransferLane = nil
	}
	g.RoundRobinFallback = g.RoundRobinFallback || roundRobinFallback
	if c.graph, err = dag.New(g); err != nil {
		return nil, err
	}
	return c, nil
}

// gpuStreams is the DAG's StreamPool over the lanes: each device's streams come from
// its lane.
type gpuStreams []*gpuLane

func (s gpuStreams) NewStream(device int) (uintptr, error) { return s[device].NewStream(device) }

// uniformBandwidth is a bandwidth matrix that makes every link alike, for transfer-time
// policies when the caller gives none.
func uniformBandwidth(gpus int) *dag.BandwidthMatrix {
	m := dag.NewBandwidthMatrix(gpus)
	for i := -1; i < gpus; i++ {
		for j := -1; j < gpus; j++ {
			if i != j {
				m.Set(i, j, 1)
			}
		}
	}
	return m
}

// Graph is the context's DAG (for DOT export, statistics, waiting on vertices).
func (c *Context) Graph() *dag.Graph { return c.graph }

// GPUs is the number of GPUs the context places work on.
func (c *Context) GPUs() int { return len(c.gpus) }

// Resources counts the CUDA streams and events, modules and done-word pages the
// context holds.
func (c *Context) Resources() Resources { return c.res.snapshot() }

// add adds a vertex, refusing after Close.
func (c *Context) add(t dag.Task) (*dag.Vertex, error) {
	return c.graph.Add(t)
}

// Launch adds a kernel launch that accesses acc.
//
// Errors: ErrNoGPU, the DAG's (ErrClosed after Close, a malformed access).
func (c *Context) Launch(name string, k *KernelLaunch, acc []dag.Access) (*dag.Vertex, error) {
	if len(c.gpus) == 0 {
		return nil, ErrNoGPU
	}
	if len(k.Args) > ucxx.MaxKernelArgs {
		return nil, fmt.Errorf("execution: kernel %q: %d arguments, at most %d", name, len(k.Args), ucxx.MaxKernelArgs)
	}
	return c.add(dag.Task{Name: name, Kind: dag.KindGPU, Accesses: acc, Payload: k})
}

// Copy adds a copy of n bytes from src to dst, which accesses acc (the source range
// read, the destination range written). With device memory on either side (onGPU) it
// runs on a GPU stream, else on a host worker; so does a copy between a device of the
// context and pageable host memory, which cuMemcpyAsync cannot queue without blocking
// (gpuLane.copyStaged).
func (c *Context) Copy(dst, src uintptr, n uint64, onGPU bool, acc []dag.Access) (*dag.Vertex, error) {
	if onGPU {
		if len(c.gpus) == 0 {
			return nil, ErrNoGPU
		}
		l, managedDst := c.copySides(dst, src)
		if l != nil {
			return c.add(dag.Task{Name: "copy", Kind: dag.KindHost, Accesses: acc,
				Run: func() error { return l.copyStaged(dst, src, n) }})
		}
		// Into managed memory mapped on every GPU, the copy engine writes the pages
		// where they lie: no prefetch, and the location model leaves them there.
		mapped := managedDst && c.writesMapped(acc)
		return c.add(dag.Task{Name: "copy", Kind: dag.KindGPU, Accesses: acc, WritesInPlace: mapped,
			Payload: &DeviceCopy{Dst: dst, Src: src, N: n, ManagedDst: managedDst && !mapped}})
	}
	return c.add(dag.Task{Name: "copy", Kind: dag.KindHost, Accesses: acc, Run: hostCopy(dst, src, n)})
}

// copySides looks at a copy's two sides: staged is the lane of the device on one side
// where the other is pageable host memory (nil otherwise), managedDst whether the
// destination is managed memory.
func (c *Context) copySides(dst, src uintptr) (staged *gpuLane, managedDst bool) {
	d, errD := c.drv.Pointer(dst)
	s, errS := c.drv.Pointer(src)
	if errD != nil || errS != nil {
		return nil, false // the stream copy reports what is wrong
	}
	dev := -1
	switch {
	case d.IsCUDA && !d.Managed && !s.IsCUDA && !s.Pinned:
		dev = d.Device
	case s.IsCUDA && !s.Managed && !d.IsCUDA && !d.Pinned:
		dev = s.Device
	}
	if i := c.laneIndex(dev); dev >= 0 && i >= 0 {
		return c.gpus[i], false
	}
	return nil, d.IsCUDA && d.Managed
}

// Reduce adds a reduction of n elements of t at src into dst (host memory) with op;
// acc reads the source and reduces (dag.Reduce) into the destination of array dstArray,
// so reductions into one range run in any order.
func (c *Context) Reduce(dstArray dag.ArrayID, dst, src uintptr, n uint64, t Dtype, op ReduceOp, acc []dag.Access) (*dag.Vertex, error) {
	run, err := hostReduce(dstArray, dst, src, n, t, op)
	if err != nil {
		return nil, err
	}
	return c.add(dag.Task{Name: "reduce", Kind: dag.KindHost, Accesses: acc, Run: run})
}

// Host adds a host function that accesses acc, run by the host workers (or by lane
// when not nil: a lane of the caller's, such as one that hands the function to
// another runtime).
func (c *Context) Host(name string, run func() error, lane dag.Lane, payload any, acc []dag.Access) (*dag.Vertex, error) {
	return c.add(dag.Task{Name: name, Kind: dag.KindHost, Accesses: acc, Run: run, Lane: lane, Payload: payload})
}

// Transfer adds a transfer that accesses acc (a put or send reads its buffer, a get
// or receive writes it).
//
// Errors: ErrNoEngine, the DAG's.
func (c *Context) Transfer(name string, w TransferWork, acc []dag.Access) (*dag.Vertex, error) {
	if c.xfer == nil {
		return nil, ErrNoEngine
	}
	return c.add(dag.Task{Name: name, Kind: dag.KindTransfer, Accesses: acc, Payload: w})
}

// Access blocks until the host may access acc: the vertices that write those ranges
// (and, for a write, those that read them) have finished. It is a vertex too, so work
// added later waits for the host's access only through its declared ranges.
//
// Errors: ctx's, ErrClosed, the failure of a vertex the access waited for.
func (c *Context) Access(ctx context.Context, acc []dag.Access) error {
	v, err := c.add(dag.Task{Name: "host access", Kind: dag.KindHost, Accesses: acc})
	if err != nil {
		return err
	}
	return v.Wait(ctx)
}

// Synchronize blocks until every vertex added before and during the call finished.
func (c *Context) Synchronize(ctx context.Context) error { return c.graph.Wait(ctx) }

// Close ends the context: transfers still in flight are cancelled (and those not
// started yet end cancelled), every other vertex runs to its end, then streams,
// events, modules and done words are released. A second Close returns an error
// wrapping os.ErrClosed.
func (c *Context) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("execution: close: %w", os.ErrClosed)
	}
	c.closed = true
	mods := c.modules
	c.modules = nil
	c.mu.Unlock()
	closed := make(chan error, 1)
	go func() { closed <- c.graph.Close() }()
	var err error
	for waiting := true; waiting; {
		if c.xfer != nil {
			c.xfer.cancelAll()
		}
		select {
		case err = <-closed:
			waiting = false
		case <-time.After(10 * time.Millisecond): // cancel what started meanwhile
		}
	}
	errs := []error{err}
	for _, m := range mods {
		errs = append(errs, m.unload())
	}
	errs = append(errs, c.closeLanes())
	return errors.Join(errs...)
}

// closeLanes stops and frees the lanes.
func (c *Context) closeLanes() error {
	var errs []error
	if c.xfer != nil {
		errs = append(errs, c.xfer.close())
	}
	for _, l := range c.gpus {
		errs = append(errs, l.close())
	}
	return errors.Join(errs...)
}
