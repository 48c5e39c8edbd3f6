package dag

import (
	"sync"
	"testing"
	"time"
)

// TestLauncherLanesOverlap: one lane's queueing does not wait for another's (lane a's
// first vertex is queued only once lane b's has been: one goroutine for both lanes
// would never finish), and each lane's vertices are queued in the order deferred,
// later ones deferred behind an earlier one even when they would not block.
func TestLauncherLanesOverlap(t *testing.T) {
	bQueued := make(chan struct{})
	var mu sync.Mutex
	got := map[string][]*Vertex{}
	x := NewLauncher(func(lane string, v *Vertex) bool {
		mu.Lock()
		first := len(got[lane]) == 0
		mu.Unlock()
		if lane == "a" && first {
			<-bQueued
		}
		mu.Lock()
		got[lane] = append(got[lane], v)
		mu.Unlock()
		if lane == "b" && first {
			close(bQueued)
		}
		return false // ended, not queued: no Launched for these bare vertices
	})
	a := []*Vertex{{}, {}, {}}
	b := &Vertex{}
	if !x.Defer("a", a[0], true) {
		t.Fatal("a blocking vertex was not deferred")
	}
	for _, v := range a[1:] {
		if !x.Defer("a", v, false) {
			t.Fatal("a vertex behind a deferred one of its lane was not deferred")
		}
	}
	if !x.Defer("b", b, true) {
		t.Fatal("lane b's blocking vertex was not deferred")
	}
	done := make(chan struct{})
	go func() { x.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("lane a's queueing waited for lane b's, which waited behind it")
	}
	for i, v := range a {
		if got["a"][i] != v {
			t.Fatalf("lane a queued out of order: %v, want %v", got["a"], a)
		}
	}
	if x.Defer("a", &Vertex{}, false) {
		t.Error("a non-blocking vertex of an idle lane was deferred")
	}
}
