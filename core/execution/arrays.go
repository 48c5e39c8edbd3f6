package execution

import (
	"errors"
	"fmt"
	"sync"

	"github.com/ucxx-go/ucxx-go/core/dag"
)

// The context's arrays, as far as moving their ranges needs them. The DAG knows
// arrays by id and byte range only; its LocationTracker says where the newest copy of
// each range is, and each GPU vertex carries the ranges it needs that are elsewhere
// (Vertex.Moves). The lanes act on a move where it helps:
//
//   - managed memory: the range is prefetched to the vertex's device on its stream,
//     after the waits for its parents and before its work (GrCUDA's arrays are managed
//     memory, and its AsyncArrayPrefetcher, runtime/computation/prefetch, prefetches
//     a computation's arrays on the computation's stream; it prefetches whole arrays,
//     this the byte ranges the vertex needs). With several GPUs a managed array
//     may also be mapped on each of them (mapManaged: every array, or the
//     destinations of copies), so that what is not prefetched is reached where it
//     lies instead of faulted over;
//   - device memory: nothing moves; the vertex reaches the other GPU's memory through
//     peer access, which the context enables between its GPUs where they support it;
//   - host memory: nothing moves; kernels reach only host memory mapped for them.

// arrayInfo is what the context knows of a described array.
type arrayInfo struct {
	base    uintptr
	size    uint64
	managed bool
	mapped  bool   // managed, and advised accessed by every GPU of the context (mapManaged)
	refused bool   // the advice failed once (not asked again for this description)
	gen     uint64 // the description's generation (arrayTable.set numbers them)
}

// arrayTable maps array ids to their memory; safe for concurrent use.
type arrayTable struct {
	mu     sync.RWMutex
	arrays map[dag.ArrayID]arrayInfo
	gen    uint64
}

func (t *arrayTable) set(id dag.ArrayID, info arrayInfo) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.arrays == nil {
		t.arrays = make(map[dag.ArrayID]arrayInfo)
	}
	t.gen++
	info.gen = t.gen
	t.arrays[id] = info
}

func (t *arrayTable) get(id dag.ArrayID) (arrayInfo, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	info, ok := t.arrays[id]
	return info, ok
}

// markMapped records whether the advice to map array id on every GPU was taken
// (mapped) or refused, for the description of generation gen only (one described anew
// since is left alone), and reports whether it recorded a mapping.
func (t *arrayTable) markMapped(id dag.ArrayID, gen uint64, mapped bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	info, ok := t.arrays[id]
	if !ok || info.gen != gen {
		return false
	}
	info.mapped, info.refused = mapped, !mapped
	t.arrays[id] = info
	return mapped
}

func (t *arrayTable) forget(id dag.ArrayID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.arrays, id)
}

// DescribeArray tells the context that array id is the size bytes at base, whose
// newest copy is now on device ordinal (one of the context's GPUs), or on the host
// when ordinal is negative. Device and managed memory are told apart by asking the
// driver. Vertices added after see the array there; a GPU vertex that runs on another
// device prefetches the ranges it needs of a managed array. Only managed memory
// moves: device and host memory stay where they are for the device policies whatever
// runs on them (a kernel on another GPU reaches device memory through peer access).
// Describing an id again replaces what was known; ForgetArray drops it.
//
// Errors: an ordinal that is not one of the context's GPUs; the driver's.
func (c *Context) DescribeArray(id dag.ArrayID, base uintptr, size uint64, ordinal int) error {
	loc := dag.Host
	if ordinal >= 0 {
		if loc = c.laneIndex(ordinal); loc < 0 {
			return fmt.Errorf("execution: array %d on GPU %d, which is not one of the context's", id, ordinal)
		}
	}
	info := arrayInfo{base: base, size: size}
	if c.drv != nil && base != 0 {
		p, err := c.drv.Pointer(base)
		if err != nil {
			return err
		}
		info.managed = p.Managed
	}
	if info.managed && mapManaged == mapEveryArray && len(c.gpus) > 1 {
		info.mapped = c.mapOnEveryGPU(base, size) == nil
		info.refused = !info.mapped
	}
	c.arrays.set(id, info)
	c.graph.Describe(id, size, loc, info.managed)
	return nil
}

