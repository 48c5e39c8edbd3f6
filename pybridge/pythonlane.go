package pybridge

import (
	"fmt"
	"sync"
	"time"

	"github.com/ucxx-go/ucxx-go/core/dag"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// pythonLane is the DAG lane of Python host functions: Start queues a ready vertex,
// Python threads take it (DagTakeHost), run the function and end it (DagEndHost).
// Go never calls into Python.
type pythonLane struct {
	mu      sync.Mutex
	cond    sync.Cond
	ready   []*dag.Vertex
	running map[dag.VertexID]*dag.Vertex
	closed  bool
}

// errPythonLaneClosed ends a Python host vertex nobody took before its context closed.
var errPythonLaneClosed = fmt.Errorf("execution context closed before the host function ran: %w", ucxx.ErrClosed)

func newPythonLane() *pythonLane {
	l := &pythonLane{running: make(map[dag.VertexID]*dag.Vertex)}
	l.cond.L = &l.mu
	return l
}

func (l *pythonLane) Name() string { return "python" }

func (l *pythonLane) Start(v *dag.Vertex) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		v.End(errPythonLaneClosed)
		return
	}
	l.ready = append(l.ready, v)
	l.mu.Unlock()
	l.cond.Signal()
}

// take returns the oldest ready vertex's id, waiting up to timeoutMs (negative: no
// limit); 0 on timeout.
func (l *pythonLane) take(timeoutMs int) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if timeoutMs >= 0 && len(l.ready) == 0 && !l.closed {
		t := time.AfterFunc(time.Duration(timeoutMs)*time.Millisecond, func() {
			l.mu.Lock()
			l.cond.Broadcast()
			l.mu.Unlock()
		})
		defer t.Stop()
		deadline := time.Now().Add(time.Duration(timeoutMs) * time.Millisecond)
		for len(l.ready) == 0 && !l.closed && time.Now().Before(deadline) {
			l.cond.Wait()
		}
	} else {
		for len(l.ready) == 0 && !l.closed {
			l.cond.Wait()
		}
	}
	if len(l.ready) == 0 {
		if l.closed {
			return 0, errPythonLaneClosed
		}
		return 0, nil
	}
	v := l.ready[0]
	l.ready[0] = nil
	l.ready = l.ready[1:]
	l.running[v.ID()] = v
	return uint64(v.ID()), nil
}

// end ends a vertex a Python thread took.
func (l *pythonLane) end(id dag.VertexID, err error) error {
	l.mu.Lock()
	v := l.running[id]
	delete(l.running, id)
	l.mu.Unlock()
	if v == nil {
		return fmt.Errorf("DagEndHost: vertex %d was not taken: %w", id, ucxx.StatusNoElem)
	}
	v.End(err)
	return nil
}

// close fails the vertices not taken yet and wakes the takers; those running are
// ended by their threads.
func (l *pythonLane) close() {
	l.mu.Lock()
	l.closed = true
	ready := l.ready
	l.ready = nil
	l.mu.Unlock()
	l.cond.Broadcast()
	for _, v := range ready {
		v.End(errPythonLaneClosed)
	}
}
