package dag

import (
	"fmt"
	"slices"
)

// Stream is one stream of a device as the StreamManager knows it.
type Stream struct {
	Device int
	Index  int     // 0, 1, ... in the order the device's streams were created
	Handle uintptr // what StreamPool.NewStream returned: a CUstream for a CUDA lane
}

// String formats the stream as "gpu0/s2".
func (s Stream) String() string { return fmt.Sprintf("gpu%d/s%d", s.Device, s.Index) }

// same reports whether two values name one stream.
func (s Stream) same(t Stream) bool { return s.Device == t.Device && s.Index == t.Index }

// StreamWait is one cross-stream dependency: before its own work, a vertex's stream
// waits for Parent's stop event, which Parent's lane recorded on Stream. A GPU lane
// turns it into cuStreamWaitEvent, so the host never blocks on it.
type StreamWait struct {
	Parent *Vertex
	Stream Stream
}

// StreamPool is where streams come from: the GPU lane implements it over
// cuStreamCreate, tests with a counter. The StreamManager decides which stream each
// vertex uses and when one is free again; the pool only makes them.
type StreamPool interface {
	// NewStream creates a stream on device and returns its handle.
	NewStream(device int) (uintptr, error)
}

// NewStreamPolicy says where a vertex that does not inherit a parent's stream goes.
type NewStreamPolicy uint8

const (
	// FIFOReuse takes the free stream that has been free longest, and creates a stream
	// only when none is free. GrCUDA's "fifo" (now "reuse"); the default.
	FIFOReuse NewStreamPolicy = iota
	// AlwaysNew creates a stream for every such vertex (up to the bound).
	AlwaysNew
)

// String returns "fifo" or "always-new".
func (p NewStreamPolicy) String() string {
	switch p {
	case FIFOReuse:
		return "fifo"
	case AlwaysNew:
		return "always-new"
	}
	return fmt.Sprintf("NewStreamPolicy(%d)", uint8(p))
}

