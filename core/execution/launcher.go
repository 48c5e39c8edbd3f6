package execution

import (
	"os"

	"github.com/ucxx-go/ucxx-go/core/dag"
)

// The GPU lanes defer the vertices whose queueing would block the thread adding
// vertices (a managed-memory prefetch: gpuLane.StartOrDefer) to a dag.Launcher of
// the context's own, which queues each GPU's on a goroutine of that GPU's: the GPUs'
// prefetches from the host overlap, as a hand-written program's uploads to several
// GPUs do. This is the scheduling of session 17's first deferral (a goroutine per
// GPU), which hung the multi-GPU benchmark once on 2 x H100, cause not found
// (benchmarks/RESULTS.md); the DAG oracle checks the ordering on simulated lanes, not
// the driver. UCXGO_DAG_LAUNCHERS=one queues every GPU's on one goroutine instead
// (session 18's: no overlap, uploads one GPU after another).

// deferPrefetches turns the deferral on (UCXGO_DAG_DEFER_PREFETCH=0 turns it off: the
// thread that starts a vertex queues it, prefetches and all, as before it).
var deferPrefetches = os.Getenv("UCXGO_DAG_DEFER_PREFETCH") != "0"

// prefetchInputs: a GPU vertex prefetches the managed ranges it reads that the
// location model puts elsewhere (Vertex.Moves), as GrCUDA's InputPrefetch option does
// (off by default in GrCUDA's GrCUDAOptionMap.java: the kernels' faults move the pages;
// on by default in GrOUT's GrOUTOptionMap.java, its multi-node successor).
// UCXGO_DAG_PREFETCH=0 turns it off, to measure it.
var prefetchInputs = os.Getenv("UCXGO_DAG_PREFETCH") != "0"

// copyPrefetchesDst: a copy into managed memory prefetches its destination range to
// the copy's device first, as GrCUDA prefetches every array a computation touches,
// written ones too. The location model does not move it (a write needs no bytes), but
// the pages are somewhere: another GPU, where the range's last reader pulled them. A
// copy engine writing them there faults them over page by page; one prefetch moves
// them in bulk. (A kernel writes the ranges of its own partition, already there.)
// UCXGO_DAG_COPY_PREFETCH_DST=0 turns it off, to measure it. It matters only where the
// destination is not mapped (one GPU, UCXGO_DAG_MAP_MANAGED=0, or the advice refused):
// a destination mapped on every GPU (mapManaged, by default with several GPUs) is not
// prefetched: the copy writes the pages where they are,
// usually with the GPU that reads them next, and the location model leaves them there
// (dag.Task.WritesInPlace).
var copyPrefetchesDst = os.Getenv("UCXGO_DAG_COPY_PREFETCH_DST") != "0"

// mapManaged: in a context of several GPUs, which managed arrays are advised accessed
// by each of its GPUs (cuMemAdvise SET_ACCESSED_BY), so that a GPU touching pages that
// lie on another GPU or on the host reaches them there, across NVLink or PCIe, instead
// of faulting them over; prefetches still move what the location model says a vertex
// needs. GrCUDA gives no such advice (its mem-advise policies are off by default, and
// none of them is accessed-by). UCXGO_DAG_MAP_MANAGED picks: copies (the default) the
// destinations of copies on a GPU, each when the first such copy is added (the arrays
// partitions exchange; an array whose advice fails is not asked again until it is
// described anew); 1 every managed array when it is described; 0 none. Measured
// in the DAG's benchmarks (session 33, best policy): cg on 2 x H200 15 ms with copies'
// destinations mapped, 160 unmapped, vec and bs unchanged; every array mapped (2 x
// H100) kept cg's gain but slowed vec from 26 to 35-38 ms and bs from 31 to 44 (their
// inputs, rewritten by the host each repetition, move with every GPU's mappings kept).
var mapManaged = mapModeFromEnv(os.Getenv("UCXGO_DAG_MAP_MANAGED"))

// mapMode is which managed arrays a context of several GPUs maps on each of them.
type mapMode int

const (
	mapNone             mapMode = iota
	mapEveryArray               // every managed array, when described
	mapCopyDestinations         // a copy's managed destination, at its first copy on a GPU
)

// mapModeFromEnv reads UCXGO_DAG_MAP_MANAGED's value: "0" none, "1" every array,
// "copies" copy destinations; anything else (unset, or a word such as "off",
// included) the default, copy destinations.
func mapModeFromEnv(v string) mapMode {
	switch v {
	case "0":
		return mapNone
	case "1":
		return mapEveryArray
	}
	return mapCopyDestinations
}

// sharedLauncher: one launcher goroutine for every GPU (UCXGO_DAG_LAUNCHERS=one).
var sharedLauncher = os.Getenv("UCXGO_DAG_LAUNCHERS") == "one"

// newLauncher returns the launcher of a context's GPU lanes.
func newLauncher() *dag.Launcher[*gpuLane] {
	queue := func(l *gpuLane, v *dag.Vertex) bool { return l.queue(v) }
	if sharedLauncher {
		return dag.NewSharedLauncher(queue)
	}
	return dag.NewLauncher(queue)
}
