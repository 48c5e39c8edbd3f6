package dag

import (
	"fmt"
	"sync"
)

// simGPUs simulates the GPU stream lane the CUDA binding will provide, to check that
// the Lane, ChainingLane, Releaser and StreamPool interfaces are enough for it: each
// stream is a goroutine running its queue in order; a vertex's stop event is a
// channel closed after its work, stored with SetLaneData; a cross-stream wait is a
// receive from the parent's event on the stream's goroutine, never on the caller's.
// The stream's goroutine calls End as soon as the work is over (active completion).
type simGPUs struct {
	mu       sync.Mutex
	streams  []*simStream // by handle-1
	lanes    []*simGPULane
	released map[*Vertex]bool
	problems []string // contract violations seen
}

type simGPULane struct {
	sys *simGPUs
	dev int
}

type simStream struct {
	mu     sync.Mutex
	cond   sync.Cond
	queue  []simItem
	closed bool
	done   chan struct{}
}

type simItem struct {
	v     *Vertex
	waits []chan struct{}
	stop  chan struct{}
}

func newSimGPUs(devices int) *simGPUs {
	s := &simGPUs{released: map[*Vertex]bool{}}
	for d := range devices {
		s.lanes = append(s.lanes, &simGPULane{sys: s, dev: d})
	}
	return s
}

// Lanes returns one lane per device, for Options.GPULanes.
func (s *simGPUs) Lanes() []Lane {
	out := make([]Lane, len(s.lanes))
	for i, l := range s.lanes {
		out[i] = l
	}
	return out
}

// NewStream starts a stream goroutine (StreamPool).
func (s *simGPUs) NewStream(device int) (uintptr, error) {
	st := &simStream{done: make(chan struct{})}
	st.cond.L = &st.mu
	go st.run()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streams = append(s.streams, st)
	return uintptr(len(s.streams)), nil
}

// Close stops every stream once its queue is empty.
func (s *simGPUs) Close() {
	s.mu.Lock()
	streams := s.streams
	s.mu.Unlock()
	for _, st := range streams {
		st.mu.Lock()
		st.closed = true
		st.mu.Unlock()
		st.cond.Broadcast()
		<-st.done
	}
}

func (s *simGPUs) problem(format string, args ...any) {
	s.mu.Lock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func (l *simGPULane) Name() string { return fmt.Sprintf("gpu%d", l.dev) }

// Chains: GPU work after GPU work of this simulated system is ordered on the device.
func (l *simGPULane) Chains(p, v *Vertex) bool {
	pl, ok := p.Lane().(*simGPULane)
	return ok && pl.sys == l.sys
}

// Start queues v on its stream after waits on its cross-stream parents' stop events.
func (l *simGPULane) Start(v *Vertex) {
	st, ok := v.Stream()
	if !ok || st.Device != l.dev {
		l.sys.problem("vertex %d on lane gpu%d has stream %v (%v)", v.ID(), l.dev, st, ok)
	}
	it := simItem{v: v, stop: make(chan struct{})}
	l.sys.mu.Lock()
	for _, w := range v.Waits() {
		if l.sys.released[w.Parent] {
			l.sys.problem("vertex %d waits on released parent %d", v.ID(), w.Parent.ID())
		}
		ev, ok := w.Parent.LaneData().(chan struct{})
		if !ok {
			l.sys.problem("vertex %d: parent %d has no stop event", v.ID(), w.Parent.ID())
			continue
		}
		it.waits = append(it.waits, ev)
	}
	stream := l.sys.streams[st.Handle-1]
	l.sys.mu.Unlock()
	v.SetLaneData(it.stop)
	stream.mu.Lock()
	stream.queue = append(stream.queue, it)
	stream.mu.Unlock()
	stream.cond.Signal()
}

// Release records that v's stop event may be destroyed.
func (l *simGPULane) Release(v *Vertex) {
	l.sys.mu.Lock()
	defer l.sys.mu.Unlock()
	if l.sys.released[v] {
		l.sys.problem("vertex %d released twice", v.ID())
	}
	l.sys.released[v] = true
}

func (st *simStream) run() {
	defer close(st.done)
	st.mu.Lock()
	for {
		for len(st.queue) == 0 && !st.closed {
			st.cond.Wait()
		}
		if len(st.queue) == 0 {
			st.mu.Unlock()
			return
		}
		it := st.queue[0]
		st.queue = st.queue[1:]
		st.mu.Unlock()
		for _, w := range it.waits {
			<-w
		}
		var err error
		if f, ok := it.v.Payload().(func() error); ok {
			err = f()
		}
		close(it.stop)
		it.v.End(err)
		st.mu.Lock()
	}
}
