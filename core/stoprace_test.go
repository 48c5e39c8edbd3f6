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

// A sender closes gracefully right after a message too large to be admitted on its
// headers' word, whose frames (eager) are in UCX's queue, not yet claimed, when the
// endpoint's end is handled: all the peer sent is here once it said goodbye, so the
// message waiting for its frames is received, not failed.
func TestMultiGoodbyeReceivesAWaitingMessageWhoseFramesAreHere(t *testing.T) {
	eager := Options{UCXOptions: map[string]string{"RNDV_THRESH": "inf"}}
	client := newTestEngine(t, eager)
	serverOpts := eager
	serverOpts.MaxOutstandingBytes = 2 << 20 // unproven: 256 KiB per endpoint
	server := newTestEngine(t, serverOpts)
	cep, sep, cc, sc := pair(t, client, server)
	recv, err := server.RecvMulti(sep, endpointInfo(t, server, sep).RecvTag)
	if err != nil {
		t.Fatal(err)
	}
	tag := endpointInfo(t, client, cep).SendTag
	sendRaw(t, client, cep, cc, tag, okHeader(0, 40, full(40, 16<<10))) // 640 KiB
	settle(t, server)
	noCompletion(t, sc, recv)
	// On the server's thread: UCX is progressed and its events handled until the
	// peer's goodbye was, but nothing is drained from UCX's queue; then the endpoint's
	// end is handled (as the watch of its socket reports it: peerGone) before any
	// drain could claim the frames.
	ended := make(chan bool, 1)
	server.pool.push(submission{op: opCall, call: func() {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			server.worker.Progress()
			server.drainEvents()
			if ep := server.eps.get(sep); ep != nil && ep.peerSaidGoodbye {
				server.onEndpointError(sep, ucxx.StatusConnectionReset)
				ended <- true
				return
			}
		}
		ended <- false
	}})
	frames := make([][]byte, 40)
	for i := range frames {
		frames[i] = bytes.Repeat([]byte{byte(i)}, 16<<10)
		if _, err := client.TagSend(cep, addr(frames[i]), uint64(len(frames[i])), tag|MultiTagBit, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.CloseEndpoint(cep, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if !<-ended {
		t.Fatal("no goodbye came")
	}
	comp := sc.wait(recv, 10*time.Second)
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
	eager := Options{UCXOptions: map[string]string{"RNDV_THRESH": "inf"}}
	client := newTestEngine(t, eager)
	serverOpts := eager
	serverOpts.MaxOutstandingBytes = 2 << 20 // endpoint 1 MiB, unproven 256 KiB
	server := newTestEngine(t, serverOpts)
	cep, sep, cc, sc := pair(t, client, server)
	const streams = 4
	rtag := endpointInfo(t, server, sep).RecvTag
	stag := endpointInfo(t, client, cep).SendTag
	var recvs []uint64
	for s := uint64(1); s <= streams; s++ {
		id, err := server.RecvMulti(sep, rtag|s)
		if err != nil {
			t.Fatal(err)
		}
		recvs = append(recvs, id)
	}
	settle(t, server)
	for s := uint64(1); s <= streams; s++ {
		sendRaw(t, client, cep, cc, stag|s, okHeader(0, 40, full(40, 16<<10))) // 640 KiB
	}
	settle(t, server)
	for _, id := range recvs {
		noCompletion(t, sc, id)
	}
	type seen struct {
		ok                    bool
		receiving, unreserved int64
		max                   int64
	}
	ended := make(chan seen, 1)
	server.pool.push(submission{op: opCall, call: func() {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			server.worker.Progress()
			server.drainEvents()
			if ep := server.eps.get(sep); ep != nil && ep.peerSaidGoodbye {
				server.onEndpointError(sep, ucxx.StatusConnectionReset)
				var s seen
				s.ok, s.max = true, server.multi.admission.maxWorker
				ops := map[*multiOp]bool{}
				for _, r := range server.requests.byID {
					if op := r.multi; op != nil && op.recv && op.framesPosted && !ops[op] {
						ops[op] = true
						s.receiving += int64(op.plan.footprint)
						if op.reserved == 0 {
							s.unreserved += int64(op.plan.footprint)
						}
					}
				}
				ended <- s
				return
			}
		}
		ended <- seen{}
	}})
	var keep [][]byte
	for s := uint64(1); s <= streams; s++ {
		for i := 0; i < 40; i++ {
			f := bytes.Repeat([]byte{byte(i)}, 16<<10)
			keep = append(keep, f)
			if _, err := client.TagSend(cep, addr(f), uint64(len(f)), (stag|s)|MultiTagBit, 0, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := client.CloseEndpoint(cep, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	s := <-ended
	if !s.ok {
		t.Fatal("no goodbye came")
	}
	for _, id := range recvs {
		if c := sc.wait(id, 10*time.Second); ucxx.Status(c.Status) == ucxx.StatusOK {
			takeBlock(t, c.Length)
		}
	}
	runtime.KeepAlive(keep)
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
	eager := Options{UCXOptions: map[string]string{"RNDV_THRESH": "inf"}}
	client := newTestEngine(t, eager)
	serverOpts := eager
	serverOpts.MaxOutstandingBytes = 2 << 20
	server := newTestEngine(t, serverOpts)
	cep, sep, cc, sc := pair(t, client, server)
	recv, err := server.RecvMulti(sep, endpointInfo(t, server, sep).RecvTag)
	if err != nil {
		t.Fatal(err)
	}
	tag := endpointInfo(t, client, cep).SendTag
	sendRaw(t, client, cep, cc, tag, okHeader(0, 40, full(40, 16<<10))) // 640 KiB
	settle(t, server)
	noCompletion(t, sc, recv)
	ended := make(chan bool, 1)
	server.pool.push(submission{op: opCall, call: func() {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			server.worker.Progress()
			server.drainEvents()
			if ep := server.eps.get(sep); ep != nil && ep.peerSaidGoodbye {
				server.closeEndpoint(&submission{op: opCloseEndpoint, ep: sep, timeout: int64(time.Second)})
				ended <- true
				return
			}
		}
		ended <- false
	}})
	var keep [][]byte
	for i := 0; i < 39; i++ { // one short
		f := bytes.Repeat([]byte{byte(i)}, 16<<10)
		keep = append(keep, f)
		if _, err := client.TagSend(cep, addr(f), uint64(len(f)), tag|MultiTagBit, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.CloseEndpoint(cep, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if !<-ended {
		t.Fatal("no goodbye came")
	}
	c := sc.wait(recv, 10*time.Second)
	t.Logf("receive: %v", ucxx.Status(c.Status))
	runtime.KeepAlive(keep)
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
	client := newTestEngine(t, Options{})
	server := newTestEngine(t, Options{MaxOutstandingBytes: 1 << 20})
	cep, sep, cc, sc := pair(t, client, server)
	recv, err := server.RecvMulti(sep, endpointInfo(t, server, sep).RecvTag)
	if err != nil {
		t.Fatal(err)
	}
	settle(t, server)
	many := make([][]byte, FramesPerHeader+1) // two headers
	for i := range many {
		many[i] = []byte{byte(i)}
	}
	first := wireMessages(many, make([]uint8, len(many)))[0]
	held, sent, done := make(chan struct{}), make(chan struct{}), make(chan bool, 1)
	server.pool.push(submission{op: opCall, call: func() {
		close(held)
		<-sent
		for deadline := time.Now().Add(5 * time.Second); len(server.worker.Events()) == 0 && time.Now().Before(deadline); {
			server.worker.Progress()
		}
		done <- len(server.worker.Events()) > 0
		server.closeEndpoint(&submission{op: opCloseEndpoint, ep: sep, timeout: int64(time.Second)}) // what CloseEndpoint does
	}})
	<-held
	sendRaw(t, client, cep, cc, endpointInfo(t, client, cep).SendTag, first)
	close(sent)
	if !<-done {
		t.Fatal("no event from UCX")
	}
	c := sc.wait(recv, 5*time.Second) // fails the test if the receive never ends
	t.Logf("receive: %v", ucxx.Status(c.Status))
}
