package core

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// The stream of multi-buffer messages of one endpoint and tag, over a loopback pair:
// messages in order whatever their shape, receives posted before or after the
// message arrives, Cancel, the endpoint going away, and the limits on what a peer may
// announce. multi_test.go has the round trip and the peer that lies about its frames.

// multiConn is a connected pair whose client sends multi-buffer messages to the
// server on one stream: the client's send tag, which is the server's receive tag.
type multiConn struct {
	client, server *Engine
	cep, sep       uint64
	cc, sc         *collector
	tag            uint64
}

func newMultiConn(t *testing.T, server Options) *multiConn {
	t.Helper()
	m := &multiConn{client: newTestEngine(t, Options{}), server: newTestEngine(t, server)}
	m.cep, m.sep, m.cc, m.sc = pair(t, m.client, m.server)
	m.tag = endpointInfo(t, m.client, m.cep).SendTag
	if rt := endpointInfo(t, m.server, m.sep).RecvTag; rt != m.tag {
		t.Fatalf("client sends with tag %#x, server receives on %#x", m.tag, rt)
	}
	return m
}

// send sends one message and waits for its send to complete.
func (m *multiConn) send(t *testing.T, frames [][]byte) {
	t.Helper()
	sendFrames(t, m.client, m.cep, m.cc, m.tag, frames...)
}

// startRecv posts a receive on the stream and returns its id.
func (m *multiConn) startRecv(t *testing.T) uint64 {
	t.Helper()
	id, err := m.server.RecvMulti(m.sep, m.tag)
	if err != nil {
		t.Fatalf("RecvMulti: %v", err)
	}
	return id
}

// expect waits for receive id and checks that it delivered want, frame by frame.
func (m *multiConn) expect(t *testing.T, id uint64, want [][]byte, what string) {
	t.Helper()
	c := m.sc.wait(id, 10*time.Second)
	if st := ucxx.Status(c.Status); st != ucxx.StatusOK {
		t.Fatalf("%s: receive completed with %v", what, st)
	}
	checkFrames(t, takeBlock(t, c.Length), want, what)
}

// expectStatus waits for receive id and checks that it failed with want, no block.
func (m *multiConn) expectStatus(t *testing.T, id uint64, want ucxx.Status, what string) {
	t.Helper()
	c := m.sc.wait(id, 10*time.Second)
	if st := ucxx.Status(c.Status); st != want || c.Length != 0 {
		if c.Length != 0 && st == ucxx.StatusOK {
			ucxx.CFreeAddr(uintptr(c.Length))
		}
		t.Fatalf("%s: receive completed with %v, block %#x; want %v and no block", what, st, c.Length, want)
	}
}

// checkFrames compares received frames with the frames sent.
func checkFrames(t *testing.T, got, want [][]byte, what string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d frames, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: frame %d (%d bytes) differs from the %d bytes sent", what, i, len(got[i]), len(want[i]))
		}
	}
}

// testMessage returns the frames of message number msg, of the given sizes, each
// filled with bytes particular to that message and frame.
func testMessage(msg int, sizes ...int) [][]byte {
	frames := make([][]byte, len(sizes))
	for i, n := range sizes {
		r := rand.New(rand.NewPCG(uint64(msg), uint64(i)))
		frames[i] = make([]byte, n)
		for j := range frames[i] {
			frames[i][j] = byte(r.Uint32())
		}
	}
	return frames
}

// mixedMessages is a train of messages of every shape: no frames, empty frames, one
// byte, eager and rendezvous sizes.
func mixedMessages() [][][]byte {
	shapes := [][]int{
		{},
		{5},
		{0, 0},
		{1, 0, 4000},
		{},
		{100_000, 3},
		{64, 65, 63},
		{1 << 20},
		{0},
		{7, 1 << 16, 0, 9},
	}
	msgs := make([][][]byte, len(shapes))
	for i, s := range shapes {
		msgs[i] = testMessage(i, s...)
	}
	return msgs
}

