package core

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// A message on a forced tag (its frames name no endpoint) with more frames than the
// shared bound on such messages holds is received: the drain holds its frames for
// it rather than drop them before it can claim them.
func TestEvidenceForcedTagManyFrames(t *testing.T) {
	client := newTestEngine(t, Options{})
	server := newTestEngine(t, Options{MaxOutstandingBytes: 4 << 20, MaxUnexpectedBytes: 256 << 10})
	cep, sep, cc, sc := pair(t, client, server)
	const forced = 0x55
	frames := make([][]byte, 56)
	for i := range frames {
		frames[i] = bytes.Repeat([]byte{byte(i)}, 32<<10)
	}
	recv, err := server.RecvMulti(sep, forced)
	if err != nil {
		t.Fatal(err)
	}
	settle(t, server)
	send := startSendFrames(t, client, cep, forced, frames...)
	comp := sc.wait(recv, 10*time.Second)
	if st := ucxx.Status(comp.Status); st != ucxx.StatusOK {
		t.Fatalf("message: %v", st)
	}
	takeBlock(t, comp.Length)
	cc.wait(send, 10*time.Second)
}

// hdrSize is a frame size over the unproven allowances of a 1 MiB budget.
var hdrSize = 600 << 10

// The sender closes gracefully right after its send of a large message of eager
// frames ends.
func TestEvidenceSenderClosesAfterLargeSend(t *testing.T) {
	for i := 0; i < 10; i++ {
		client := newTestEngine(t, Options{})
		server := newTestEngine(t, Options{MaxOutstandingBytes: 1 << 20})
		cep, sep, cc, sc := pair(t, client, server)
		frames := make([][]byte, 40)
		for i := range frames {
			frames[i] = bytes.Repeat([]byte{byte(i)}, 12<<10)
		}
		recv, err := server.RecvMulti(sep, endpointInfo(t, server, sep).RecvTag)
		if err != nil {
			t.Fatal(err)
		}
		settle(t, server)
		send := startSendFrames(t, client, cep, endpointInfo(t, client, cep).SendTag, frames...)
		if c := cc.wait(send, 10*time.Second); c.Status != 0 {
			t.Fatalf("send: %v", ucxx.Status(c.Status))
		}
		if _, err := client.CloseEndpoint(cep, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		comp := sc.wait(recv, 10*time.Second)
		if st := ucxx.Status(comp.Status); st != ucxx.StatusOK {
			t.Fatalf("iteration %d: message: %v", i, st)
		}
		takeBlock(t, comp.Length)
	}
}

// Liars that send every frame but the last: their claimed frames are exempt from the
// unexpected bound only within the outstanding-bytes bounds (per endpoint and
// worker-wide), so together they never pin more than the worker's bound and their
// endpoints' unexpected bounds; past that they are cut off.
func TestEvidencePartialLiarsPinUnexpectedMemory(t *testing.T) {
	const budget = 4 << 20 // endpoint 2 MiB; unexpected bound 256 KiB
	server := newTestEngine(t, Options{MaxOutstandingBytes: budget, MaxUnexpectedBytes: 256 << 10})
	sc := newCollector(t, server)
	connect := floodersOf(t, server, sc)
	frames := make([][]byte, 56)
	for i := range frames {
		frames[i] = bytes.Repeat([]byte{byte(i)}, 32<<10)
	}
	msgs := wireMessages(frames, make([]uint8, len(frames)))
	type liar struct {
		client   *Engine
		cep, sep uint64
		cc       *collector
	}
	var liars []liar
	var keep [][]byte
	defer func() { runtime.KeepAlive(keep) }()
	for i := 0; i < 4; i++ {
		var l liar
		l.client, l.cep, l.sep, l.cc = connect()
		if _, err := server.RecvMulti(l.sep, endpointInfo(t, server, l.sep).RecvTag); err != nil {
			t.Fatal(err)
		}
		settle(t, server)
		for _, m := range msgs[:len(msgs)-1] { // all but the last frame
			// Not waited for: past the allowance the server cuts the liar off.
			keep = append(keep, m)
			id, err := l.client.TagSend(l.cep, addr(m), uint64(len(m)), endpointInfo(t, l.client, l.cep).SendTag|MultiTagBit, 0, 0)
			if err != nil {
				break
			}
			l.cc.wait(id, 10*time.Second) // sent, or failed once the server cut it off
		}
		liars = append(liars, l)
	}
	time.Sleep(200 * time.Millisecond)
	settle(t, server)
	var held uint64
	done := make(chan struct{})
	_ = server.submit(submission{op: opCall, call: func() {
		server.drainUnexpected()
		for _, h := range server.unexpected.held {
			held += h.length
		}
		close(done)
	}})
	<-done
	t.Logf("held unexpected: %d bytes (worker bound %d, unexpected bound %d per endpoint)", held, budget, 256<<10)
	if held > budget+4*(256<<10) {
		t.Fatalf("liars pin %d bytes held unexpected, more than the worker's whole bound", held)
	}
}

// The application closes an endpoint whose multi-buffer header UCX matched just
// before (its completion not handled yet): the message goes to admission after
// teardown's failWaiting ran: it ends with the endpoint's status rather than wait
// for room for good.
func TestEvidenceCloseRacesMatchedHeader(t *testing.T) {
	r := newCloseRace(t)
	frame := bytes.Repeat([]byte("x"), 400<<10)
	afterWire(t, r.server, func() { startSendFrames(t, r.client, r.cep, endpointInfo(t, r.client, r.cep).SendTag, frame) },
		func() { r.server.teardown(r.server.eps.get(r.sep), ucxx.StatusOK, false) }) // what CloseEndpoint does
	c := r.sc.wait(r.recv, 5*time.Second)
	if st := ucxx.Status(c.Status); st == ucxx.StatusOK {
		t.Fatal("the receive ended OK on an endpoint the application closed")
	}
	t.Logf("receive: %v", ucxx.Status(c.Status))
}

// A worker stream's drop of a rejected message whose frame never comes: the stop
// cancels the discard receive and does not wait for it.
func TestEvidenceShutdownWorkerDiscard(t *testing.T) {
	w := newWorkerStream(t, 1<<20)
	server, sc, client, cep, cc, tag, first := w.server, w.sc, w.client, w.cep, w.cc, w.tag, w.first
	settle(t, server)
	sendRaw(t, client, cep, cc, tag, okHeader(0, 1, []uint64{2 << 20}))
	if c := sc.wait(first, 5*time.Second); ucxx.Status(c.Status) != ucxx.StatusExceedsLimit {
		t.Fatalf("first: %v", ucxx.Status(c.Status))
	}
	start := time.Now()
	err := server.Shutdown(3 * time.Second)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Shutdown took %v: %v", d, err)
	}
}

