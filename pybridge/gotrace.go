package pybridge

import (
	"errors"
	"os"
	"runtime/trace"
	"sync"
)

// The Go runtime's execution trace, a debugging aid: which thread ran what, and
// where goroutines waited (scheduling, syscalls, GC), for finding where the time of a
// DAG's repetition or a collective call goes. Read the file with `go tool trace`.

var goTrace struct {
	mu   sync.Mutex
	file *os.File
}

// GoTrace starts the execution trace into a new file at path, or with path "" stops
// the running trace and closes its file. It returns 1 when it started or stopped one.
//
// Errors: a trace already running (start) or none running (stop); the file's.
func GoTrace(path string) (n int, err error) {
	defer guard(&err)
	goTrace.mu.Lock()
	defer goTrace.mu.Unlock()
	if path == "" {
		if goTrace.file == nil {
			return 0, errors.New("go trace: none running")
		}
		trace.Stop()
		err := goTrace.file.Close()
		goTrace.file = nil
		return 1, err
	}
	if goTrace.file != nil {
		return 0, errors.New("go trace: one is running already")
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return 0, err
	}
	goTrace.file = f
	return 1, nil
}
