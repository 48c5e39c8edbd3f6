package dag

import (
	"errors"
	"slices"
	"testing"
)

// countingPool is a StreamPool that counts the streams it makes, and fails when told.
type countingPool struct {
	made int
	fail bool
}

func (p *countingPool) NewStream(device int) (uintptr, error) {
	if p.fail {
		return 0, errors.New("no more streams")
	}
	p.made++
	return uintptr(100*device + p.made), nil
}

// streamTest drives a StreamManager with hand-made vertices.
type streamTest struct {
	t    *testing.T
	m    *StreamManager
	pool *countingPool
	next VertexID
}

func newStreamTest(t *testing.T, devices int, newP NewStreamPolicy, parent ParentStreamPolicy, max int) *streamTest {
	pool := &countingPool{}
	return &streamTest{t: t, pool: pool, m: NewStreamManager(devices, pool, newP, parent, max)}
}

// assign places a new vertex of dev with parents and returns it.
func (s *streamTest) assign(dev int, parents ...*Vertex) *Vertex {
	s.t.Helper()
	s.next++
	v := &Vertex{id: s.next}
	if _, err := s.m.Assign(v, dev, parents); err != nil {
		s.t.Fatal(err)
	}
	return v
}

// finish releases v's stream, as the graph does when v finishes.
func (s *streamTest) finish(v *Vertex) {
	v.finished = true
	s.m.Release(v)
}

func wantStream(t *testing.T, v *Vertex, dev, index int) {
	t.Helper()
	if !v.hasStream || v.stream.Device != dev || v.stream.Index != index {
		t.Errorf("vertex %d on %v, want gpu%d/s%d", v.id, v.stream, dev, index)
	}
}

func TestStreamsFIFOReuse(t *testing.T) {
	s := newStreamTest(t, 1, FIFOReuse, SameAsParent, 8)
	a, b, c := s.assign(0), s.assign(0), s.assign(0)
	wantStream(t, a, 0, 0)
	wantStream(t, b, 0, 1)
	wantStream(t, c, 0, 2)
	if s.m.BusyStreams(0) != 3 {
		t.Errorf("busy %d", s.m.BusyStreams(0))
	}
	s.finish(b)
	s.finish(a) // free queue: s1 (free longest), then s0
	d, e, f := s.assign(0), s.assign(0), s.assign(0)
	wantStream(t, d, 0, 1)
	wantStream(t, e, 0, 0)
	wantStream(t, f, 0, 3) // none free: a new one
	if s.pool.made != 4 || s.m.Streams(0) != 4 {
		t.Errorf("made %d streams, want 4", s.pool.made)
	}
}

func TestStreamsAlwaysNew(t *testing.T) {
	s := newStreamTest(t, 1, AlwaysNew, SameAsParent, 3)
	a := s.assign(0)
	s.finish(a)
	b := s.assign(0)
	wantStream(t, b, 0, 1) // s0 is free, but the policy makes a new one
	c := s.assign(0)
	wantStream(t, c, 0, 2)
	d := s.assign(0) // at the bound: the least loaded, s0 (idle)
	wantStream(t, d, 0, 0)
	if s.pool.made != 3 {
		t.Errorf("made %d", s.pool.made)
	}
}

func TestStreamsBoundLeastLoaded(t *testing.T) {
	s := newStreamTest(t, 1, FIFOReuse, SameAsParent, 2)
	a := s.assign(0)
	s.assign(0, a) // inherits s0: two unfinished there
	b := s.assign(0)
	wantStream(t, b, 0, 1)
	c := s.assign(0) // no free stream, at the bound: s1 has fewer
	wantStream(t, c, 0, 1)
	if s.pool.made != 2 || s.m.BusyStreams(0) != 2 {
		t.Errorf("made %d, busy %d", s.pool.made, s.m.BusyStreams(0))
	}
}