// ParseNewStreamPolicy parses the names String returns.
func ParseNewStreamPolicy(s string) (NewStreamPolicy, error) {
	for p := FIFOReuse; p <= AlwaysNew; p++ {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("dag: unknown new-stream policy %q", s)
}

// ParentStreamPolicy says which device and stream a GPU vertex with GPU parents gets,
// as GrCUDA's parent-stream policies do: inheriting a parent's stream orders the vertex
// after that parent for free, and keeps it on the parent's device, beside the data the
// parent touched. A vertex with no active GPU parent (GrCUDA's start vertex), or none
// the policy lets it inherit from, has its device chosen by the device selection
// policy and a stream by the new-stream policy.
type ParentStreamPolicy uint8

const (
	// SameAsParent: the vertex stays on the device of its first active GPU parent (in
	// parent order), on the stream of its first parent there that is still the last
	// vertex queued on its stream, else on a new stream of that device. A parent
	// followed by other work on its stream is not inherited, since the vertex would
	// wait for that work too (GrCUDA inherits the first parent's stream regardless).
	// The device selection policy chooses only for vertices with no GPU parent. The
	// default.
	SameAsParent ParentStreamPolicy = iota
	// Disjoint: the vertex takes the stream, and device, of its first active parent
	// that no other child has inherited from yet, so siblings spread over streams;
	// with none, the device selection policy chooses (GrCUDA's "disjoint").
	Disjoint
	// MultiGPUEarlyDisjoint: the device selection policy chooses the device first;
	// the vertex then takes the stream of its first active parent there that no other
	// child has inherited from yet, else a new stream there (GrCUDA's
	// "multigpu-early-disjoint").
	MultiGPUEarlyDisjoint
	// MultiGPUDisjoint: the device selection policy chooses among the devices of the
	// active parents no other child has inherited from yet, and the vertex takes the
	// first such parent's stream there; with none, it chooses among all devices and
	// the vertex gets a new stream (GrCUDA's "multigpu-disjoint").
	MultiGPUDisjoint
)

var parentStreamPolicyNames = [...]string{"same-as-parent", "disjoint", "multigpu-early-disjoint", "multigpu-disjoint"}

// String returns GrCUDA's name of the policy, e.g. "same-as-parent".
func (p ParentStreamPolicy) String() string {
	if int(p) < len(parentStreamPolicyNames) {
		return parentStreamPolicyNames[p]
	}
	return fmt.Sprintf("ParentStreamPolicy(%d)", uint8(p))
}

// ParseParentStreamPolicy parses the names String returns.
func ParseParentStreamPolicy(s string) (ParentStreamPolicy, error) {
	for i, n := range parentStreamPolicyNames {
		if n == s {
			return ParentStreamPolicy(i), nil
		}
	}
	return 0, fmt.Errorf("dag: unknown parent-stream policy %q", s)
}

// DefaultMaxStreams is the bound on streams per device when Options leave it 0.
const DefaultMaxStreams = 16

// StreamManager assigns GPU vertices to streams, as GrCUDA's stream manager does, and
// frees a stream as soon as the last vertex on it finishes (the graph tells it, as
// lanes report ends), so streams return to the pool while others run. A stream is busy
// while it holds an unfinished vertex.
//
// Streams per device are bounded by max. When a new stream is wanted and the device
// has max streams, none of them free, the vertex goes on the least loaded one (fewest
// unfinished vertices; the oldest on ties): it then waits, in stream order, for work
// it does not depend on. That is the price of the bound; it never deadlocks, since
// every wait is on work queued before.
//
// A StreamManager is not safe for concurrent use; the Graph uses it under its lock.
type StreamManager struct {
	pool   StreamPool
	newP   NewStreamPolicy
	parent ParentStreamPolicy
	max    int
	devs   []deviceStreams
	among  []int // Place's scratch
}

// deviceStreams is one device's streams.
type deviceStreams struct {
	streams []streamState
	free    []int // indexes of free streams, longest free first
	busy    int
}

// streamState is what the manager knows of one stream.
type streamState struct {
	s      Stream
	active int     // unfinished vertices on it
	tail   *Vertex // the last vertex queued on it, while unfinished
}

// NewStreamManager manages the streams of devices GPUs, made by pool. max bounds the
// streams of each device (DefaultMaxStreams when max <= 0).
func NewStreamManager(devices int, pool StreamPool, newP NewStreamPolicy, parent ParentStreamPolicy, max int) *StreamManager {
	if max <= 0 {
		max = DefaultMaxStreams
	}
	if pool == nil {
		pool = logicalStreams{}
	}
	return &StreamManager{pool: pool, newP: newP, parent: parent, max: max, devs: make([]deviceStreams, devices)}
}

// logicalStreams is the pool of a graph whose GPU lane makes its own streams: it
// creates nothing and returns handle 0.
type logicalStreams struct{}

func (logicalStreams) NewStream(int) (uintptr, error) { return 0, nil }

// DevicePicker chooses a device among the sorted devices among (nil: every device):
// the graph's device selection policy, applied to the vertex being placed.
type DevicePicker func(among []int) int

// Place chooses the device of v, a GPU vertex with parents (in order), under the
// parent-stream policy, asking pick where the policy leaves the choice to the device
// selection policy, then assigns it a stream as Assign does. v's device is set even
// when Place fails.
func (m *StreamManager) Place(v *Vertex, parents []*Vertex, pick DevicePicker) (Stream, error) {
	dev := -1
	switch m.parent {
	case SameAsParent:
		if p := firstActive(parents, false); p != nil {
			dev = p.stream.Device
		}
	case Disjoint:
		if p := firstActive(parents, true); p != nil {
			dev = p.stream.Device
		}
	case MultiGPUDisjoint:
		m.among = m.among[:0]
		for _, p := range parents {
			if active(p, true) && !slices.Contains(m.among, p.stream.Device) {
				m.among = append(m.among, p.stream.Device)
			}
		}
		if len(m.among) > 0 {
			slices.Sort(m.among)
			dev = pick(m.among)
		}
	}
	if dev < 0 {
		dev = pick(nil)
	}
	v.device = dev
	return m.Assign(v, dev, parents)
}

// active reports whether v's stream may be inherited: v is an unfinished GPU vertex
// and, under the disjoint policies (unreused), no child has taken its stream yet.
func active(v *Vertex, unreused bool) bool {
	return v.hasStream && !v.finished && !(unreused && v.streamReused)
}

// firstActive returns the first parent active reports, or nil.
func firstActive(parents []*Vertex, unreused bool) *Vertex {
	for _, p := range parents {
		if active(p, unreused) {
			return p
		}
	}
	return nil
}

// Assign places v, a vertex of device dev with parents (in order), on a stream of dev
// (a parent's, as the parent-stream policy allows, else a new one), and marks the
// stream busy until Release(v). It fails only when the device has no stream yet and
// the pool cannot make one.
func (m *StreamManager) Assign(v *Vertex, dev int, parents []*Vertex) (Stream, error) {
	d := &m.devs[dev]
	idx := m.inherit(dev, parents)
	if idx < 0 {
		var err error
		if idx, err = m.fresh(dev); err != nil {
			return Stream{}, err
		}
	}
	st := &d.streams[idx]
	if st.active == 0 {
		d.busy++
		if i := slices.Index(d.free, idx); i >= 0 {
			d.free = slices.Delete(d.free, i, i+1)
		}
	}
	st.active++
	st.tail = v
	v.stream, v.hasStream, v.device = st.s, true, dev
	return st.s, nil
}

// inherit returns the index of the parent stream v should inherit under the
// parent-stream policy, or -1.
func (m *StreamManager) inherit(dev int, parents []*Vertex) int {
	for _, p := range parents {
		if !p.hasStream || p.stream.Device != dev || p.finished {
			continue
		}
		if m.parent == SameAsParent {
			if m.devs[dev].streams[p.stream.Index].tail == p {
				return p.stream.Index
			}
		} else if !p.streamReused {
			p.streamReused = true
			return p.stream.Index
		}
	}
	return -1
}

// fresh returns the stream the new-stream policy gives a vertex that inherits none.
func (m *StreamManager) fresh(dev int) (int, error) {
	d := &m.devs[dev]
	if m.newP == FIFOReuse && len(d.free) > 0 {
		return d.free[0], nil
	}
	if len(d.streams) < m.max {
		h, err := m.pool.NewStream(dev)
		if err == nil {
			d.streams = append(d.streams, streamState{s: Stream{Device: dev, Index: len(d.streams), Handle: h}})
			return len(d.streams) - 1, nil
		}
		if len(d.streams) == 0 {
			return 0, fmt.Errorf("dag: new stream on device %d: %w", dev, err)
		}
		// Fall back to the streams there are.
	}
	best := 0
	for i := range d.streams {
		if d.streams[i].active < d.streams[best].active {
			best = i
		}
	}
	return best, nil
}

// Release notes that v, placed by Assign, has finished: its stream is free again once
// nothing else on it is unfinished, and goes to the back of the free queue.
func (m *StreamManager) Release(v *Vertex) {
	d := &m.devs[v.stream.Device]
	st := &d.streams[v.stream.Index]
	st.active--
	if st.tail == v {
		st.tail = nil
	}
	if st.active == 0 {
		d.busy--
		d.free = append(d.free, v.stream.Index)
	}
}

// Devices returns the number of devices managed.
func (m *StreamManager) Devices() int { return len(m.devs) }

// BusyStreams returns the number of dev's streams holding unfinished vertices: the
// load STREAM_AWARE compares.
func (m *StreamManager) BusyStreams(dev int) int { return m.devs[dev].busy }

// Streams returns the number of streams created on dev.
func (m *StreamManager) Streams(dev int) int { return len(m.devs[dev].streams) }

// streamWaits returns the cross-stream waits of v, placed on its stream, after its
// chained parents: one per parent on another stream (or not on a stream at all).
func streamWaits(v *Vertex, chained []*Vertex) []StreamWait {
	var w []StreamWait
	for _, p := range chained {
		if v.hasStream && p.hasStream && p.stream.same(v.stream) {
			continue
		}
		w = append(w, StreamWait{Parent: p, Stream: p.stream})
	}
	return w
}