// TestMultiOrderOnOneStream sends a train of messages of mixed shapes on one endpoint
// and tag: the n-th receive gets the n-th message, whether the receives were posted
// before the messages were sent or after they had arrived.
func TestMultiOrderOnOneStream(t *testing.T) {
	for _, recvFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("recvFirst=%t", recvFirst), func(t *testing.T) {
			m := newMultiConn(t, Options{})
			msgs := mixedMessages()
			rids := make([]uint64, len(msgs))
			if recvFirst {
				for i := range msgs {
					rids[i] = m.startRecv(t)
				}
			}
			sids := make([]uint64, len(msgs))
			for i, frames := range msgs {
				sids[i] = startSendFrames(t, m.client, m.cep, m.tag, frames...)
			}
			if !recvFirst {
				// Every message's first header waits unexpected at the server before
				// any receive asks for it.
				waitProbe(t, m.server, m.tag|MultiTagBit, ^uint64(0))
				for i := range msgs {
					rids[i] = m.startRecv(t)
				}
			}
			for i, frames := range msgs {
				m.expect(t, rids[i], frames, fmt.Sprintf("message %d", i))
			}
			for i, id := range sids {
				if c := m.cc.wait(id, 10*time.Second); c.Status != 0 {
					t.Fatalf("send %d: %v", i, ucxx.Status(c.Status))
				}
			}
			runtime.KeepAlive(msgs)
		})
	}
}

// TestMultiManyFrames sends messages of more frames than one header describes
// (FramesPerHeader): the receiver reads every header and posts every frame, in order.
// Frame sizes vary, empty frames included.
func TestMultiManyFrames(t *testing.T) {
	m := newMultiConn(t, Options{})
	for k, n := range []int{FramesPerHeader - 1, FramesPerHeader, FramesPerHeader + 1, 2*FramesPerHeader + 5, 1000} {
		sizes := make([]int, n)
		for i := range sizes {
			if i%7 != 3 {
				sizes[i] = (i*131 + k) % 700
			}
		}
		frames := testMessage(k, sizes...)
		what := fmt.Sprintf("%d frames", n)
		if k%2 == 0 {
			id := m.startRecv(t)
			m.send(t, frames)
			m.expect(t, id, frames, what+", receive first")
		} else {
			m.send(t, frames) // eager: it has been sent, and arrives
			waitProbe(t, m.server, m.tag|MultiTagBit, ^uint64(0))
			m.expect(t, m.startRecv(t), frames, what+", message first")
		}
	}
}

// TestMultiRendezvousArrivedFirst receives a message with large frames whose headers
// have arrived before the receive was posted: the frames, sent by rendezvous, are
// fetched into the block once the receive posts them.
func TestMultiRendezvousArrivedFirst(t *testing.T) {
	m := newMultiConn(t, Options{})
	frames := testMessage(1, 1<<20, 0, 3<<20, 10)
	sid := startSendFrames(t, m.client, m.cep, m.tag, frames...)
	waitProbe(t, m.server, m.tag|MultiTagBit, ^uint64(0))
	noCompletion(t, m.cc, sid) // a rendezvous send waits for its receive
	m.expect(t, m.startRecv(t), frames, "rendezvous message")
	if c := m.cc.wait(sid, 10*time.Second); c.Status != 0 {
		t.Fatalf("send: %v", ucxx.Status(c.Status))
	}
	runtime.KeepAlive(frames)
}

