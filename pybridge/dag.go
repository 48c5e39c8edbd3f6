package pybridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/trace"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/core"
	"github.com/ucxx-go/ucxx-go/core/dag"
	"github.com/ucxx-go/ucxx-go/core/execution"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// The computation DAG (core/dag, core/execution) for Python's ExecutionContext: one
// call per vertex, which returns its id at once. Accesses travel as arrays of
// execution.AccessDescriptor (address and count); kernel arguments as arrays of
// 8-byte slots. Python host functions run on Python threads that take ready vertices
// with DagTakeHost and end them with DagEndHost.

// dagContext is one ExecutionContext: the execution context, the lane of Python host
// functions, and the vertices Python may still ask about.
type dagContext struct {
	ctx *execution.Context
	py  *pythonLane

	mu      sync.Mutex
	live    map[dag.VertexID]*dag.Vertex // added; swept of successes as it grows
	failed  map[dag.VertexID]error       // the last failures, for DagWait after a sweep
	sweepAt int
	lastID  dag.VertexID
	kernels map[uint64]*execution.Kernel
	modules int
}

// maxFailures bounds the failures a context remembers for DagWait.
const maxFailures = 4096

var dagContexts struct {
	sync.Mutex
	next uint64
	byID map[uint64]*dagContext
}

func dagCtx(h uint64) (*dagContext, error) {
	dagContexts.Lock()
	defer dagContexts.Unlock()
	if c := dagContexts.byID[h]; c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("execution context %d is closed: %w", h, ucxx.ErrClosed)
}

// dagOptions is DagNew's options, as JSON.
type dagOptions struct {
	Execution       string `json:"execution"`        // async | sync
	Dependency      string `json:"dependency"`       // with-const | no-const
	NewStream       string `json:"new_stream"`       // fifo | always-new
	ParentStream    string `json:"parent_stream"`    // same-as-parent | disjoint | multigpu-early-disjoint | multigpu-disjoint
	DeviceSelection string `json:"device_selection"` // round-robin | stream-aware | min-transfer-size | minmin-transfer-time | minmax-transfer-time
	Devices         []int  `json:"devices"`
	MaxStreams      int    `json:"max_streams"`
	HostWorkers     int    `json:"host_workers"`
	Timings         bool   `json:"timings"`
	DOT             bool   `json:"dot"`
	Transfers       bool   `json:"transfers"` // through the running engine
}

// DagNew makes an execution context from options (JSON, see dagOptions) and returns
// its handle.
func DagNew(options string) (h uint64, err error) {
	defer guard(&err)
	var o dagOptions
	if err := json.Unmarshal([]byte(options), &o); err != nil {
		return 0, fmt.Errorf("DagNew: options: %v: %w", err, ucxx.StatusInvalidParam)
	}
	var g dag.Options
	if err := errors.Join(
		parsePolicy(o.Execution, dag.ParseExecutionPolicy, &g.Execution),
		parsePolicy(o.Dependency, dag.ParseDependencyPolicy, &g.Dependency),
		parsePolicy(o.NewStream, dag.ParseNewStreamPolicy, &g.NewStream),
		parsePolicy(o.ParentStream, dag.ParseParentStreamPolicy, &g.ParentStream),
		parsePolicy(o.DeviceSelection, dag.ParseDevicePolicy, &g.DeviceSelection),
	); err != nil {
		return 0, fmt.Errorf("DagNew: %v: %w", err, ucxx.StatusInvalidParam)
	}
	g.MaxStreamsPerDevice, g.HostLanes, g.Timings, g.DOT = o.MaxStreams, o.HostWorkers, o.Timings, o.DOT
	opts := execution.Options{Graph: g, Devices: o.Devices}
	if o.Transfers {
		if opts.Engine, err = current(); err != nil {
			return 0, err
		}
	}
	ctx, err := execution.New(opts)
	if err != nil {
		return 0, err
	}
	c := &dagContext{ctx: ctx, py: newPythonLane(), live: make(map[dag.VertexID]*dag.Vertex),
		failed: make(map[dag.VertexID]error), sweepAt: 1024, kernels: make(map[uint64]*execution.Kernel)}
	dagContexts.Lock()
	defer dagContexts.Unlock()
	if dagContexts.byID == nil {
		dagContexts.byID = make(map[uint64]*dagContext)
	}
	dagContexts.next++
	dagContexts.byID[dagContexts.next] = c
	return dagContexts.next, nil
}

