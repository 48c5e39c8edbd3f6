package execution

import (
	"os"

	"github.com/ucxx-go/ucxx-go/core/dag"
)

// The GPU lanes defer the vertices whose queueing would block the thread adding
// vertices (a managed-memory prefetch: gpuLane.StartOrDefer) to a dag.Launcher of
// the context's own: one goroutine for every GPU of the context, so the driver sees
// one prefetch from the host at a time, as it did when the adding thread queued them
// all (a goroutine per GPU prefetching at once hung the multi-GPU benchmark once on
// 2 x H100, cause unknown: RESULTS.md, session 17).

// deferPrefetches turns the deferral on (UCXGO_DAG_DEFER_PREFETCH=0 turns it off: the
// thread that starts a vertex queues it, prefetches and all, as before it).
var deferPrefetches = os.Getenv("UCXGO_DAG_DEFER_PREFETCH") != "0"

// newLauncher returns the launcher of a context's GPU lanes.
func newLauncher() *dag.Launcher[*gpuLane] {
	return dag.NewLauncher(func(l *gpuLane, v *dag.Vertex) bool { return l.queue(v) })
}