// TestMultiCancel: Cancel completes a receive with StatusCanceled at once, and its
// message goes to the next receive: untouched if nothing of it had come, received on
// the cancelled receive's behalf and handed over if its header had. One that already
// completed is not reported again. Either way no message is lost or reordered.
func TestMultiCancel(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		m := newMultiConn(t, Options{})
		id := m.startRecv(t)
		if err := m.server.Cancel(id); err != nil {
			t.Fatal(err)
		}
		m.expectStatus(t, id, ucxx.StatusCanceled, "cancelled receive")
		if err := m.server.Cancel(id); err != nil { // harmless once it ended
			t.Fatal(err)
		}
		msg := testMessage(0, 10, 20)
		m.send(t, msg)
		m.expect(t, m.startRecv(t), msg, "next receive")
		settle(t, m.server)
		noCompletion(t, m.sc, id)
	})

	t.Run("queued", func(t *testing.T) {
		// The second of three receives is cancelled while the first waits.
		m := newMultiConn(t, Options{})
		r1, r2, r3 := m.startRecv(t), m.startRecv(t), m.startRecv(t)
		if err := m.server.Cancel(r2); err != nil {
			t.Fatal(err)
		}
		m.expectStatus(t, r2, ucxx.StatusCanceled, "cancelled queued receive")
		msgs := [][][]byte{testMessage(1, 3), testMessage(2, 0, 5)}
		for _, msg := range msgs {
			m.send(t, msg)
		}
		m.expect(t, r1, msgs[0], "first receive")
		m.expect(t, r3, msgs[1], "third receive")
	})

	t.Run("after its header", func(t *testing.T) {
		// A peer writing by hand sends a header now and its frame later.
		m := newMultiConn(t, Options{})
		id := m.startRecv(t)
		sendRaw(t, m.client, m.cep, m.cc, m.tag, okHeader(0, 1, []uint64{5}))
		// A plain message sent after the header arrives after it: the header is in.
		exchange(t, m.client, m.cep, m.cc, m.server, m.sep, m.sc, []byte("barrier"))
		if err := m.server.Cancel(id); err != nil {
			t.Fatal(err)
		}
		m.expectStatus(t, id, ucxx.StatusCanceled, "receive cancelled after its header")
		handed := m.startRecv(t) // posted before the rest of the message comes
		sendRaw(t, m.client, m.cep, m.cc, m.tag, []byte("12345"))
		next := testMessage(3, 8, 0, 8)
		m.send(t, next)
		m.expect(t, handed, [][]byte{[]byte("12345")}, "the cancelled receive's message")
		m.expect(t, m.startRecv(t), next, "next receive")
	})

	t.Run("after it completed", func(t *testing.T) {
		m := newMultiConn(t, Options{})
		msg := testMessage(4, 100)
		id := m.startRecv(t)
		m.send(t, msg)
		m.expect(t, id, msg, "receive")
		if err := m.server.Cancel(id); err != nil {
			t.Fatal(err)
		}
		settle(t, m.server)
		noCompletion(t, m.sc, id)
	})

	t.Run("racing its message", func(t *testing.T) {
		// The message is there when the receive is posted and cancelled at once: the
		// receive either gets all of it, or none and the next receive gets it.
		m := newMultiConn(t, Options{})
		msgs := [][][]byte{testMessage(5, 10, 20), testMessage(6, 30)}
		for _, msg := range msgs {
			m.send(t, msg)
		}
		waitProbe(t, m.server, m.tag|MultiTagBit, ^uint64(0))
		id := m.startRecv(t)
		if err := m.server.Cancel(id); err != nil {
			t.Fatal(err)
		}
		c := m.sc.wait(id, 10*time.Second)
		switch st := ucxx.Status(c.Status); st {
		case ucxx.StatusOK:
			checkFrames(t, takeBlock(t, c.Length), msgs[0], "receive that won the race")
		case ucxx.StatusCanceled:
			if c.Length != 0 {
				t.Fatalf("cancelled receive with a block %#x", c.Length)
			}
			m.expect(t, m.startRecv(t), msgs[0], "receive after the cancelled one")
		default:
			t.Fatalf("receive cancelled as its message arrived: %v", st)
		}
		t.Logf("receive cancelled as its message arrived: %v", ucxx.Status(c.Status))
		m.expect(t, m.startRecv(t), msgs[1], "next receive")
	})
}

