package execution

import (
	"os"

	"github.com/ucxx-go/ucxx-go/core/dag"
)

// The GPU lanes defer the vertices whose queueing would block the thread adding
// vertices (a managed-memory prefetch: gpuLane.StartOrDefer) to a dag.Launcher of
// the context's own, which queues each GPU's on a goroutine of that GPU's: the GPUs'
// prefetches from the host overlap, as a hand-written program's uploads to several
// GPUs do. (Session 17's first deferral, a goroutine per GPU of its own making, hung
// the multi-GPU benchmark once on 2 x H100, cause not found; session 18 queued every
// GPU's on one goroutine, serialising the uploads; this one is dag.Launcher's
// per-lane goroutines, whose ordering the DAG oracle checks on simulated lanes.)

// deferPrefetches turns the deferral on (UCXGO_DAG_DEFER_PREFETCH=0 turns it off: the
// thread that starts a vertex queues it, prefetches and all, as before it).
var deferPrefetches = os.Getenv("UCXGO_DAG_DEFER_PREFETCH") != "0"

// newLauncher returns the launcher of a context's GPU lanes.
func newLauncher() *dag.Launcher[*gpuLane] {
	return dag.NewLauncher(func(l *gpuLane, v *dag.Vertex) bool { return l.queue(v) })
}
