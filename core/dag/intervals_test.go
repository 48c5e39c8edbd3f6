package dag

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// depCase is a program and, for each op, the earlier ops it must depend on (indexes).
type depCase struct {
	name   string
	policy DependencyPolicy
	ops    [][]Access
	want   [][]int
}

var depCases = []depCase{
	{name: "RAW", ops: [][]Access{{acc(1, 0, 10, Write)}, {acc(1, 0, 10, Read)}}, want: [][]int{nil, {0}}},
	{name: "WAR", ops: [][]Access{{acc(1, 0, 10, Read)}, {acc(1, 0, 10, Write)}}, want: [][]int{nil, {0}}},
	{name: "WAW", ops: [][]Access{{acc(1, 0, 10, Write)}, {acc(1, 0, 10, Write)}}, want: [][]int{nil, {0}}},
	{
		name: "read-read independent",
		ops:  [][]Access{{acc(1, 0, 10, Write)}, {acc(1, 0, 10, Read)}, {acc(1, 2, 4, Read)}, {acc(1, 0, 10, Write)}},
		want: [][]int{nil, {0}, {0}, {1, 2}},
	},
	{
		name: "disjoint slices independent",
		ops:  [][]Access{{acc(1, 0, 10, Write)}, {acc(1, 10, 10, Write)}, {acc(1, 20, 5, ReadWrite)}, {acc(1, 5, 10, Read)}},
		want: [][]int{nil, nil, nil, {0, 1}},
	},
	{
		name: "adjacent but not overlapping",
		ops:  [][]Access{{acc(1, 0, 10, Write)}, {acc(1, 10, 1, Read)}, {acc(1, 9, 1, Read)}},
		want: [][]int{nil, nil, {0}},
	},
	{
		name: "other array independent",
		ops:  [][]Access{{acc(1, 0, 10, Write)}, {acc(2, 0, 10, Write)}, {acc(2, 0, 10, Read), acc(1, 9, 1, Read)}},
		want: [][]int{nil, nil, {0, 1}},
	},
	{
		name: "partial overlaps",
		ops: [][]Access{
			{acc(1, 0, 10, Write)},
			{acc(1, 5, 10, Read)},
			{acc(1, 12, 8, Write)},
			{acc(1, 0, 20, Read)},
		},
		want: [][]int{nil, {0}, {1}, {0, 2}},
	},
	{
		name: "covering write drops older",
		ops: [][]Access{
			{acc(1, 0, 10, Write)},
			{acc(1, 0, 5, Read)},
			{acc(1, 5, 5, Read)},
			{acc(1, 0, 10, Write)},
			{acc(1, 0, 10, Read)},
			{acc(1, 2, 1, Write)},
			{acc(1, 0, 10, Write)},
		},
		want: [][]int{nil, {0}, {0}, {1, 2}, {3}, {4}, {4, 5}},
	},
	{
		name: "reduce",
		ops: [][]Access{
			{acc(1, 0, 10, Write)},
			{acc(1, 0, 10, Reduce)},
			{acc(1, 0, 10, Reduce)},
			{acc(1, 0, 10, Read)},
			{acc(1, 0, 10, Reduce)},
			{acc(1, 0, 10, Write)},
		},
		want: [][]int{nil, {0}, {0}, {1, 2}, {3}, {4}},
	},
	{
		name: "reduce after reads, partial",
		ops: [][]Access{
			{acc(1, 0, 10, Write)},
			{acc(1, 0, 10, Read)},
			{acc(1, 0, 5, Read)},
			{acc(1, 0, 10, Reduce)},
			{acc(1, 5, 5, Reduce)},
			{acc(1, 0, 10, Write)},
		},
		want: [][]int{nil, {0}, {0}, {1, 2}, {1}, {3, 4}},
	},
	{
		name: "read and reduce by one vertex is exclusive",
		ops: [][]Access{
			{acc(1, 0, 10, Reduce)},
			{acc(1, 0, 10, Read), acc(1, 0, 10, Reduce)},
			{acc(1, 0, 10, Reduce)},
		},
		want: [][]int{nil, {0}, {1}},
	},
	{
		name: "ReadWrite is a write",
		ops:  [][]Access{{acc(1, 0, 10, Read)}, {acc(1, 0, 10, ReadWrite)}, {acc(1, 0, 10, Read)}, {acc(1, 0, 10, ReadWrite)}},
		want: [][]int{nil, {0}, {1}, {2}},
	},
	{
		name: "one vertex reads and writes one array",
		ops: [][]Access{
			{acc(1, 0, 10, Write)},
			{acc(1, 0, 5, Read), acc(1, 5, 5, Write)},
			{acc(1, 0, 10, Read)},
			{acc(1, 3, 4, Write)},
		},
		want: [][]int{nil, {0}, {0, 1}, {1, 2}},
	},
	{
		name: "empty access touches nothing",
		ops:  [][]Access{{acc(1, 0, 10, Write)}, {acc(1, 5, 0, Write)}, {acc(1, 0, 10, Read)}},
		want: [][]int{nil, nil, {0}},
	},
	{
		name:   "no-const orders reads",
		policy: NoConst,
		ops:    [][]Access{{acc(1, 0, 10, Read)}, {acc(1, 0, 10, Read)}, {acc(1, 5, 10, Read)}, {acc(1, 0, 20, Reduce)}, {acc(1, 0, 20, Reduce)}},
		want:   [][]int{nil, {0}, {1}, {1, 2}, {3}},
	},
	{
		name:   "no-const disjoint still independent",
		policy: NoConst,
		ops:    [][]Access{{acc(1, 0, 10, Read)}, {acc(1, 10, 10, Read)}},
		want:   [][]int{nil, nil},
	},
}