// TestMultiCancelWhileWaitingForRoom cancels a receive whose message has been
// announced but waits for room under MaxOutstandingBytes, held by another peer that
// never sends its frames: the cancel ends the receive at once, without waiting for
// that peer, and once room is made the message goes to the next receive.
func TestMultiCancelWhileWaitingForRoom(t *testing.T) {
	const budget = 1 << 20
	server := newTestEngine(t, Options{MaxOutstandingBytes: budget, MaxEndpointOutstandingBytes: budget})
	sc := newCollector(t, server)
	dial := clientsOf(t, server, sc)
	connect := func() (client *Engine, cep, sep uint64, cc *collector, tag uint64) {
		client, cep, sep, cc = dial()
		return client, cep, sep, cc, endpointInfo(t, client, cep).SendTag
	}

	// The liar's message, small enough to be admitted on its header's word (the
	// unproven allowance is a quarter of the budget), holds its room and never completes.
	liar, lep, lsep, lc, ltag := connect()
	lid, err := server.RecvMulti(lsep, ltag)
	if err != nil {
		t.Fatal(err)
	}
	sendRaw(t, liar, lep, lc, ltag, okHeader(0, 1, []uint64{250 << 10}))
	exchange(t, liar, lep, lc, server, lsep, sc, []byte("barrier"))

	// The honest message does not fit beside it and waits, its frames here.
	honest, hep, hsep, hc, htag := connect()
	hid, err := server.RecvMulti(hsep, htag)
	if err != nil {
		t.Fatal(err)
	}
	frames := testMessage(7, 800<<10)
	sid := startSendFrames(t, honest, hep, htag, frames...)
	exchange(t, honest, hep, hc, server, hsep, sc, []byte("barrier"))
	settle(t, server)
	noCompletion(t, sc, hid)

	if err := server.Cancel(hid); err != nil {
		t.Fatal(err)
	}
	c := sc.wait(hid, 5*time.Second)
	if st := ucxx.Status(c.Status); st != ucxx.StatusCanceled || c.Length != 0 {
		t.Fatalf("cancelled receive waiting for room: %v, block %#x; want Canceled", st, c.Length)
	}
	// The liar still holds its room; once it goes, the honest message comes in and
	// goes to the honest endpoint's next receive.
	next, err := server.RecvMulti(hsep, htag)
	if err != nil {
		t.Fatal(err)
	}
	noCompletion(t, sc, lid)
	if err := server.AbortEndpoint(lsep); err != nil {
		t.Fatal(err)
	}
	if c := hc.wait(sid, 10*time.Second); c.Status != 0 {
		t.Fatalf("honest send: %v", ucxx.Status(c.Status))
	}
	c = sc.wait(next, 10*time.Second)
	if c.Status != 0 {
		t.Fatalf("receive after the cancelled one: %v", ucxx.Status(c.Status))
	}
	checkFrames(t, takeBlock(t, c.Length), frames, "the cancelled receive's message")
	runtime.KeepAlive(frames)
}

// TestMultiCancelHeldBehindDrop cancels a receive that waits behind the drop of a
// rejected message: one announcing more frames than the drop posts at once, whose
// frames have not come yet. The cancelled receive completes at once; once the frames
// come and are dropped, the next receive gets the next message.
func TestMultiCancelHeldBehindDrop(t *testing.T) {
	m := newMultiConn(t, Options{Limits: Limits{MaxFrames: 150}})
	r1, r2 := m.startRecv(t), m.startRecv(t)
	// A peer writing by hand: the first header of a 200-frame message, over the limit.
	sendRaw(t, m.client, m.cep, m.cc, m.tag, okHeader(HeaderMore, 200, full(FramesPerHeader, 1)))
	m.expectStatus(t, r1, ucxx.StatusExceedsLimit, "message over MaxFrames")
	settle(t, m.server)
	noCompletion(t, m.sc, r2) // held back: the drop has not posted all its receives
	if err := m.server.Cancel(r2); err != nil {
		t.Fatal(err)
	}
	m.expectStatus(t, r2, ucxx.StatusCanceled, "receive held behind the drop")

	r3 := m.startRecv(t)
	sendRaw(t, m.client, m.cep, m.cc, m.tag, okHeader(0, 200, full(200-FramesPerHeader, 1)))
	for i := range 200 {
		sendRaw(t, m.client, m.cep, m.cc, m.tag, []byte{byte(i)})
	}
	next := testMessage(9, 4, 0, 1)
	m.send(t, next)
	m.expect(t, r3, next, "the receive after the drop")
}

// TestMultiEndpointGoneWhileWaitingForRoom: a receive whose message waits for room
// (admission) fails with Canceled when its endpoint is aborted, and gives back no room
// it never had: afterwards a message of nearly the whole budget is admitted.
func TestMultiEndpointGoneWhileWaitingForRoom(t *testing.T) {
	const budget = 64 << 10
	m := newMultiConn(t, Options{MaxOutstandingBytes: budget, MaxEndpointOutstandingBytes: budget})
	// Two streams of the endpoint (two tags). The first message's frame never comes:
	// it holds most of the room. The second's header is in, and it does not fit.
	tag2 := m.tag ^ 1
	r1 := m.startRecv(t)
	r2, err := m.server.RecvMulti(m.sep, tag2)
	if err != nil {
		t.Fatal(err)
	}
	sendRaw(t, m.client, m.cep, m.cc, m.tag, okHeader(0, 1, []uint64{40 << 10}))
	sendRaw(t, m.client, m.cep, m.cc, tag2, okHeader(0, 1, []uint64{30 << 10}))
	exchange(t, m.client, m.cep, m.cc, m.server, m.sep, m.sc, []byte("barrier"))
	settle(t, m.server)
	noCompletion(t, m.sc, r1)
	noCompletion(t, m.sc, r2)
	if err := m.server.AbortEndpoint(m.sep); err != nil {
		t.Fatal(err)
	}
	m.expectStatus(t, r1, ucxx.StatusCanceled, "receive waiting for its frame")
	m.expectStatus(t, r2, ucxx.StatusCanceled, "receive waiting for room")
	waitIdle(t, m.server)

	// A new connection to the same server: its collector reads the queue from now on.
	client := newTestEngine(t, Options{})
	cep, sep, cc, sc := pair(t, client, m.server)
	tag := endpointInfo(t, client, cep).SendTag
	big := testMessage(10, 60<<10)
	id, err := m.server.RecvMulti(sep, tag)
	if err != nil {
		t.Fatal(err)
	}
	sendFrames(t, client, cep, cc, tag, big...)
	c := sc.wait(id, 10*time.Second)
	if st := ucxx.Status(c.Status); st != ucxx.StatusOK {
		t.Fatalf("message of nearly the whole budget after the abort: %v", st)
	}
	checkFrames(t, takeBlock(t, c.Length), big, "message after the abort")
	runtime.KeepAlive(big)
}

