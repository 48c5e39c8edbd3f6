package pybridge

import (
	"errors"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"sync"
)

// Recordings of the Go runtime, debugging aids: the execution trace (which thread ran
// what, where goroutines waited: scheduling, syscalls, GC) and the CPU profile (where
// the Go core's own CPU time goes, which the trace does not split), for finding where
// the time of a DAG's repetition or a collective call goes. Read them with `go tool
// trace` and `go tool pprof`.

// recording is one kind of recording, at most one running at a time.
type recording struct {
	name  string
	start func(io.Writer) error
	stop  func()
	mu    sync.Mutex
	file  *os.File
}

var (
	goTrace      = recording{name: "go trace", start: trace.Start, stop: trace.Stop}
	goCPUProfile = recording{name: "go cpu profile", start: pprof.StartCPUProfile, stop: pprof.StopCPUProfile}
)

// toggle starts the recording into a new file at path, or with path "" stops the
// running one and closes its file. It returns 1 when it started or stopped one.
//
// Errors: one already running (start) or none running (stop); the file's.
func (r *recording) toggle(path string) (int, error) {
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
	if err := r.start(f); err != nil {
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
	return goTrace.toggle(path)
}

// GoCPUProfile starts the CPU profile into a new file at path, or with path "" stops
// it (recording.toggle).
func GoCPUProfile(path string) (n int, err error) {
	defer guard(&err)
	return goCPUProfile.toggle(path)
}