func TestDependencyRules(t *testing.T) {
	for _, c := range depCases {
		t.Run(c.name, func(t *testing.T) {
			lane := &manualLane{name: "m"}
			g := newGraph(t, Options{Dependency: c.policy})
			var vs []*Vertex
			for i, op := range c.ops {
				v, err := g.Add(Task{Name: fmt.Sprint(i), Accesses: op, Lane: lane})
				if err != nil {
					t.Fatal(err)
				}
				var want []VertexID
				for _, j := range c.want[i] {
					want = append(want, vs[j].ID())
				}
				got := ids(v.Parents())
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("op %d %v: parents %v, want %v", i, op, got, want)
				}
				vs = append(vs, v)
			}
			lane.endAll()
			if s := g.Stats(); s.Active != 0 || s.Segments != 0 || s.Arrays != 0 {
				t.Errorf("after every vertex ended: %+v, want nothing left", s)
			}
		})
	}
}

func TestFinishedVerticesDropOut(t *testing.T) {
	lane := &manualLane{name: "m"}
	g := newGraph(t, Options{})
	w, _ := g.Add(Task{Accesses: []Access{acc(1, 0, 100, Write)}, Lane: lane})
	r, _ := g.Add(Task{Accesses: []Access{acc(1, 0, 50, Read)}, Lane: lane})
	for _, v := range lane.take() {
		if v != w {
			t.Fatalf("started %d before its parent ended", v.ID())
		}
		v.End(nil)
	}
	// w finished: a new reader of its range depends on nothing, a writer on r only.
	r2, _ := g.Add(Task{Accesses: []Access{acc(1, 0, 100, Read)}, Lane: lane})
	w2, _ := g.Add(Task{Accesses: []Access{acc(1, 0, 100, Write)}, Lane: lane})
	if p := r2.Parents(); len(p) != 0 {
		t.Errorf("reader after a finished writer has parents %v", ids(p))
	}
	if got := ids(w2.Parents()); !slices.Equal(sorted(got), sorted([]VertexID{r.ID(), r2.ID()})) {
		t.Errorf("writer parents %v, want %v and %v", got, r.ID(), r2.ID())
	}
	lane.endAll()
	if s := g.Stats(); s.Segments != 0 || s.Arrays != 0 || s.Active != 0 {
		t.Errorf("maps not emptied: %+v", s)
	}
}

func sorted(x []VertexID) []VertexID { slices.Sort(x); return x }

// TestIntervalMapBounded runs a long sliding-window workload: the maps must stay
// proportional to the live vertices, not to the history.
func TestIntervalMapBounded(t *testing.T) {
	lane := &manualLane{name: "m"}
	hold := &manualLane{name: "hold"} // keeps one vertex per array active throughout
	g := newGraph(t, Options{})
	for a := range ArrayID(5) {
		if _, err := g.Add(Task{Accesses: []Access{acc(a, 1<<20, 1, Write)}, Lane: hold}); err != nil {
			t.Fatal(err)
		}
	}
	maxSeg := 0
	for i := range 20000 {
		off := uint64(i%97) * 16
		if _, err := g.Add(Task{Accesses: []Access{acc(ArrayID(i%5), off, 64, Mode(1+i%4))}, Lane: lane}); err != nil {
			t.Fatal(err)
		}
		if i%10 == 9 {
			lane.endAll()
		}
		maxSeg = max(maxSeg, g.Stats().Segments)
	}
	lane.endAll()
	// 10 live vertices of 5 arrays, plus the 5 held, each splitting at most 2 segments.
	if maxSeg > 2*(10+5)+5 {
		t.Errorf("up to %d segments for at most 15 live vertices of 5 arrays", maxSeg)
	}
	if s := g.Stats(); s.Segments != 5 {
		t.Errorf("%d segments left with the 5 held vertices active, want 5", s.Segments)
	}
	hold.endAll()
	if s := g.Stats(); s.Segments != 0 {
		t.Errorf("%d segments left", s.Segments)
	}
}

