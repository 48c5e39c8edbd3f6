package core

import (
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// A header UCX matched before the stop and the engine handles after it (the stop
// began in the same pass, before the worker's events were drained) ends its receive
// and posts nothing the stop would have to wait for: the stop runs no longer than
// its work, whatever the header says.
func TestStopRacesWorkerStreamHeader(t *testing.T) {
	many := make([][]byte, FramesPerHeader+1) // two headers
	for i := range many {
		many[i] = []byte{byte(i)}
	}
	for _, c := range []struct {
		name   string
		header []byte
	}{
		// The first of two headers: the second would be received next.
		{"first-of-two-headers", wireMessages(many, make([]uint8, len(many)))[0]},
		// Over the limits: its frame would be dropped next.
		{"rejected", okHeader(0, 1, []uint64{2 << 20})},
		// Admitted at once: its frame would be received next.
		{"admitted", okHeader(0, 1, []uint64{1 << 10})},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorkerStream(t, 1<<20)
			settle(t, w.server)
			start, err := stopAfterWire(t, w.server, func() { sendRaw(t, w.client, w.cep, w.cc, w.tag, c.header) }, 3*time.Second)
			if d := time.Since(start); err != nil || d > 2*time.Second {
				t.Fatalf("stop took %v: %v", d, err)
			}
			if comp := w.sc.wait(w.first, 5*time.Second); ucxx.Status(comp.Status) == ucxx.StatusOK {
				t.Fatal("the receive ended OK at the stop")
			}
		})
	}
}

// stopAfterWire shuts e down the way a stop racing the wire does: with e's progress
// thread held, send runs (the peer's message reaches e's transport); then, on that
// thread, UCX is progressed until it has an event to hand over, and the stop begins
// before the engine handles it. It returns when the stop began and the stop's result.
func stopAfterWire(t *testing.T, e *Engine, send func(), timeout time.Duration) (time.Time, error) {
	t.Helper()
	if !e.closing.CompareAndSwap(false, true) {
		t.Fatal("engine closed")
	}
	sent, held := make(chan struct{}), make(chan struct{})
	stopped := make(chan error, 1)
	var start time.Time
	e.pool.push(submission{op: opCall, call: func() {
		close(held)
		<-sent
		for deadline := time.Now().Add(5 * time.Second); len(e.worker.Events()) == 0 && time.Now().Before(deadline); {
			e.worker.Progress()
		}
		if len(e.worker.Events()) == 0 {
			t.Error("no event from UCX")
		}
		start = time.Now()
		e.beginStop(start.Add(timeout), stopped)
	}})
	<-held
	send()
	close(sent)
	select {
	case err := <-stopped:
		<-e.done
		e.closeWake()
		return start, err
	case <-time.After(timeout + 5*time.Second):
		t.Fatal("the stop did not end")
		return start, nil
	}
}
