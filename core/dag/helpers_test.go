package dag

import (
	"context"
	"sync"
	"testing"
	"time"
)

// manualLane starts nothing by itself: it records the vertices the graph starts, and
// the test ends them.
type manualLane struct {
	name    string
	mu      sync.Mutex
	started []*Vertex
	chain   func(p, v *Vertex) bool // non-nil: a ChainingLane
}

func (l *manualLane) Name() string { return l.name }

func (l *manualLane) Start(v *Vertex) {
	l.mu.Lock()
	l.started = append(l.started, v)
	l.mu.Unlock()
}

// take returns and forgets the vertices started since the last take.
func (l *manualLane) take() []*Vertex {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.started
	l.started = nil
	return s
}

// endAll ends every started vertex, and those they start, until none is left.
func (l *manualLane) endAll() {
	for {
		s := l.take()
		if len(s) == 0 {
			return
		}
		for _, v := range s {
			v.End(nil)
		}
	}
}

// chainingManual is a manualLane that chains after parents for which chain says so.
type chainingManual struct{ *manualLane }

func (l chainingManual) Chains(p, v *Vertex) bool { return l.chain(p, v) }

func acc(array ArrayID, off, n uint64, m Mode) Access {
	return Access{Array: array, Off: off, Len: n, Mode: m}
}

// newGraph makes a graph for a test.
func newGraph(t testing.TB, opts Options) *Graph {
	t.Helper()
	g, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// closeGraph closes g at the end of the test, requiring every vertex to finish first.
func closeGraph(t testing.TB, g *Graph) {
	t.Helper()
	t.Cleanup(func() {
		waitIdle(t, g)
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
}

// waitIdle waits for g to have no active vertex, failing the test after 30 s (a hang
// is a bug; the bound only turns it into a readable failure).
func waitIdle(t testing.TB, g *Graph) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := g.Wait(ctx); err != nil {
		t.Fatalf("graph did not become idle: %v (%+v)", err, g.Stats())
	}
}

// ids returns the ids of vs.
func ids(vs []*Vertex) []VertexID {
	out := make([]VertexID, len(vs))
	for i, v := range vs {
		out[i] = v.ID()
	}
	return out
}