// TestMultiEndpointGoneWhileRecvWaits: receives waiting on an endpoint end, with a
// status saying why, when the endpoint goes: Canceled when the application closes or
// aborts it, the endpoint's error when the peer goes away. That holds for a receive
// waiting for its header, for one waiting for its frames, and for receives queued
// behind them. Nothing stays in flight.
func TestMultiEndpointGoneWhileRecvWaits(t *testing.T) {
	for _, c := range []struct {
		name       string
		gotHeader  bool // the first receive has its header, not its frame
		byPeer     bool // the peer aborts, rather than the application here
		closeGrace bool // CloseEndpoint rather than AbortEndpoint
	}{
		{"abort, waiting for header", false, false, false},
		{"abort, waiting for frames", true, false, false},
		{"close, waiting for header", false, false, true},
		{"close, waiting for frames", true, false, true},
		{"peer aborts, waiting for header", false, true, false},
		{"peer aborts, waiting for frames", true, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newMultiConn(t, Options{})
			ids := []uint64{m.startRecv(t), m.startRecv(t), m.startRecv(t)}
			if c.gotHeader {
				sendRaw(t, m.client, m.cep, m.cc, m.tag, okHeader(0, 2, []uint64{5, 1 << 20}))
				exchange(t, m.client, m.cep, m.cc, m.server, m.sep, m.sc, []byte("barrier"))
			}
			settle(t, m.server)
			for _, id := range ids {
				noCompletion(t, m.sc, id)
			}
			want := ucxx.StatusCanceled
			switch {
			case c.byPeer:
				if err := m.client.AbortEndpoint(m.cep); err != nil {
					t.Fatal(err)
				}
				ev := m.sc.wait(EventEndpointError|m.sep, 10*time.Second)
				if ev.Status == 0 {
					t.Fatalf("endpoint error event with status 0")
				}
				want = ucxx.Status(ev.Status)
			case c.closeGrace:
				cid, err := m.server.CloseEndpoint(m.sep, 2*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if cc := m.sc.wait(cid, 5*time.Second); cc.Status != 0 {
					t.Fatalf("close: %v", ucxx.Status(cc.Status))
				}
			default:
				if err := m.server.AbortEndpoint(m.sep); err != nil {
					t.Fatal(err)
				}
			}
			for i, id := range ids {
				m.expectStatus(t, id, want, fmt.Sprintf("receive %d", i))
			}
			if !c.byPeer {
				// Whether a receive may still drain a gone endpoint is the progress
				// thread's decision (Engine.drainable): one the application closed fails.
				id, err := m.server.RecvMulti(m.sep, m.tag)
				if err != nil {
					t.Fatalf("RecvMulti on the closed endpoint: %v", err)
				}
				m.expectStatus(t, id, ucxx.StatusCanceled, "receive on the closed endpoint")
			}
			waitIdle(t, m.server)
		})
	}
}