func TestStreamsSameAsParent(t *testing.T) {
	s := newStreamTest(t, 2, FIFOReuse, SameAsParent, 8)
	p := s.assign(0)
	c1 := s.assign(0, p)
	wantStream(t, c1, 0, 0) // one parent, last on its stream
	c2 := s.assign(0, p)
	wantStream(t, c2, 0, 1) // p is followed by c1 now: a stream of its own
	j := s.assign(0, c1, c2)
	wantStream(t, j, 0, 0) // the first parent that is last on its stream
	if w := streamWaits(j, []*Vertex{c1, c2}); len(w) != 1 || w[0].Parent != c2 || !w[0].Stream.same(c2.stream) {
		t.Errorf("waits %+v, want one on c2's stream", w)
	}
	other := s.assign(1, j)
	wantStream(t, other, 1, 0) // a parent on another device is not inherited
	s.finish(c2)
	late := s.assign(0, c2)
	wantStream(t, late, 0, 1) // a finished parent is not inherited (its stream is free: FIFO)
	if w := streamWaits(late, nil); len(w) != 0 {
		t.Errorf("waits on nothing chained: %+v", w)
	}
}

func TestStreamsDisjoint(t *testing.T) {
	s := newStreamTest(t, 1, FIFOReuse, Disjoint, 8)
	p := s.assign(0)
	c1 := s.assign(0, p)
	wantStream(t, c1, 0, 0)
	c2 := s.assign(0, p)
	wantStream(t, c2, 0, 1) // p's stream already taken by a child
	g1 := s.assign(0, c1)
	wantStream(t, g1, 0, 0)
	// Two parents: the first not yet inherited from.
	j := s.assign(0, p, c2)
	wantStream(t, j, 0, 1)
}

// place places a new vertex with parents under the manager's parent-stream policy;
// the device picker records the candidates it was offered and answers next (or, given
// candidates, the last of them).
func (s *streamTest) place(offered *[]int, next int, parents ...*Vertex) *Vertex {
	s.t.Helper()
	s.next++
	v := &Vertex{id: s.next}
	pick := func(among []int) int {
		if among == nil {
			*offered = nil
			return next
		}
		*offered = append((*offered)[:0], among...)
		return among[len(among)-1]
	}
	if _, err := s.m.Place(v, parents, pick); err != nil {
		s.t.Fatal(err)
	}
	return v
}

// TestPlaceFollowsGrCUDAsParentStreamPolicies: only a vertex with no GPU parent it may
// inherit from has its device chosen by the device policy (GrCUDA's start vertices);
// same-as-parent and disjoint keep a child on its parent's device, the early
// disjoint policy asks first, multigpu-disjoint asks among the parents' devices.
func TestPlaceFollowsGrCUDAsParentStreamPolicies(t *testing.T) {
	var offered []int
	asked := func(want []int) { // nil: every device
		t.Helper()
		if !slices.Equal(offered, want) {
			t.Errorf("picker offered %v, want %v", offered, want)
		}
	}
	t.Run("same-as-parent", func(t *testing.T) {
		s := newStreamTest(t, 4, FIFOReuse, SameAsParent, 8)
		root := s.place(&offered, 2)
		wantStream(t, root, 2, 0) // a root: the policy's choice
		offered = []int{-1}
		a := s.place(&offered, 3, root)
		wantStream(t, a, 2, 0) // the parent's device and stream, the policy not asked
		asked([]int{-1})       // untouched: not asked
		b := s.place(&offered, 3, root)
		wantStream(t, b, 2, 1) // root is followed by a: a new stream, on root's device
		s.finish(a)
		s.finish(b)
		s.finish(root)
		late := s.place(&offered, 1, a)
		wantStream(t, late, 1, 0) // a finished parent holds nothing: the policy chooses
	})
	t.Run("disjoint", func(t *testing.T) {
		s := newStreamTest(t, 4, FIFOReuse, Disjoint, 8)
		root := s.place(&offered, 1)
		a := s.place(&offered, 3, root)
		wantStream(t, a, 1, 0) // the first child inherits
		b := s.place(&offered, 3, root)
		wantStream(t, b, 3, 0) // the second: the policy's device, a new stream
		asked(nil)
	})
	t.Run("multigpu-early-disjoint", func(t *testing.T) {
		s := newStreamTest(t, 4, FIFOReuse, MultiGPUEarlyDisjoint, 8)
		root := s.place(&offered, 1)
		a := s.place(&offered, 3, root)
		wantStream(t, a, 3, 0) // asked first: another device, so a new stream there
		b := s.place(&offered, 1, root)
		wantStream(t, b, 1, 0) // asked first: root's device, whose stream is not yet taken
	})
	t.Run("multigpu-disjoint", func(t *testing.T) {
		s := newStreamTest(t, 4, FIFOReuse, MultiGPUDisjoint, 8)
		x := s.place(&offered, 3)
		y := s.place(&offered, 1)
		j := s.place(&offered, 0, x, y)
		asked([]int{1, 3})     // among the parents' devices, sorted
		wantStream(t, j, 3, 0) // the picker took the last: x's device and stream
		k := s.place(&offered, 0, x, y)
		asked([]int{1}) // x's stream is taken: only y's device is left
		wantStream(t, k, 1, 0)
		l := s.place(&offered, 2, x, y)
		asked(nil) // nothing left to inherit: every device, a new stream
		wantStream(t, l, 2, 0)
	})
}

