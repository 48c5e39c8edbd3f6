package core

import (
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// onlyCompletions fails t unless every completion c has read or can read now is one
// of ids: a warm-up reports nothing but its own completion.
func onlyCompletions(t *testing.T, c *collector, ids ...uint64) {
	t.Helper()
	for n := c.q.Pop(c.buf[:]); n > 0; n = c.q.Pop(c.buf[:]) {
		for _, comp := range c.buf[:n] {
			c.got[comp.ID] = comp
		}
	}
	for id, comp := range c.got {
		known := false
		for _, want := range ids {
			known = known || id == want
		}
		if !known {
			t.Fatalf("unexpected completion %#x: %+v", id, comp)
		}
	}
}

// wantIdle fails t unless e has no endpoint, listener or request left.
func wantIdle(t *testing.T, e *Engine) {
	t.Helper()
	st, err := e.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if st.Endpoints != 0 || st.Listeners != 0 || st.InFlight != 0 {
		t.Fatalf("after the warm-up: %+v; want no endpoint, listener or request", st)
	}
}

// TestWarmUp: a warm-up completes, leaves nothing open and reports nothing to the
// application; asked again it completes at once; connections work afterwards.
func TestWarmUp(t *testing.T) {
	server, client := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	sc := newCollector(t, server)
	id, err := server.WarmUp("127.0.0.1")
	if err != nil {
		t.Fatalf("WarmUp: %v", err)
	}
	if c := sc.wait(id, 10*time.Second); c.Status != 0 {
		t.Fatalf("WarmUp completed with %v", ucxx.Status(c.Status))
	}
	again, err := server.WarmUp("192.0.2.1") // an address no device has: not tried
	if err != nil {
		t.Fatalf("WarmUp: %v", err)
	}
	if c := sc.wait(again, 5*time.Second); c.Status != 0 {
		t.Fatalf("second WarmUp completed with %v; want the first one's OK", ucxx.Status(c.Status))
	}
	settle(t, server)
	onlyCompletions(t, sc)
	wantIdle(t, server)

	cep, sep, cc, sc2 := pair(t, client, server)
	exchange(t, client, cep, cc, server, sep, sc2, []byte("after the warm-up"))
	exchange(t, server, sep, sc2, client, cep, cc, []byte("and back"))
}

// TestWarmUpFailure: a warm-up through an address no device has fails with UCX's
// status, leaves nothing open, and a later one through a good address succeeds.
func TestWarmUpFailure(t *testing.T) {
	e := newTestEngine(t, Options{})
	c := newCollector(t, e)
	id, err := e.WarmUp("192.0.2.1") // TEST-NET-1: not this host's
	if err != nil {
		t.Fatalf("WarmUp: %v", err)
	}
	if comp := c.wait(id, 10*time.Second); comp.Status == 0 {
		t.Fatal("a warm-up through an address of no local device succeeded")
	}
	settle(t, e)
	onlyCompletions(t, c)
	wantIdle(t, e)
	id, err = e.WarmUp("127.0.0.1")
	if err != nil {
		t.Fatalf("WarmUp: %v", err)
	}
	if comp := c.wait(id, 10*time.Second); comp.Status != 0 {
		t.Fatalf("WarmUp after a failed one: %v", ucxx.Status(comp.Status))
	}
	wantIdle(t, e)
}

// TestWarmUpBeside: an application's listener and connection made while the
// engine's warm-up runs (Options.WarmUp) get their events, and only theirs; a WarmUp
// call then waits for the warm-up that started with the engine.
func TestWarmUpBeside(t *testing.T) {
	server := newTestEngine(t, Options{WarmUp: "127.0.0.1"})
	client := newTestEngine(t, Options{})
	sc := newCollector(t, server)
	lh, port, err := server.Listen("127.0.0.1", 0)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	cc := newCollector(t, client)
	cid, err := client.Connect("127.0.0.1", port, 5*time.Second)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	comp := cc.wait(cid, 10*time.Second)
	if comp.Status != 0 {
		t.Fatalf("Connect: %v", ucxx.Status(comp.Status))
	}
	acc := sc.wait(EventListenerAccept|lh, 10*time.Second)
	wid, err := server.WarmUp("127.0.0.1")
	if err != nil {
		t.Fatalf("WarmUp: %v", err)
	}
	if c := sc.wait(wid, 10*time.Second); c.Status != 0 {
		t.Fatalf("WarmUp: %v", ucxx.Status(c.Status))
	}
	settle(t, server)
	onlyCompletions(t, sc)
	exchange(t, client, comp.Length, cc, server, acc.Length, sc, []byte("beside the warm-up"))
	st, err := server.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if st.Endpoints != 1 || st.Listeners != 1 {
		t.Fatalf("server after the warm-up: %+v; want the application's endpoint and listener only", st)
	}
}

// TestWarmUpShutdown: an engine stopped while its warm-up runs shuts down cleanly
// and answers a WarmUp waiting for it.
func TestWarmUpShutdown(t *testing.T) {
	e, err := New(Options{WarmUp: "127.0.0.1"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	engineOpened()
	c := newCollector(t, e)
	id, err := e.WarmUp("127.0.0.1")
	if err != nil {
		t.Fatalf("WarmUp: %v", err)
	}
	if err := e.Shutdown(5 * time.Second); err != nil {
		t.Fatalf("Shutdown during the warm-up: %v", err)
	}
	if comp := c.wait(id, 5*time.Second); comp.Status != 0 && ucxx.Status(comp.Status) != ucxx.StatusCanceled {
		t.Fatalf("WarmUp at shutdown: %v; want OK or canceled", ucxx.Status(comp.Status))
	}
	e.FreeQueue()
	engineShut()
}