// parsePolicy sets *dst to the policy named s, unless s is empty (the default).
func parsePolicy[T any](s string, parse func(string) (T, error), dst *T) error {
	if s == "" {
		return nil
	}
	v, err := parse(s)
	if err == nil {
		*dst = v
	}
	return err
}

// added records v for DagWait and returns its id; successes leave once the record
// has doubled since the last sweep.
func (c *dagContext) added(v *dag.Vertex, err error) (uint64, error) {
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live[v.ID()] = v
	c.lastID = max(c.lastID, v.ID())
	if len(c.live) >= c.sweepAt {
		for id, w := range c.live {
			switch w.State() {
			case dag.Done:
				delete(c.live, id)
			case dag.Failed:
				delete(c.live, id)
				if len(c.failed) < maxFailures {
					c.failed[id] = w.Err()
				}
			}
		}
		c.sweepAt = max(1024, 2*len(c.live))
	}
	return uint64(v.ID()), nil
}

// dagCtxAccesses returns context h and the n accesses described at addr.
func dagCtxAccesses(h uint64, addr uintptr, n int) (*dagContext, []dag.Access, error) {
	c, err := dagCtx(h)
	if err != nil {
		return nil, nil, err
	}
	a, err := accesses(addr, n)
	return c, a, err
}

func accesses(addr uintptr, n int) ([]dag.Access, error) {
	acc, err := execution.DecodeAccesses(addr, n)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", err, ucxx.StatusInvalidParam)
	}
	return acc, nil
}

// DagLoadModule loads a PTX or cubin image (n bytes at addr) on every GPU of context
// h and returns a handle for DagKernelOf.
func DagLoadModule(h uint64, addr uintptr, n int) (m uint64, err error) {
	defer guard(&err)
	c, err := dagCtx(h)
	if err != nil {
		return 0, err
	}
	image := make([]byte, n)
	ucxx.CopyFrom(image, addr)
	mod, err := c.ctx.LoadModule(image)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.modules++
	id := uint64(c.modules)
	moduleTable.Store(moduleKey{h, id}, mod)
	return id, nil
}

type moduleKey struct{ ctx, id uint64 }

var moduleTable sync.Map // moduleKey -> *execution.Module

var nextKernel atomic.Uint64

// DagKernelOf returns a handle for the kernel called name of module m.
func DagKernelOf(h uint64, m uint64, name string) (k uint64, err error) {
	defer guard(&err)
	c, err := dagCtx(h)
	if err != nil {
		return 0, err
	}
	mod, ok := moduleTable.Load(moduleKey{h, m})
	if !ok {
		return 0, fmt.Errorf("DagKernelOf: no module %d: %w", m, ucxx.StatusNoElem)
	}
	kern, err := mod.(*execution.Module).Kernel(name)
	if err != nil {
		return 0, err
	}
	id := nextKernel.Add(1)
	c.mu.Lock()
	c.kernels[id] = kern
	c.mu.Unlock()
	return id, nil
}

