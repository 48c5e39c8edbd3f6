package dag

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// window is the number of active vertices the benchmarks keep: every window vertices,
// all of them are ended, so the graph always holds up to 100k vertices.
const window = 100_000

// batchLane records started vertices for the benchmark to end in bulk: no goroutine
// hand-off, so the benchmark measures the graph, not the scheduler of the runtime.
type batchLane struct{ started []*Vertex }

func (l *batchLane) Name() string    { return "batch" }
func (l *batchLane) Start(v *Vertex) { l.started = append(l.started, v) }

// endAll ends every started vertex, and those that start because of it.
func (l *batchLane) endAll() {
	for len(l.started) > 0 {
		s := l.started
		l.started = nil
		for _, v := range s {
			v.End(nil)
		}
	}
}

// patterns are the access patterns benchmarked; each returns vertex i's accesses.
var patterns = []struct {
	name   string
	access func(rng *rand.Rand, i int) []Access
}{
	// Disjoint 64-byte slices of 16 arrays: no edges, 100k live segments.
	{"independent", func(_ *rand.Rand, i int) []Access {
		return []Access{{Array: ArrayID(i % 16), Off: uint64(i/16) * 64, Len: 64, Mode: Write}}
	}},
	// Read-modify-write of one range: a chain, one edge each.
	{"chain", func(_ *rand.Rand, i int) []Access {
		return []Access{{Array: 1, Off: 0, Len: 4096, Mode: ReadWrite}}
	}},
	// A read and a write of random ranges (up to 4 KiB) of 16 arrays of 64 MiB: some
	// overlaps, about one segment touched per access.
	{"random-sparse", func(rng *rand.Rand, i int) []Access { return randomPair(rng, 64<<20) }},
	// The same over 16 arrays of 1 MiB: with 100k active vertices every byte is in ~24
	// live accesses; each access touches ~5 segments and a vertex gets ~6.5 parents.
	// A stress case: the cost is cache misses on the segments and vertices touched.
	{"random-dense", func(rng *rand.Rand, i int) []Access { return randomPair(rng, 1<<20) }},
}

func randomPair(rng *rand.Rand, size int) []Access {
	return []Access{
		{Array: ArrayID(rng.IntN(16)), Off: uint64(rng.IntN(size)), Len: uint64(1 + rng.IntN(4096)), Mode: Read},
		{Array: ArrayID(rng.IntN(16)), Off: uint64(rng.IntN(size)), Len: uint64(1 + rng.IntN(4096)), Mode: Write},
	}
}

// BenchmarkAddVertex measures the scheduling cost per vertex: Add (interval maps,
// edges, the lane hand-off) plus, amortized, End (finishing, freeing, starting
// children), with up to 100k active vertices. What dominates: the interval map
// updates (a binary search and a slices.Replace per access) and the allocations of
// the vertex, its accesses and edges. It reports the heap held per active vertex at
// 100k active vertices (B/active-vertex).
func BenchmarkAddVertex(b *testing.B) {
	for _, p := range patterns {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			lane := &batchLane{}
			g := newGraph(b, Options{})
			rng := rand.New(rand.NewPCG(1, 2))
			n := 0
			for b.Loop() {
				if _, err := g.Add(Task{Accesses: p.access(rng, n), Lane: lane}); err != nil {
					b.Fatal(err)
				}
				if n++; n%window == 0 {
					lane.endAll()
				}
			}
			lane.endAll()
			b.ReportMetric(footprint(b, p.access), "B/active-vertex")
		})
	}
	// The same through a HostLane's goroutines running empty functions: the
	// end-to-end cost including the hand-off to workers.
	b.Run("random-dense-hostlane", func(b *testing.B) {
		g := newGraph(b, Options{HostLanes: 2})
		rng := rand.New(rand.NewPCG(1, 2))
		n := 0
		for b.Loop() {
			if _, err := g.Add(Task{Accesses: patterns[3].access(rng, n)}); err != nil {
				b.Fatal(err)
			}
			n++
		}
		waitIdle(b, g)
		g.Close()
	})
}

// footprint returns the heap held per active vertex with window vertices active.
func footprint(b *testing.B, access func(*rand.Rand, int) []Access) float64 {
	b.StopTimer()
	defer b.StartTimer()
	lane := &batchLane{}
	g := newGraph(b, Options{})
	rng := rand.New(rand.NewPCG(1, 2))
	tasks := make([]Task, window) // made first: the caller's, not the graph's
	for i := range tasks {
		tasks[i] = Task{Accesses: access(rng, i), Lane: lane}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range tasks {
		if _, err := g.Add(tasks[i]); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if s := g.Stats(); s.Active != window {
		b.Fatalf("%d active, want %d", s.Active, window)
	}
	lane.endAll()
	runtime.KeepAlive(g)
	runtime.KeepAlive(tasks)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / window
}
