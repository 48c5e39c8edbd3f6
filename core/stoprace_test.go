package core

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// A header UCX matched before the stop and the engine handles after it (the stop
// began in the same pass, before the worker's events were drained) ends its receive
// and posts nothing the stop would have to wait for: the stop runs no longer than
// its work, whatever the header says.
func TestStopRacesWorkerStreamHeader(t *testing.T) {
	for _, c := range []struct {
		name   string
		header []byte
	}{
		// The first of two headers: the second would be received next.
		{"first-of-two-headers", firstOfTwoHeaders()},
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

// afterWire races the wire on e: with e's progress thread held, send runs (the peer's
// message reaches e's transport); then, on that thread, UCX is progressed until it has
// an event to hand over, and then runs before the engine handles that event. It
// returns once then has run.
func afterWire(t *testing.T, e *Engine, send, then func()) {
	t.Helper()
	held, sent, done := make(chan struct{}), make(chan struct{}), make(chan bool, 1)
	e.pool.push(submission{op: opCall, call: func() {
		close(held)
		<-sent
		for deadline := time.Now().Add(5 * time.Second); len(e.worker.Events()) == 0 && time.Now().Before(deadline); {
			e.worker.Progress()
		}
		event := len(e.worker.Events()) > 0
		then()
		done <- event
	}})
	<-held
	send()
	close(sent)
	if !<-done {
		t.Error("no event from UCX")
	}
}

// firstOfTwoHeaders is the first header's tag message of a message of two headers.
func firstOfTwoHeaders() []byte {
	many := make([][]byte, FramesPerHeader+1)
	for i := range many {
		many[i] = []byte{byte(i)}
	}
	return wireMessages(many, make([]uint8, len(many)))[0]
}

// stopAfterWire shuts e down the way a stop racing the wire does (afterWire: the stop
// begins before the engine handles the peer's message). It returns when the stop
// began and the stop's result.
func stopAfterWire(t *testing.T, e *Engine, send func(), timeout time.Duration) (time.Time, error) {
	t.Helper()
	if !e.closing.CompareAndSwap(false, true) {
		t.Fatal("engine closed")
	}
	stopped := make(chan error, 1)
	var start time.Time
	afterWire(t, e, send, func() {
		start = time.Now()
		e.beginStop(start.Add(timeout), stopped)
	})
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

// A sender closes gracefully right after a message too large to be admitted on its
// headers' word, whose frames (eager) are in UCX's queue, not yet claimed, when the
// endpoint's end is handled: all the peer sent is here once it said goodbye, so the
// message waiting for its frames is received, not failed.
func TestMultiGoodbyeReceivesAWaitingMessageWhoseFramesAreHere(t *testing.T) {
	g := newGoodbyeRace(t, 1)
	// The endpoint's end is handled as the watch of its socket reports it (peerGone).
	frames := g.sendAndClose(t, 40, func() { g.server.onEndpointError(g.sep, ucxx.StatusConnectionReset) })
	comp := g.sc.wait(g.recvs[0], 10*time.Second)
	if st := ucxx.Status(comp.Status); st != ucxx.StatusOK {
		t.Fatalf("message: %v", st)
	}
	got := takeBlock(t, comp.Length)
	for i := range frames {
		if i >= len(got) || !bytes.Equal(got[i], frames[i]) {
			t.Fatalf("frame %d differs", i)
		}
	}
	runtime.KeepAlive(frames)
}

// The messages a graceful sender's endpoint leaves waiting are received at its end
// only with room reserved: a peer with several streams, each with a message whose
// frames are all here, does not get them received at once past MaxOutstandingBytes
// (4 messages of 640 KiB on one endpoint of a 2 MiB worker; a first version received
// them all, 2.5 MiB, without room).
func TestMultiGoodbyeReceivesOnlyWithRoom(t *testing.T) {
	g := newGoodbyeRace(t, 4)
	var s struct{ receiving, unreserved, max int64 }
	g.sendAndClose(t, 40, func() {
		g.server.onEndpointError(g.sep, ucxx.StatusConnectionReset)
		s.max = g.server.multi.admission.maxWorker
		ops := map[*multiOp]bool{}
		for _, r := range g.server.requests.byID {
			if op := r.multi; op != nil && op.recv && op.framesPosted && !ops[op] {
				ops[op] = true
				s.receiving += int64(op.plan.footprint)
				if op.reserved == 0 {
					s.unreserved += int64(op.plan.footprint)
				}
			}
		}
	})
	for _, id := range g.recvs {
		if c := g.sc.wait(id, 10*time.Second); ucxx.Status(c.Status) == ucxx.StatusOK {
			takeBlock(t, c.Length)
		}
	}
	t.Logf("being received at once: %d bytes, %d of them without room; MaxOutstandingBytes %d", s.receiving, s.unreserved, s.max)
	if s.unreserved > 0 || s.receiving > s.max {
		t.Fatalf("goodbye let %d bytes be received at once (%d without reserved room), bound %d", s.receiving, s.unreserved, s.max)
	}
}

// The application closes an endpoint whose peer said goodbye while a message waits
// for frames that are in UCX's queue, one short: the message fails and its frames are
// dropped with the endpoint, none left held (a first version of the graceful end's
// receive took them into the store after the close had dropped the endpoint's held
// messages, where they stayed until shutdown).
func TestMultiCloseAfterGoodbyeLeavesNothingHeld(t *testing.T) {
	g := newGoodbyeRace(t, 1)
	server, sep := g.server, g.sep
	g.sendAndClose(t, 39, func() { // one frame short
		server.closeEndpoint(&submission{op: opCloseEndpoint, ep: sep, timeout: int64(time.Second)})
	})
	c := g.sc.wait(g.recvs[0], 10*time.Second)
	t.Logf("receive: %v", ucxx.Status(c.Status))
	settle(t, server)
	held, bytesHeld := make(chan int, 1), make(chan int64, 1)
	server.pool.push(submission{op: opCall, call: func() {
		server.drainUnexpected()
		n, b := 0, int64(0)
		for _, h := range server.unexpected.held {
			if h.owner != nil && h.owner.handle == sep {
				n++
				b += h.charge
			}
		}
		held <- n
		bytesHeld <- b
	}})
	n, b := <-held, <-bytesHeld
	if n > 0 {
		t.Fatalf("%d messages (%d bytes charged) of the endpoint the application closed are still held", n, b)
	}
}

// TestStopRacesWorkerStreamHeader on an endpoint's stream: the application closes an
// endpoint in the pass in which UCX matched the first of a message's two headers (its
// completion not handled yet). The header is not fed: the second header's receive,
// which nothing would cancel, is not posted, and the receive ends (it never did
// before).
func TestMultiCloseRacesFirstOfTwoHeaders(t *testing.T) {
	r := newCloseRace(t)
	afterWire(t, r.server, func() {
		sendRaw(t, r.client, r.cep, r.cc, endpointInfo(t, r.client, r.cep).SendTag, firstOfTwoHeaders())
	}, func() {
		r.server.closeEndpoint(&submission{op: opCloseEndpoint, ep: r.sep, timeout: int64(time.Second)}) // what CloseEndpoint does
	})
	c := r.sc.wait(r.recv, 5*time.Second) // fails the test if the receive never ends
	t.Logf("receive: %v", ucxx.Status(c.Status))
}

// closeRace is a server with a 1 MiB multi-buffer budget and a client connected to it,
// with a multi-buffer receive posted on the server's endpoint and the server settled:
// the set-up of the tests that race an endpoint's close against the wire (afterWire).
type closeRace struct {
	client, server *Engine
	cep, sep       uint64
	cc, sc         *collector
	recv           uint64 // the server's receive
}

func newCloseRace(t *testing.T) *closeRace {
	t.Helper()
	r := &closeRace{client: newTestEngine(t, Options{}), server: newTestEngine(t, Options{MaxOutstandingBytes: 1 << 20})}
	r.cep, r.sep, r.cc, r.sc = pair(t, r.client, r.server)
	var err error
	if r.recv, err = r.server.RecvMulti(r.sep, endpointInfo(t, r.server, r.sep).RecvTag); err != nil {
		t.Fatal(err)
	}
	settle(t, r.server)
	return r
}

// goodbyeRace is a server with a 2 MiB multi-buffer budget (1 MiB an endpoint, 256 KiB
// of it unproven) and a client connected to it, both sending eagerly, with a receive
// posted on each of streams tags of the server's endpoint, and for each a header of 40
// frames of 16 KiB (640 KiB: too large for its word alone) sent and waiting.
type goodbyeRace struct {
	client, server *Engine
	cep, sep       uint64
	cc, sc         *collector
	tags           []uint64 // the client's send tags, one a stream
	recvs          []uint64 // the server's receives, one a stream
}

func newGoodbyeRace(t *testing.T, streams int) *goodbyeRace {
	eager := Options{UCXOptions: map[string]string{"RNDV_THRESH": "inf"}}
	g := &goodbyeRace{client: newTestEngine(t, eager)}
	serverOpts := eager
	serverOpts.MaxOutstandingBytes = 2 << 20
	g.server = newTestEngine(t, serverOpts)
	g.cep, g.sep, g.cc, g.sc = pair(t, g.client, g.server)
	rtag, stag := endpointInfo(t, g.server, g.sep).RecvTag, endpointInfo(t, g.client, g.cep).SendTag
	for s := range uint64(streams) {
		id, err := g.server.RecvMulti(g.sep, rtag|s)
		if err != nil {
			t.Fatal(err)
		}
		g.recvs, g.tags = append(g.recvs, id), append(g.tags, stag|s)
	}
	settle(t, g.server)
	for _, tag := range g.tags {
		sendRaw(t, g.client, g.cep, g.cc, tag, okHeader(0, 40, full(40, 16<<10)))
	}
	settle(t, g.server)
	for _, id := range g.recvs {
		noCompletion(t, g.sc, id)
	}
	return g
}

// sendAndClose has the client send n frames of each stream's message and close its
// endpoint gracefully, while the server's thread progresses UCX and handles its events
// until the goodbye was handled, draining nothing from UCX's queue: then end runs on
// that thread, before any drain could claim the frames. It returns the frames sent
// on the first stream, kept alive until the test ends.
func (g *goodbyeRace) sendAndClose(t *testing.T, n int, end func()) [][]byte {
	t.Helper()
	ended := make(chan bool, 1)
	g.server.pool.push(submission{op: opCall, call: func() {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			g.server.worker.Progress()
			g.server.drainEvents()
			if ep := g.server.eps.get(g.sep); ep != nil && ep.peerSaidGoodbye {
				end()
				ended <- true
				return
			}
		}
		ended <- false
	}})
	var all [][]byte
	for _, tag := range g.tags {
		for i := range n {
			f := bytes.Repeat([]byte{byte(i)}, 16<<10)
			all = append(all, f)
			if _, err := g.client.TagSend(g.cep, addr(f), uint64(len(f)), tag|MultiTagBit, 0, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := g.client.CloseEndpoint(g.cep, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if !<-ended {
		t.Fatal("no goodbye came")
	}
	runtime.KeepAlive(all) // the sends ended before the goodbye
	return all[:n]
}

// A stop while an endpoint's graceful close waits for the peer's answer to its
// goodbye (the peer's progress thread held: it answers nothing) forces that close:
// the stop ends at once, with nothing in flight (before, the endpoint's control
// receive stayed posted and the stop ran to its deadline).
func TestStopForcesAGracefulCloseWaitingForThePeer(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	_, sep, _, sc := pair(t, client, server)
	release := make(chan struct{})
	defer close(release)
	client.pool.push(submission{op: opCall, call: func() { <-release }})
	id, err := server.CloseEndpoint(sep, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	settle(t, server)
	noCompletion(t, sc, id)
	start := time.Now()
	err = server.Shutdown(3 * time.Second)
	if d := time.Since(start); err != nil || d > 2*time.Second {
		t.Fatalf("Shutdown took %v: %v", d, err)
	}
}
