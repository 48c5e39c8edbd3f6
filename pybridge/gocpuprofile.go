package pybridge

import (
	"errors"
	"os"
	"runtime/pprof"
	"sync"
)

// The Go runtime's CPU profile, a debugging aid beside the execution trace: where the
// Go core's own CPU time goes (a DAG vertex's submission, a collective's call), which
// the trace does not split. Read the file with `go tool pprof`.

var goCPUProfile struct {
	mu   sync.Mutex
	file *os.File
}

// GoCPUProfile starts the CPU profile into a new file at path, or with path "" stops
// the running profile and closes its file. It returns 1 when it started or stopped one.
//
// Errors: a profile already running (start) or none running (stop); the file's.
func GoCPUProfile(path string) (n int, err error) {
	defer guard(&err)
	goCPUProfile.mu.Lock()
	defer goCPUProfile.mu.Unlock()
	if path == "" {
		if goCPUProfile.file == nil {
			return 0, errors.New("go cpu profile: none running")
		}
		pprof.StopCPUProfile()
		err := goCPUProfile.file.Close()
		goCPUProfile.file = nil
		return 1, err
	}
	if goCPUProfile.file != nil {
		return 0, errors.New("go cpu profile: one is running already")
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return 0, err
	}
	goCPUProfile.file = f
	return 1, nil
}
