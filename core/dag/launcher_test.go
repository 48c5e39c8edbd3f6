package dag

import (
	"sync"
	"testing"
	"time"
)

// launchLog records, in order, the vertices a launcher queued, per lane and overall.
type launchLog struct {
	mu     sync.Mutex
	lanes  map[string][]*Vertex
	all    []*Vertex
	queued chan struct{} // one token per vertex queued
}

func newLaunchLog() *launchLog {
	return &launchLog{lanes: map[string][]*Vertex{}, queued: make(chan struct{}, 64)}
}

func (g *launchLog) add(lane string, v *Vertex) {
	g.mu.Lock()
	g.lanes[lane] = append(g.lanes[lane], v)
	g.all = append(g.all, v)
	g.mu.Unlock()
	g.queued <- struct{}{}
}

func (g *launchLog) count(lane string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.lanes[lane])
}

// waitLauncher fails t if x still has work after a generous bound (a hang).
func waitLauncher(t *testing.T, x *Launcher[string], what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { x.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal(what)
	}
}

// TestLauncherLanesOverlap: one lane's queueing does not wait for another's (lane a's
// first vertex is queued only once lane b's has been: one goroutine for both lanes
// would never finish); each lane's vertices are queued in the order deferred, later
// ones deferred behind an earlier one even when they would not block, and so are
// vertices deferred from inside a queueing (as Launched starts children).
func TestLauncherLanesOverlap(t *testing.T) {
	bQueued := make(chan struct{})
	log := newLaunchLog()
	a := []*Vertex{{}, {}, {}, {}}
	b := []*Vertex{{}}
	var x *Launcher[string]
	x = NewLauncher(func(lane string, v *Vertex) bool {
		first := log.count(lane) == 0
		if lane == "a" && first {
			<-bQueued
			// re-entry: a later vertex of a, started while a is queueing
			if !x.Defer("a", a[3], false) {
				t.Error("a vertex started during its lane's queueing was not deferred")
			}
		}
		log.add(lane, v)
		if lane == "b" && first {
			close(bQueued)
		}
		return false // ended, not queued: no Launched for these bare vertices
	})
	if !x.Defer("a", a[0], true) {
		t.Fatal("a blocking vertex was not deferred")
	}
	for _, v := range a[1:3] {
		if !x.Defer("a", v, false) {
			t.Fatal("a vertex behind a deferred one of its lane was not deferred")
		}
	}
	if !x.Defer("b", b[0], true) {
		t.Fatal("lane b's blocking vertex was not deferred")
	}
	waitLauncher(t, x, "lane a's queueing waited for lane b's, which waited behind it")
	for lane, want := range map[string][]*Vertex{"a": a, "b": b} {
		got := log.lanes[lane]
		if len(got) != len(want) {
			t.Fatalf("lane %s: %d vertices queued, want %d", lane, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("lane %s queued out of order: %v, want %v", lane, got, want)
			}
		}
	}
	if x.Defer("a", &Vertex{}, false) {
		t.Error("a non-blocking vertex of an idle lane was deferred")
	}
}

// TestSharedLauncherKeepsTheOrder: a shared launcher queues every lane's vertices on
// one goroutine, in the order deferred across lanes.
func TestSharedLauncherKeepsTheOrder(t *testing.T) {
	log := newLaunchLog()
	release := make(chan struct{})
	x := NewSharedLauncher(func(lane string, v *Vertex) bool {
		<-release
		log.add(lane, v)
		return false
	})
	want := []*Vertex{{}, {}, {}, {}}
	for i, v := range want {
		if !x.Defer([]string{"a", "b"}[i%2], v, true) {
			t.Fatal("a blocking vertex was not deferred")
		}
	}
	close(release)
	waitLauncher(t, x, "the shared launcher did not finish")
	for i := range want {
		if log.all[i] != want[i] {
			t.Fatalf("queued out of the deferral order: %v, want %v", log.all, want)
		}
	}
}