// mapOnEveryGPU advises that each of the context's GPUs accesses the managed range
// [base, base+size) (ucxx.CUDADriver.AdviseAccessedBy, in the GPU's primary context,
// which the context holds until Close: ErrClosed after it). Best effort: a range left
// unmapped on some GPU faults there, as before, and the error says which; the advice
// outlives the context (it is the memory's, and harmless).
func (c *Context) mapOnEveryGPU(base uintptr, size uint64) error {
	c.mu.Lock() // Close releases the GPUs' contexts after it marks the context closed
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	var errs []error
	for _, l := range c.gpus {
		if err := l.cu.Use(func() error { return c.drv.AdviseAccessedBy(base, size, l.ordinal) }); err != nil {
			errs = append(errs, fmt.Errorf("GPU %d: %w", l.ordinal, err))
		}
	}
	return errors.Join(errs...)
}

// writesMapped reports whether every array that acc writes (dag.Write: a copy's
// destination) is managed memory mapped on every GPU of the context, so that the copy
// may write in place (dag.Task.WritesInPlace covers every written range). Where
// mapManaged says copy destinations are mapped, in a context of several GPUs, it maps
// a written array first, once per description (one whose advice failed is not asked
// again). False when acc writes nothing.
func (c *Context) writesMapped(acc []dag.Access) bool {
	writes := false
	for _, a := range acc {
		if a.Mode != dag.Write {
			continue
		}
		writes = true
		info, ok := c.arrays.get(a.Array)
		if !ok || !info.managed {
			return false
		}
		if !info.mapped && !info.refused && mapManaged == mapCopyDestinations && len(c.gpus) > 1 {
			info.mapped = c.arrays.markMapped(a.Array, info.gen, c.mapOnEveryGPU(info.base, info.size) == nil)
		}
		if !info.mapped {
			return false
		}
	}
	return writes
}

// laneIndex is the index in c.gpus (the DAG's location) of CUDA device ordinal, or -1
// when the context does not run on it.
func (c *Context) laneIndex(ordinal int) int {
	for i, l := range c.gpus {
		if l.ordinal == ordinal {
			return i
		}
	}
	return -1
}

// ForgetArray drops what DescribeArray recorded of id (its memory is going away).
func (c *Context) ForgetArray(id dag.ArrayID) {
	c.arrays.forget(id)
	c.graph.Forget(id)
}

// prefetches reports whether prefetchMoves would queue anything for moves.
func (l *gpuLane) prefetches(moves []dag.Move) bool {
	if !prefetchInputs {
		return false
	}
	for _, m := range moves {
		if info, ok := l.arrays.get(m.Array); ok && info.managed && m.Len > 0 && m.Off+m.Len <= info.size {
			return true
		}
	}
	return false
}

// prefetchMoves queues on stream, in the lane's context, a prefetch to the lane's
// device of every range of moves that lies in managed memory (none without
// prefetchInputs).
func (l *gpuLane) prefetchMoves(moves []dag.Move, stream uintptr) error {
	if !prefetchInputs {
		return nil
	}
	for _, m := range moves {
		info, ok := l.arrays.get(m.Array)
		if !ok || !info.managed || m.Len == 0 || m.Off+m.Len > info.size {
			continue
		}
		if err := l.drv.PrefetchAsync(info.base+uintptr(m.Off), m.Len, l.ordinal, stream); err != nil {
			return fmt.Errorf("execution: prefetch of array %d [%d, %d) to GPU %d: %w", m.Array, m.Off, m.Off+m.Len, l.ordinal, err)
		}
	}
	return nil
}

// enablePeerAccess lets each of the context's GPUs reach the others' memory where the
// driver says it can; where it cannot, kernels on one GPU cannot read another's
// device memory (managed memory still migrates).
func enablePeerAccess(lanes []*gpuLane) error {
	for _, a := range lanes {
		for _, b := range lanes {
			if a == b || a.ordinal == b.ordinal {
				continue
			}
			can, err := a.drv.CanAccessPeer(a.ordinal, b.ordinal)
			if err != nil {
				return err
			}
			if can {
				if err := a.cu.EnablePeerAccess(b.cu); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