// DagLaunch adds a launch of kernel k with a grid and block (x, y, z each), shared
// bytes of dynamic shared memory, nargs 8-byte argument slots at args, and nacc
// accesses at acc.
func DagLaunch(h, k uint64, gx, gy, gz, bx, by, bz, shared int, args uintptr, nargs int, acc uintptr, nacc int) (vid uint64, err error) {
	defer guard(&err)
	defer trace.StartRegion(context.Background(), "DagLaunch").End()
	c, err := dagCtx(h)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	kern := c.kernels[k]
	c.mu.Unlock()
	if kern == nil {
		return 0, fmt.Errorf("DagLaunch: no kernel %d: %w", k, ucxx.StatusNoElem)
	}
	if nargs < 0 || nargs > ucxx.MaxKernelArgs || (nargs > 0 && args == 0) {
		return 0, fmt.Errorf("DagLaunch: %d arguments: %w", nargs, ucxx.StatusInvalidParam)
	}
	a, err := accesses(acc, nacc)
	if err != nil {
		return 0, err
	}
	slots := make([]uint64, nargs)
	if nargs > 0 {
		ucxx.CopyFrom(unsafe.Slice((*byte)(unsafe.Pointer(&slots[0])), 8*nargs), args)
	}
	shape := ucxx.LaunchShape{Grid: [3]uint32{uint32(gx), uint32(gy), uint32(gz)}, Block: [3]uint32{uint32(bx), uint32(by), uint32(bz)}, SharedBytes: uint32(shared)}
	return c.added(c.ctx.Launch(kern.Name, &execution.KernelLaunch{Kernel: kern, Shape: shape, Args: slots}, a))
}

// DagCopy adds a copy of n bytes from src to dst (on a GPU stream when gpu).
func DagCopy(h uint64, dst, src uintptr, n uint64, gpu bool, acc uintptr, nacc int) (vid uint64, err error) {
	defer guard(&err)
	defer trace.StartRegion(context.Background(), "DagCopy").End()
	c, a, err := dagCtxAccesses(h, acc, nacc)
	if err != nil {
		return 0, err
	}
	return c.added(c.ctx.Copy(dst, src, n, gpu, a))
}

// DagReduce adds a reduction of n elements of dtype at src into dst (array dstArray)
// with op (execution.Dtype, execution.ReduceOp).
func DagReduce(h uint64, dstArray uint64, dst, src uintptr, n uint64, dtype, op int, acc uintptr, nacc int) (vid uint64, err error) {
	defer guard(&err)
	c, a, err := dagCtxAccesses(h, acc, nacc)
	if err != nil {
		return 0, err
	}
	return c.added(c.ctx.Reduce(dag.ArrayID(dstArray), dst, src, n, execution.Dtype(dtype), execution.ReduceOp(op), a))
}

// DagHost adds a Python host function's vertex: a Python thread takes it with
// DagTakeHost once its accesses are safe, runs the function and ends it with
// DagEndHost.
func DagHost(h uint64, acc uintptr, nacc int) (vid uint64, err error) {
	defer guard(&err)
	c, a, err := dagCtxAccesses(h, acc, nacc)
	if err != nil {
		return 0, err
	}
	return c.added(c.ctx.Host("python", nil, c.py, nil, a))
}

// DagTakeHost waits up to timeoutMs (negative: without limit) for a Python host
// vertex that may run and returns its id; 0 on timeout; an error wrapping
// ucxx.ErrClosed once the context is closing.
func DagTakeHost(h uint64, timeoutMs int) (vid uint64, err error) {
	defer guard(&err)
	c, err := dagCtx(h)
	if err != nil {
		return 0, err
	}
	return c.py.take(timeoutMs)
}

// DagEndHost ends Python host vertex vid: with failure "" it succeeded, otherwise it
// failed with that message.
func DagEndHost(h uint64, vid uint64, failure string) (ok bool, err error) {
	defer guard(&err)
	c, err := dagCtx(h)
	if err != nil {
		return false, err
	}
	var verr error
	if failure != "" {
		verr = errors.New(failure)
	}
	return true, c.py.end(dag.VertexID(vid), verr)
}