// A receive waiting for room on the evidence of its frames, cancelled, hands the
// message and the frames it claimed to the stream's next receive: they do not count
// against the sender's unexpected bound (its endpoint is not failed, though they hold
// seven times it), and once the last frame comes the next receive gets the message.
func TestEvidenceCancelledReceiveHandsItsClaimsOn(t *testing.T) {
	server := newTestEngine(t, Options{MaxOutstandingBytes: 4 << 20, MaxUnexpectedBytes: 256 << 10})
	sc := newCollector(t, server)
	client, cep, sep, cc := clientsOf(t, server, sc)()
	frames := make([][]byte, 56) // 1.75 MiB: past the unproven allowance, it waits for evidence
	for i := range frames {
		frames[i] = bytes.Repeat([]byte{byte(i)}, 32<<10)
	}
	recvTag := endpointInfo(t, server, sep).RecvTag
	recv, err := server.RecvMulti(sep, recvTag)
	if err != nil {
		t.Fatal(err)
	}
	settle(t, server)
	wire := wireMessages(frames, make([]uint8, len(frames)))
	sendTag := endpointInfo(t, client, cep).SendTag
	for _, m := range wire[:len(wire)-1] { // all but the last frame
		sendRaw(t, client, cep, cc, sendTag, m)
	}
	exchange(t, client, cep, cc, server, sep, sc, []byte("barrier")) // every frame sent is in, claimed
	if err := server.Cancel(recv); err != nil {
		t.Fatal(err)
	}
	if c := sc.wait(recv, 5*time.Second); ucxx.Status(c.Status) != ucxx.StatusCanceled {
		t.Fatalf("receive: %v, want StatusCanceled", ucxx.Status(c.Status))
	}
	next, err := server.RecvMulti(sep, recvTag)
	if err != nil {
		t.Fatal(err)
	}
	settle(t, server)
	noCompletion(t, sc, EventEndpointError|sep)
	sendRaw(t, client, cep, cc, sendTag, wire[len(wire)-1])
	c := sc.wait(next, 10*time.Second)
	if st := ucxx.Status(c.Status); st != ucxx.StatusOK {
		t.Fatalf("next receive: %v", st)
	}
	checkBlock(t, c.Length, frames)
	exchange(t, client, cep, cc, server, sep, sc, []byte("still open"))
}
