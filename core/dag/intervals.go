package dag

// The dependency state of a byte is its history since the last write that every
// active vertex is ordered after, seen as a sequence of groups: one writer; or readers
// that came one after another with no write between them; or reducers likewise. Members
// of a group do not conflict with each other (reads with reads, reductions with
// reductions); members of consecutive groups do. So the state kept per segment is the
// current group (cur) and the one before it (prev):
//
//   - an access of a new kind (a write always is one) depends on every live member of
//     cur, and becomes the only member of a new group whose prev is the old cur;
//   - an access of cur's kind joins cur and depends on the live members of prev.
//
// Earlier groups need no edge: each member of prev depends on the group before it, and
// so on. A write therefore drops everything before it: once it covers a range, older
// vertices stop being dependencies there.
//
// Finished vertices are removed lazily: they are skipped when a segment is read, dropped
// from a group when it is rebuilt, and a segment whose current group has finished is
// treated as empty. This is sound because a vertex finishes only after all its parents
// have (Graph enforces it): if one member of cur has finished, every member of prev,
// which it depended on, has too. To keep the maps from growing with the history, every
// vertex that finishes counts against the arrays it accessed, and an array's map is
// compacted (finished vertices filtered out, empty segments dropped, equal neighbours
// merged) once that count reaches a quarter of its number of segments: O(1) amortized
// per finished access (at most 4 segments visited per stale access), and the map stays
// within a small factor of its live segments. An array no unfinished vertex accesses has its map dropped at once.

// depState is the dependency state of one segment: see the comment above. The slices
// are never written once built and are kept at full capacity (clipped), so segments
// split from one another can share them.
type depState struct {
	cur  []*Vertex
	prev []*Vertex
	kind Mode // Write, Read or Reduce: what the members of cur did
}

// sameDeps reports whether two segments hold the same state, so they can merge.
func sameDeps(a, b *depState) bool {
	return a.kind == b.kind && sameVertices(a.cur, b.cur) && sameVertices(a.prev, b.prev)
}

func sameVertices(a, b []*Vertex) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// anyLive reports whether a group has a member that has not finished.
func anyLive(vs []*Vertex) bool {
	for _, v := range vs {
		if !v.finished {
			return true
		}
	}
	return false
}

// liveOnly returns vs without its finished members: vs itself when none has finished,
// else a new slice (nil when all have).
func liveOnly(vs []*Vertex) []*Vertex {
	n := 0
	for _, v := range vs {
		if !v.finished {
			n++
		}
	}
	if n == len(vs) {
		return vs
	}
	if n == 0 {
		return nil
	}
	out := make([]*Vertex, 0, n)
	for _, v := range vs {
		if !v.finished {
			out = append(out, v)
		}
	}
	return out
}

// prune drops the finished members of a segment's state; it returns false when the
// segment constrains nothing any more.
func (d *depState) prune() bool {
	if !anyLive(d.cur) {
		return false
	}
	d.cur = liveOnly(d.cur)
	d.prev = liveOnly(d.prev)
	return true
}

// dep is one reason for an edge: parent touched [lo, hi) of array in a way the new
// vertex conflicts with.
type dep struct {
	parent *Vertex
	array  ArrayID
	lo, hi uint64
}

// depMap is one array's interval map.
type depMap struct {
	spans spanList[depState]
	live  int // accesses of unfinished vertices to the array
	stale int // finished accesses since the last compaction
}

// depTracker holds the interval maps of every array an active vertex accesses. It
// belongs to the Graph and is used under its lock.
type depTracker struct {
	policy DependencyPolicy
	arrays map[ArrayID]*depMap
	deps   []dep // what the current add found, read by the caller then reset
}

func newDepTracker(p DependencyPolicy) *depTracker {
	return &depTracker{policy: p, arrays: make(map[ArrayID]*depMap)}
}

// add records that v accesses a and appends to t.deps the vertices v must depend on,
// with the ranges that cause each (a vertex may appear several times; v never does).
// Cost: O(log n + segments touched) for the array's n segments, plus the members of
// the groups it joins or replaces.
func (t *depTracker) add(v *Vertex, a Access) {
	m := t.policy.depMode(a.Mode)
	dm := t.arrays[a.Array]
	if dm == nil {
		dm = &depMap{}
		t.arrays[a.Array] = dm
	}
	dm.live++
	dm.spans.update(a.Off, a.End(), func(lo, hi uint64, old depState, ok bool) (depState, bool) {
		return t.step(v, a.Array, lo, hi, old, ok, m), true
	}, sameDeps)
}

// step applies one access of v, in dependency mode m, to the segment [lo, hi) whose
// state was old (ok false for a gap), and returns the new state.
func (t *depTracker) step(v *Vertex, array ArrayID, lo, hi uint64, old depState, ok bool, m Mode) depState {
	if !ok || !anyLive(old.cur) {
		return depState{kind: m, cur: v.self[:]}
	}
	if m != Write && old.kind == m {
		t.emit(old.prev, v, array, lo, hi)
		return depState{kind: m, cur: join(old.cur, v), prev: old.prev}
	}
	t.emit(old.cur, v, array, lo, hi)
	if m == Write {
		return depState{kind: m, cur: v.self[:]}
	}
	return depState{kind: m, cur: v.self[:], prev: old.cur}
}

// emit appends a dep on each live member of group other than v.
func (t *depTracker) emit(group []*Vertex, v *Vertex, array ArrayID, lo, hi uint64) {
	for _, p := range group {
		if p != v && !p.finished {
			t.deps = append(t.deps, dep{parent: p, array: array, lo: lo, hi: hi})
		}
	}
}

// join returns group's live members plus v, in a new clipped slice (group itself when
// v is already a member).
func join(group []*Vertex, v *Vertex) []*Vertex {
	n := 0
	for _, p := range group {
		if p == v {
			return group
		}
		if !p.finished {
			n++
		}
	}
	out := make([]*Vertex, 0, n+1)
	for _, p := range group {
		if !p.finished {
			out = append(out, p)
		}
	}
	return append(out, v)
}

// finished accounts for a finished vertex's access to array: the array's map goes
// when no unfinished vertex accesses the array, and is compacted when enough of it is
// stale.
func (t *depTracker) finished(array ArrayID) {
	dm := t.arrays[array]
	if dm == nil {
		return
	}
	if dm.live--; dm.live == 0 {
		delete(t.arrays, array)
		return
	}
	dm.stale++
	if 4*dm.stale < dm.spans.len() {
		return
	}
	dm.stale = 0
	dm.spans.compact((*depState).prune, sameDeps)
	if dm.spans.len() == 0 {
		delete(t.arrays, array)
	}
}

// segments returns the number of segments over all arrays.
func (t *depTracker) segments() int {
	n := 0
	for _, dm := range t.arrays {
		n += dm.spans.len()
	}
	return n
}