// TestMultiLimits: a message over one of the server's limits fails with ExceedsLimit
// and its frames are dropped; the receives posted behind it, before it arrived, get
// the next messages whole.
func TestMultiLimits(t *testing.T) {
	many := make([]int, 200)
	for i := range many {
		many[i] = 10
	}
	for _, c := range []struct {
		name string
		opts Options
		bad  []int // frame sizes of the message over the limit
	}{
		{"MaxFrames", Options{Limits: Limits{MaxFrames: 3}}, []int{1, 2, 3, 4, 5}},
		{"MaxFrames, two headers", Options{Limits: Limits{MaxFrames: 150}}, many},
		{"MaxFrameBytes", Options{Limits: Limits{MaxFrameBytes: 100}}, []int{10, 101, 10}},
		{"MaxMessageBytes", Options{Limits: Limits{MaxMessageBytes: 100}}, []int{60, 41}},
		{"MaxMessageBytes, second header", Options{Limits: Limits{MaxMessageBytes: 1500}}, many},
		{"MaxEndpointOutstandingBytes", Options{MaxOutstandingBytes: 1 << 20, MaxEndpointOutstandingBytes: 16 << 10}, []int{20 << 10}},
		{"MaxOutstandingBytes", Options{MaxOutstandingBytes: 16 << 10}, []int{8 << 10, 9 << 10}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newMultiConn(t, c.opts)
			ids := []uint64{m.startRecv(t), m.startRecv(t), m.startRecv(t)}
			msgs := [][][]byte{testMessage(0, c.bad...), testMessage(1, 3, 0, 2), testMessage(2, 50)}
			// The receiver drops the frames of the message over the limit into empty
			// receives: the sender's status for a frame sent by rendezvous is UCX's
			// business, but it must end.
			bad := startSendFrames(t, m.client, m.cep, m.tag, msgs[0]...)
			for _, msg := range msgs[1:] {
				m.send(t, msg)
			}
			m.expectStatus(t, ids[0], ucxx.StatusExceedsLimit, "message over the limit")
			m.expect(t, ids[1], msgs[1], "message after it")
			m.expect(t, ids[2], msgs[2], "the one after that")
			if st := ucxx.Status(m.cc.wait(bad, 10*time.Second).Status); st != ucxx.StatusOK {
				t.Logf("send of the message over the limit: %v", st)
			}
			// Plain traffic on the endpoint was never disturbed.
			exchange(t, m.client, m.cep, m.cc, m.server, m.sep, m.sc, []byte("plain"))
			runtime.KeepAlive(msgs)
		})
	}
}

// TestMultiDrainOfABrokenEndpointEnds: receives on an endpoint whose peer broke take
// what it sent before (on the worker: nothing closes them with the endpoint), and
// each ends: one whose message's frames will never come, and one taken on because the
// previous message's frames were still waiting, fail with the peer's status instead of
// waiting for good.
func TestMultiDrainOfABrokenEndpointEnds(t *testing.T) {
	breakPeer := func(t *testing.T, m *multiConn) ucxx.Status {
		t.Helper()
		if err := m.client.AbortEndpoint(m.cep); err != nil {
			t.Fatal(err)
		}
		ev := m.sc.wait(EventEndpointError|m.sep, 10*time.Second)
		if ev.Status == 0 {
			t.Fatal("endpoint error event with status 0")
		}
		return ucxx.Status(ev.Status)
	}

	t.Run("a header whose frames never come", func(t *testing.T) {
		m := newMultiConn(t, Options{})
		sendRaw(t, m.client, m.cep, m.cc, m.tag, okHeader(0, 2, []uint64{5, 100 << 10}))
		exchange(t, m.client, m.cep, m.cc, m.server, m.sep, m.sc, []byte("barrier"))
		want := breakPeer(t, m)
		m.expectStatus(t, m.startRecv(t), want, "receive of a header whose frames never come")
		m.expectStatus(t, m.startRecv(t), want, "receive after it")
	})

	t.Run("two receives of one message", func(t *testing.T) {
		m := newMultiConn(t, Options{})
		msg := testMessage(18, 5, 20<<10)
		if n := len(wireMessages(msg, []uint8{MemHost, MemHost})); n < 2 {
			t.Fatalf("%d tag messages on the wire, want the header and its frames apart", n)
		}
		m.send(t, msg)
		exchange(t, m.client, m.cep, m.cc, m.server, m.sep, m.sc, []byte("barrier"))
		want := breakPeer(t, m)
		first, second := m.startRecv(t), m.startRecv(t)
		m.expect(t, first, msg, "the message sent before the peer broke")
		m.expectStatus(t, second, want, "the receive after it")
	})
}
