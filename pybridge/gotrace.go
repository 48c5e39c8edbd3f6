package pybridge

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"sync"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Recordings of the Go runtime, debugging aids: the execution trace (which thread ran
// what, where goroutines waited: scheduling, syscalls, GC) and the CPU profile (where
// the Go core's own CPU time goes, which the trace does not split), for finding where
// the time of a DAG's repetition or a collective call goes. Read them with `go tool
// trace` and `go tool pprof`.

// recording is one kind of recording, at most one running at a time.
type recording struct {
	name string
	stop func()
	mu   sync.Mutex
	file *os.File
}

var (
	goTrace      = recording{name: "go trace", stop: trace.Stop}
	goCPUProfile = recording{name: "go cpu profile", stop: pprof.StopCPUProfile}
)

// toggle starts the recording into a new file at path with start, or with path ""
// stops the running one and closes its file. It returns 1 when it started or stopped
// one.
//
// Errors: one already running (start) or none running (stop); the file's.
func (r *recording) toggle(path string, start func(io.Writer) error) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if path == "" {
		if r.file == nil {
			return 0, errors.New(r.name + ": none running")
		}
		r.stop()
		err := r.file.Close()
		r.file = nil
		return 1, err
	}
	if r.file != nil {
		return 0, errors.New(r.name + ": one is running already")
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	if err := start(f); err != nil {
		f.Close()
		return 0, err
	}
	r.file = f
	return 1, nil
}

// GoTrace starts the execution trace into a new file at path, or with path "" stops
// it (recording.toggle).
func GoTrace(path string) (n int, err error) {
	defer guard(&err)
	return goTrace.toggle(path, trace.Start)
}

// maxProfileRate bounds GoCPUProfile's samples a second: the kernel's profiling timer
// does not fire much faster, and each sample costs the profiled thread a signal.
const maxProfileRate = 10_000

// GoCPUProfile starts the CPU profile into a new file at path, sampling hz times a
// second of CPU time (0: Go's default, 100), or with path "" stops it
// (recording.toggle). A rate other than the default makes the runtime print that it
// "cannot set cpu profile rate" to stderr: pprof.StartCPUProfile asks for 100 after
// the rate was set, and the rate set first is kept.
//
// Errors: hz outside 0..maxProfileRate; toggle's.
func GoCPUProfile(path string, hz int) (n int, err error) {
	defer guard(&err)
	if hz < 0 || hz > maxProfileRate {
		return 0, fmt.Errorf("go cpu profile: %d samples a second, not in 0..%d: %w", hz, maxProfileRate, ucxx.StatusInvalidParam)
	}
	return goCPUProfile.toggle(path, func(w io.Writer) error {
		if hz > 0 {
			runtime.SetCPUProfileRate(hz)
		}
		return pprof.StartCPUProfile(w)
	})
}