// TestDependencyProperty checks the interval maps against the rule they implement, on
// random programs with random completions: every earlier active vertex that
// conflicts with a new one on some byte is its ancestor, and every edge joins two
// vertices that conflict on some byte.
func TestDependencyProperty(t *testing.T) {
	for seed := range uint64(200) {
		policy := DependencyPolicy(seed % 2)
		t.Run(fmt.Sprint(seed), func(t *testing.T) { checkDependencyProperty(t, seed, policy) })
	}
}

func checkDependencyProperty(t *testing.T, seed uint64, policy DependencyPolicy) {
	const arrays, size, ops = 2, 32, 60
	rng := rand.New(rand.NewPCG(seed, 1))
	lane := &manualLane{name: "m"}
	g := newGraph(t, Options{Dependency: policy})

	type rec struct {
		v       *Vertex
		modes   [arrays][size]Mode // combined mode per byte, 0 if untouched
		parents []*Vertex
	}
	var recs []*rec
	byVertex := map[*Vertex]*rec{}
	combine := func(a, b Mode) Mode {
		switch {
		case a == 0:
			return b
		case a == Read && b == Read, a == Reduce && b == Reduce:
			return a
		}
		return Write
	}
	for range ops {
		var accs []Access
		r := &rec{}
		for range 1 + rng.IntN(3) {
			a := ArrayID(rng.IntN(arrays))
			off := uint64(rng.IntN(size))
			n := uint64(rng.IntN(size - int(off) + 1))
			m := Mode(1 + rng.IntN(4))
			accs = append(accs, acc(a, off, n, m))
			for b := off; b < off+n; b++ {
				r.modes[a][b] = combine(r.modes[a][b], m)
			}
		}
		finishedBefore := map[*Vertex]bool{}
		for _, o := range recs {
			finishedBefore[o.v] = o.v.State() == Done
		}
		v, err := g.Add(Task{Accesses: accs, Lane: lane})
		if err != nil {
			t.Fatal(err)
		}
		r.v, r.parents = v, v.Parents()
		// Every edge is a conflict.
		for _, p := range r.parents {
			if !conflictOnSomeByte(policy, byVertex[p].modes, r.modes) {
				t.Fatalf("edge %d -> %d without a conflict (%v then %v)", p.ID(), v.ID(), p.Accesses(), accs)
			}
		}
		// Every conflict with an active vertex is ordered.
		for _, o := range recs {
			if finishedBefore[o.v] || !conflictOnSomeByte(policy, o.modes, r.modes) {
				continue
			}
			if !isAncestor(o.v, r, byVertex, func(x *rec) []*Vertex { return x.parents }) {
				t.Fatalf("vertex %d %v conflicts with earlier active %d %v but is not ordered after it", v.ID(), accs, o.v.ID(), o.v.Accesses())
			}
		}
		recs = append(recs, r)
		byVertex[v] = r
		// End a random part of what is running.
		started := lane.take()
		rng.Shuffle(len(started), func(i, j int) { started[i], started[j] = started[j], started[i] })
		k := rng.IntN(len(started) + 1)
		for _, s := range started[:k] {
			s.End(nil)
		}
		lane.mu.Lock()
		lane.started = append(lane.started, started[k:]...)
		lane.mu.Unlock()
	}
	lane.endAll()
}

func conflictOnSomeByte(policy DependencyPolicy, a, b [2][32]Mode) bool {
	for arr := range a {
		for i := range a[arr] {
			if a[arr][i] != 0 && b[arr][i] != 0 && policy.conflicts(a[arr][i], b[arr][i]) {
				return true
			}
		}
	}
	return false
}

func isAncestor[R any](anc *Vertex, from R, by map[*Vertex]R, parents func(R) []*Vertex) bool {
	seen := map[*Vertex]bool{}
	stack := append([]*Vertex(nil), parents(from)...)
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if p == anc {
			return true
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		stack = append(stack, parents(by[p])...)
	}
	return false
}
