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