// transferAccess is the access list of a transfer vertex.
func (c *dagContext) transfer(name string, w execution.TransferWork, acc uintptr, nacc int) (uint64, error) {
	a, err := accesses(acc, nacc)
	if err != nil {
		return 0, err
	}
	return c.added(c.ctx.Transfer(name, w, a))
}

// DagPut adds a put of n bytes at addr (memType, core's) to offset of remote key key
// on endpoint ep.
func DagPut(h, ep, key, offset uint64, addr uintptr, n uint64, memType int, acc uintptr, nacc int) (vid uint64, err error) {
	defer guard(&err)
	c, err := dagCtx(h)
	if err != nil {
		return 0, err
	}
	return c.transfer("put", &execution.Put{EP: ep, T: core.Transfer{Key: key, Offset: offset, Addr: addr, Size: n, MemType: uint8(memType)}}, acc, nacc)
}

// DagGet adds a get of n bytes at offset of remote key key on endpoint ep into addr.
func DagGet(h, ep, key, offset uint64, addr uintptr, n uint64, memType int, acc uintptr, nacc int) (vid uint64, err error) {
	defer guard(&err)
	c, err := dagCtx(h)
	if err != nil {
		return 0, err
	}
	return c.transfer("get", &execution.Get{EP: ep, T: core.Transfer{Key: key, Offset: offset, Addr: addr, Size: n, MemType: uint8(memType)}}, acc, nacc)
}

// DagSend adds a tag send of n bytes at addr (UCS memory type ucsMem) on endpoint ep.
func DagSend(h, ep uint64, addr uintptr, n uint64, tag uint64, ucsMem int, acc uintptr, nacc int) (vid uint64, err error) {
	defer guard(&err)
	c, err := dagCtx(h)
	if err != nil {
		return 0, err
	}
	return c.transfer("send", &execution.Send{EP: ep, Addr: addr, Size: n, Tag: tag, MemType: ucsMem}, acc, nacc)
}

// DagRecv adds a tag receive of up to n bytes into addr on endpoint ep.
func DagRecv(h, ep uint64, addr uintptr, n uint64, tag, mask uint64, ucsMem int, acc uintptr, nacc int) (vid uint64, err error) {
	defer guard(&err)
	c, err := dagCtx(h)
	if err != nil {
		return 0, err
	}
	return c.transfer("recv", &execution.Recv{EP: ep, Addr: addr, Size: n, Tag: tag, Mask: mask, MemType: ucsMem}, acc, nacc)
}

// DagAccess blocks until the host may access the ranges of the nacc accesses at acc.
func DagAccess(h uint64, acc uintptr, nacc int) (ok bool, err error) {
	defer guard(&err)
	c, a, err := dagCtxAccesses(h, acc, nacc)
	if err != nil {
		return false, err
	}
	return true, c.ctx.Access(context.Background(), a)
}

// maxWaitMs is the longest bounded DagWait (~30 years); a longer one waits without
// limit.
const maxWaitMs = 1_000_000_000_000

// DagWait blocks until vertex vid has finished, or for at most timeoutMs
// milliseconds (negative, or over maxWaitMs: without limit); its failure is the error.
//
// Errors: the vertex's failure; one wrapping ucxx.StatusTimedOut when the time ran
// out first; ucxx.StatusNoElem for an id the context never returned.
func DagWait(h uint64, vid uint64, timeoutMs int) (ok bool, err error) {
	defer guard(&err)
	c, err := dagCtx(h)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	v, live := c.live[dag.VertexID(vid)]
	ferr, failed := c.failed[dag.VertexID(vid)]
	known := dag.VertexID(vid) <= c.lastID
	c.mu.Unlock()
	switch {
	case live:
		ctx := context.Background()
		if timeoutMs >= 0 && timeoutMs <= maxWaitMs {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(timeoutMs)*time.Millisecond)
			defer cancel()
		}
		if err := v.Wait(ctx); err != nil {
			select {
			case <-v.Done(): // finished: err is its failure
			default:
				return false, fmt.Errorf("DagWait: vertex %d not finished within %d ms: %w", vid, timeoutMs, ucxx.StatusTimedOut)
			}
			return false, err
		}
		return true, nil
	case failed:
		return false, ferr
	case known:
		return true, nil // finished well, and swept
	}
	return false, fmt.Errorf("DagWait: no vertex %d: %w", vid, ucxx.StatusNoElem)
}

