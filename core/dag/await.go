package dag

import (
	"context"
	"time"

	"github.com/ucxx-go/ucxx-go/core/internal/pause"
)

// awaitSpin is how long a host wait (Vertex.Wait, Graph.Wait) keeps looking before
// it blocks. The end it waits for usually comes from another thread (a GPU lane's
// poller, a worker, the progress thread) within microseconds of the wait starting,
// and a blocked thread's wake-up costs tens of microseconds on an idle core and, on a
// virtual machine whose CPUs all went idle, up to milliseconds.
const awaitSpin = 200 * time.Microsecond

// awaitClosed waits until done is closed or ctx ends: for up to awaitSpin it looks
// at done and polls the graph's Poller lanes (so a GPU vertex's end is learned on
// this thread), giving its CPU to other runnable threads between looks (pause.Yield:
// the caller may be a thread locked to its goroutine, such as Python's), then blocks.
//
// Errors: ctx.Err() when ctx ends first (done closed by then wins).
func (g *Graph) awaitClosed(ctx context.Context, done <-chan struct{}) error {
	for start := time.Now(); time.Since(start) < awaitSpin; {
		select {
		case <-done:
			return nil
		default:
		}
		for _, p := range g.pollers {
			p.Poll()
		}
		pause.Yield()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		select { // both ready: select chose at random
		case <-done:
			return nil
		default:
		}
		return ctx.Err()
	}
}