func TestStreamsPoolFailure(t *testing.T) {
	s := newStreamTest(t, 1, FIFOReuse, SameAsParent, 4)
	s.pool.fail = true
	if _, err := s.m.Assign(&Vertex{id: 1}, 0, nil); err == nil {
		t.Fatal("Assign with no stream and a failing pool succeeded")
	}
	s.pool.fail = false
	a := s.assign(0)
	s.pool.fail = true
	b := s.assign(0) // falls back to the streams there are
	wantStream(t, a, 0, 0)
	wantStream(t, b, 0, 0)
}

func TestPolicyNames(t *testing.T) {
	for p := FIFOReuse; p <= AlwaysNew; p++ {
		if q, err := ParseNewStreamPolicy(p.String()); err != nil || q != p {
			t.Errorf("%v: %v %v", p, q, err)
		}
	}
	for p := SameAsParent; p <= MultiGPUDisjoint; p++ {
		if q, err := ParseParentStreamPolicy(p.String()); err != nil || q != p {
			t.Errorf("%v: %v %v", p, q, err)
		}
	}
	for p := WithConst; p <= NoConst; p++ {
		if q, err := ParseDependencyPolicy(p.String()); err != nil || q != p {
			t.Errorf("%v: %v %v", p, q, err)
		}
	}
	for p := Async; p <= Sync; p++ {
		if q, err := ParseExecutionPolicy(p.String()); err != nil || q != p {
			t.Errorf("%v: %v %v", p, q, err)
		}
	}
	for p := RoundRobin; p <= MinMaxTransferTime; p++ {
		if q, err := ParseDevicePolicy(p.String()); err != nil || q != p {
			t.Errorf("%v: %v %v", p, q, err)
		}
	}
	if _, err := ParseDevicePolicy("single-gpu"); err == nil {
		t.Error("parsed an unknown name")
	}
}

// A GPU vertex whose stream cannot be made is added, and fails with the pool's error.
func TestStreamFailureFailsVertex(t *testing.T) {
	gpu := &manualLane{name: "gpu0"}
	g := newGraph(t, Options{GPUs: 1, GPULanes: []Lane{gpu}, StreamPool: &countingPool{fail: true}})
	v, err := g.Add(Task{Kind: KindGPU, Accesses: []Access{acc(1, 0, 8, Write)}})
	if err != nil {
		t.Fatal(err)
	}
	var ve *VertexError
	if v.State() != Failed || !errors.As(v.Err(), &ve) || ve.Root != v.ID() || len(gpu.take()) != 0 {
		t.Errorf("vertex without a stream: %v %v", v.State(), v.Err())
	}
}