// DagSynchronize blocks until every vertex added so far has finished.
func DagSynchronize(h uint64) (ok bool, err error) {
	defer guard(&err)
	c, err := dagCtx(h)
	if err != nil {
		return false, err
	}
	return true, c.ctx.Synchronize(context.Background())
}

// DagDescribeArray tells the context where array aid's memory is (n bytes at addr)
// and where its newest copy is: device, a CUDA ordinal of the context's GPUs, or -1
// for the host (execution.Context.DescribeArray).
func DagDescribeArray(h, aid uint64, addr uintptr, n uint64, device int) (ok bool, err error) {
	defer guard(&err)
	c, err := dagCtx(h)
	if err != nil {
		return false, err
	}
	return true, c.ctx.DescribeArray(dag.ArrayID(aid), addr, n, device)
}

// DagForgetArray drops what DagDescribeArray recorded of array aid (its memory is
// going away). A closed context has nothing to forget: no error.
func DagForgetArray(h, aid uint64) (ok bool, err error) {
	defer guard(&err)
	c, err := dagCtx(h)
	if err != nil {
		return false, nil
	}
	c.ctx.ForgetArray(dag.ArrayID(aid))
	return true, nil
}

// DagResources returns "streams events modules word_pages" the context holds.
func DagResources(h uint64) (res string, err error) {
	defer guard(&err)
	c, err := dagCtx(h)
	if err != nil {
		return "", err
	}
	r := c.ctx.Resources()
	return fmt.Sprintf("%d %d %d %d", r.Streams, r.Events, r.Modules, r.WordPages), nil
}

// DagDOT returns the context's DAG as Graphviz DOT (made with the dot option).
func DagDOT(h uint64) (dot string, err error) {
	defer guard(&err)
	c, err := dagCtx(h)
	if err != nil {
		return "", err
	}
	var b bytesBuffer
	if err := c.ctx.Graph().WriteDOT(&b); err != nil {
		return "", err
	}
	return string(b), nil
}

// DagVertexTimes returns "start_ns stop_ns gpu_ns" of vertex vid (timings on; 0 where
// unknown).
func DagVertexTimes(h uint64, vid uint64) (res string, err error) {
	defer guard(&err)
	c, err := dagCtx(h)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	v := c.live[dag.VertexID(vid)]
	c.mu.Unlock()
	if v == nil {
		return "0 0 0", nil
	}
	start, stop := v.Times()
	gpu, _ := execution.GPUTime(v)
	var s, e int64
	if !start.IsZero() {
		s, e = start.UnixNano(), stop.UnixNano()
	}
	return fmt.Sprintf("%d %d %d", s, e, gpu.Nanoseconds()), nil
}

// DagClose closes context h: Python host vertices not taken yet fail, transfers in
// flight are cancelled, everything else runs to its end, and every stream, event,
// module and word is released.
func DagClose(h uint64) (ok bool, err error) {
	defer guard(&err)
	c, err := dagCtx(h)
	if err != nil {
		return false, err
	}
	c.py.close()
	err = c.ctx.Close()
	dagContexts.Lock()
	delete(dagContexts.byID, h)
	dagContexts.Unlock()
	moduleTable.Range(func(k, _ any) bool {
		if k.(moduleKey).ctx == h {
			moduleTable.Delete(k)
		}
		return true
	})
	return err == nil, err
}

// bytesBuffer is an io.Writer into a byte slice.
type bytesBuffer []byte

func (b *bytesBuffer) Write(p []byte) (int, error) { *b = append(*b, p...); return len(p), nil }
