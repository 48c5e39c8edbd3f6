package core

import (
	"os"
	"runtime"
	"sync/atomic"
)

// liveEngines counts engines whose progress thread runs.
var liveEngines atomic.Int32

// freeProcs is how many Ps New leaves for goroutines besides the progress threads.
const freeProcs = 2

// minProcs is the fewest Ps a process with an engine runs with, unless the user set
// GOMAXPROCS: application threads (Python's, say) enter Go through cgo and each needs
// a free P, which on a small machine is often held by the progress thread
// (benchmarks/design-notes.md). Idle Ps cost almost nothing.
const minProcs = 8

// reserveP makes room for one more progress thread. A progress thread keeps its P
// while it sleeps (epollWait is a raw system call), so GOMAXPROCS must cover the
// progress threads plus freeProcs, or the rest of the program starves; it is raised
// to that, and to minProcs unless GOMAXPROCS is set in the environment, never lowered.
// This is the one place the engine sets GOMAXPROCS.
func reserveP() {
	n := int(liveEngines.Add(1)) + freeProcs
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		n = max(n, minProcs)
	}
	if runtime.GOMAXPROCS(0) < n {
		runtime.GOMAXPROCS(n)
	}
}
