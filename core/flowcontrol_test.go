package core

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Flow control (flowcontrol.go): an honest sender that runs ahead of its receiver is
// paced instead of having its endpoint failed for holding too much.

// flowBound is the receivers' MaxUnexpectedBytes in these tests: chunk 64 KiB, pongs
// held back above 512 KiB.
const flowBound = 1 << 20

// numbered is n messages of size bytes, each starting with its index.
func numbered(n, size int) [][]byte {
	msgs := make([][]byte, n)
	for i := range msgs {
		msgs[i] = make([]byte, size)
		binary.LittleEndian.PutUint32(msgs[i], uint32(i))
		for j := 4; j < size; j++ {
			msgs[i][j] = byte(i + j)
		}
	}
	return msgs
}

// sendAll queues every message as a tag send on tag, none waited for, and returns
// the request ids.
func sendAll(t *testing.T, e *Engine, ep, tag uint64, msgs [][]byte) []uint64 {
	t.Helper()
	ids := make([]uint64, len(msgs))
	for i, m := range msgs {
		id, err := e.TagSend(ep, addr(m), uint64(len(m)), tag, 0, 0)
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		ids[i] = id
	}
	return ids
}

// recvInOrder receives len(msgs) messages on tag and checks each against msgs, in
// order, skipping the indexes in skip.
func recvInOrder(t *testing.T, e *Engine, ep uint64, c *collector, tag uint64, msgs [][]byte, skip map[int]bool) {
	t.Helper()
	buf := make([]byte, len(msgs[0]))
	for i, want := range msgs {
		if skip[i] {
			continue
		}
		id, err := e.TagRecv(ep, addr(buf), uint64(len(buf)), tag, ^uint64(0), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		comp := c.wait(id, 10*time.Second)
		if st := ucxx.Status(comp.Status); st != ucxx.StatusOK {
			t.Fatalf("receive %d: %v", i, st)
		}
		if got := binary.LittleEndian.Uint32(buf); got != uint32(i) || string(buf) != string(want) {
			t.Fatalf("receive %d: got message %d (or other bytes)", i, got)
		}
	}
}

// TestFlowControlPacesAStreamingSender: a sender queues 4 MiB of 8 KiB messages
// (four times the receiver's bound) before the receiver posts any receive. The sender
// is paced: the receiver holds at most its bound, its endpoint stays up, and every
// message is received, in order, once the receiver gets to it; every send completes.
// Without flow control the endpoint failed with StatusExceedsLimit at the bound.
func TestFlowControlPacesAStreamingSender(t *testing.T) {
	for _, via := range []ConnectVia{ViaAddress, ViaManager} {
		t.Run(fmt.Sprint(via), func(t *testing.T) {
			client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{MaxUnexpectedBytes: flowBound})
			cep, sep, cc, sc := pairWith(t, client, server, EndpointOptions{Via: via})
			tag := endpointInfo(t, client, cep).SendTag + 1
			msgs := numbered(4*flowBound/(8<<10), 8<<10)
			ids := sendAll(t, client, cep, tag, msgs)
			// The receiver holds half its bound (it answers no ping beyond), and
			// the sender holds back what it has not sent.
			waitFor(t, "the receiver holds half its bound", func() bool { return stats(t, server).UnexpectedBytes > flowBound/2 })
			waitFor(t, "the sender holds sends back", func() bool { return stats(t, client).StalledSends > 0 })
			// Under half the bound, three chunks (flowBound/16 each) and one message.
			if held, most := stats(t, server).UnexpectedBytes, int64(flowBound*11/16)+heldCharge(8<<10, false); held > most {
				t.Fatalf("the receiver holds %d bytes, over %d", held, most)
			}
			recvInOrder(t, server, sep, sc, tag, msgs, nil)
			for i, id := range ids {
				if c := cc.wait(id, 10*time.Second); c.Status != 0 {
					t.Fatalf("send %d: %v", i, ucxx.Status(c.Status))
				}
			}
			noCompletion(t, sc, EventEndpointError|sep)
			if s := stats(t, client); s.StalledSends != 0 {
				t.Fatalf("%d sends still held back", s.StalledSends)
			}
			if held := stats(t, server).UnexpectedBytes; held != 0 {
				t.Fatalf("%d bytes still held", held)
			}
			runtime.KeepAlive(msgs)
		})
	}
}

// TestFlowControlWithoutErrorHandlingIsOff: endpoints without error handling have no
// control channel, so nothing is paced and the bound fails the endpoint as before.
func TestFlowControlWithoutErrorHandlingIsOff(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{MaxUnexpectedBytes: flowBound})
	cep, sep, cc, sc := pairWith(t, client, server, EndpointOptions{NoErrorHandling: true, Via: ViaAddress})
	msgs := numbered(2*flowBound/(8<<10), 8<<10)
	ids := sendAll(t, client, cep, endpointInfo(t, client, cep).SendTag+1, msgs)
	for _, id := range ids {
		cc.wait(id, 10*time.Second) // eager: each ends at once, whatever the receiver does
	}
	if s := stats(t, client); s.StalledSends != 0 {
		t.Fatalf("%d sends held back on an endpoint without flow control", s.StalledSends)
	}
	if c := sc.wait(EventEndpointError|sep, 10*time.Second); ucxx.Status(c.Status) != ucxx.StatusExceedsLimit {
		t.Fatalf("endpoint error %v, want StatusExceedsLimit", ucxx.Status(c.Status))
	}
	if held := stats(t, server).UnexpectedBytes; held != 0 {
		t.Fatalf("%d bytes still held after the endpoint failed", held)
	}
	runtime.KeepAlive(msgs)
}

// stalledPair is a paced pair whose client has sends held back: n messages of 8 KiB
// on tag, twice the receiver's bound.
type stalledPair struct {
	client, server *Engine
	cep, sep, tag  uint64
	cc, sc         *collector
	msgs           [][]byte
	ids            []uint64
}

func newStalledPair(t *testing.T) *stalledPair {
	t.Helper()
	p := &stalledPair{client: newTestEngine(t, Options{}), server: newTestEngine(t, Options{MaxUnexpectedBytes: flowBound})}
	p.cep, p.sep, p.cc, p.sc = pair(t, p.client, p.server)
	p.tag = endpointInfo(t, p.client, p.cep).SendTag + 1
	p.msgs = numbered(2*flowBound/(8<<10), 8<<10)
	p.ids = sendAll(t, p.client, p.cep, p.tag, p.msgs)
	t.Cleanup(func() { runtime.KeepAlive(p.msgs) })
	waitFor(t, "the receiver holds half its bound", func() bool { return stats(t, p.server).UnexpectedBytes > flowBound/2 })
	return p
}

// TestFlowControlGracefulCloseDeliversHeldBackSends: a graceful close while sends are
// held back waits for them: the receiver, receiving, gets every message, and the
// close completes.
func TestFlowControlGracefulCloseDeliversHeldBackSends(t *testing.T) {
	p := newStalledPair(t)
	if stats(t, p.client).StalledSends == 0 {
		t.Fatal("no send held back")
	}
	closeID, err := p.client.CloseEndpoint(p.cep, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	settle(t, p.client)
	noCompletion(t, p.cc, closeID) // it waits for the held-back sends
	recvInOrder(t, p.server, p.sep, p.sc, p.tag, p.msgs, nil)
	for i, id := range p.ids {
		if c := p.cc.wait(id, 10*time.Second); c.Status != 0 {
			t.Fatalf("send %d: %v", i, ucxx.Status(c.Status))
		}
	}
	if c := p.cc.wait(closeID, 10*time.Second); c.Status != 0 {
		t.Fatalf("close: %v", ucxx.Status(c.Status))
	}
}

// TestFlowControlCancelAndAbort: held-back sends that are cancelled (one amid the
// others, and the last) complete as cancelled and never arrive; the others arrive in
// order. Aborting the endpoint fails every send still held back.
func TestFlowControlCancelAndAbort(t *testing.T) {
	p := newStalledPair(t)
	last := len(p.ids) - 1
	cancelled := map[int]bool{last - 3: true, last: true}
	for i := range cancelled {
		if err := p.client.Cancel(p.ids[i]); err != nil {
			t.Fatal(err)
		}
		if c := p.cc.wait(p.ids[i], 10*time.Second); ucxx.Status(c.Status) != ucxx.StatusCanceled {
			t.Fatalf("cancelled send %d: %v, want StatusCanceled", i, ucxx.Status(c.Status))
		}
	}
	recvInOrder(t, p.server, p.sep, p.sc, p.tag, p.msgs, cancelled)
	for i, id := range p.ids {
		if cancelled[i] {
			continue
		}
		if c := p.cc.wait(id, 10*time.Second); c.Status != 0 {
			t.Fatalf("send %d: %v", i, ucxx.Status(c.Status))
		}
	}

	// Held back again, then aborted.
	ids := sendAll(t, p.client, p.cep, p.tag, p.msgs)
	waitFor(t, "sends held back", func() bool { return stats(t, p.client).StalledSends > 0 })
	if err := p.client.AbortEndpoint(p.cep); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, id := range ids {
		switch c := p.cc.wait(id, 10*time.Second); ucxx.Status(c.Status) {
		case ucxx.StatusOK:
		case ucxx.StatusCanceled:
			failed++
		default:
			t.Fatalf("send after abort: %v", ucxx.Status(c.Status))
		}
	}
	if failed == 0 {
		t.Fatal("no held-back send was cancelled by the abort")
	}
	if s := stats(t, p.client); s.StalledSends != 0 {
		t.Fatalf("%d sends still held back after the abort", s.StalledSends)
	}
}

// TestFlowControlCloseEndsWhenThePeerGoes: a graceful close waiting for held-back
// sends ends as soon as its peer goes, rather than at the close's timeout. A peer that
// aborts leaves the held-back sends failed; one that closes gracefully without
// receiving them may first answer the pings it owed (it holds nothing once closed), and
// what it is sent then is dropped, as it always was.
func TestFlowControlCloseEndsWhenThePeerGoes(t *testing.T) {
	for _, via := range []ConnectVia{ViaAddress, ViaManager} {
		for _, how := range []string{"abort", "close"} {
			t.Run(fmt.Sprint(via, "/", how), func(t *testing.T) {
				client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{MaxUnexpectedBytes: flowBound})
				cep, sep, cc, _ := pairWith(t, client, server, EndpointOptions{Via: via})
				msgs := numbered(2*flowBound/(8<<10), 8<<10)
				ids := sendAll(t, client, cep, endpointInfo(t, client, cep).SendTag+1, msgs)
				waitFor(t, "sends held back", func() bool { return stats(t, client).StalledSends > 0 })
				const timeout = 60 * time.Second
				closeID, err := client.CloseEndpoint(cep, timeout)
				if err != nil {
					t.Fatal(err)
				}
				settle(t, client)
				noCompletion(t, cc, closeID)
				if how == "abort" {
					err = server.AbortEndpoint(sep)
				} else {
					_, err = server.CloseEndpoint(sep, timeout)
				}
				if err != nil {
					t.Fatal(err)
				}
				cc.wait(closeID, timeout/2) // well before the close's own timeout
				failed := 0
				for _, id := range ids {
					if c := cc.wait(id, 10*time.Second); c.Status != 0 {
						failed++
					}
				}
				if how == "abort" && failed == 0 {
					t.Fatal("every send completed, though the peer aborted with sends held back")
				}
				runtime.KeepAlive(msgs)
			})
		}
	}
}

// TestFlowControlMultiAndActiveMessages: send_multi and am_send are paced with the
// tag sends, in one order: a stream of each, twice the bound, sent before anything is
// received, all arrives.
func TestFlowControlMultiAndActiveMessages(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{MaxUnexpectedBytes: flowBound})
	cep, sep, cc, sc := pair(t, client, server)
	msgs := numbered(2*flowBound/(8<<10), 8<<10)
	var ids []uint64
	for _, m := range msgs {
		id, err := client.AMSend(cep, addr(m), uint64(len(m)), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	tag := endpointInfo(t, client, cep).SendTag | 7
	for _, m := range msgs {
		ids = append(ids, startSendFrames(t, client, cep, tag, m[:4096], m[4096:]))
	}
	waitFor(t, "the receiver holds half its bound", func() bool { return stats(t, server).UnexpectedBytes > flowBound/2 })
	waitFor(t, "the sender holds sends back", func() bool { return stats(t, client).StalledSends > 0 })
	p := &amPair{client: client, server: server, cep: cep, sep: sep, cc: cc, sc: sc}
	for i, m := range msgs {
		p.expect(t, p.startRecv(t), m, fmt.Sprintf("active message %d", i))
	}
	for i, m := range msgs {
		st, block := recvMulti(t, server, sep, sc, tag)
		if st != ucxx.StatusOK {
			t.Fatalf("message %d: %v", i, st)
		}
		if got := takeBlock(t, block); len(got) != 2 || string(got[0])+string(got[1]) != string(m) {
			t.Fatalf("message %d: frames differ", i)
		}
	}
	for _, id := range ids {
		if c := cc.wait(id, 10*time.Second); c.Status != 0 {
			t.Fatalf("send: %v", ucxx.Status(c.Status))
		}
	}
	noCompletion(t, sc, EventEndpointError|sep)
	runtime.KeepAlive(msgs)
}

// TestActiveMessagesAreBounded: active messages no am_recv takes count against the
// bound: a peer that floods them, ignoring flow control, has its endpoint failed with
// StatusExceedsLimit and what it sent freed. Before, the mailbox held them all.
func TestActiveMessagesAreBounded(t *testing.T) {
	client, server := unpaced(newTestEngine(t, Options{})), newTestEngine(t, Options{MaxUnexpectedBytes: flowBound})
	cep, sep, cc, sc := pair(t, client, server)
	msg := make([]byte, 8<<10)
	for range 4 * flowBound / len(msg) {
		id, err := client.AMSend(cep, addr(msg), uint64(len(msg)), 0, 0)
		if err != nil {
			break // the server already failed the connection
		}
		cc.wait(id, 10*time.Second)
	}
	if c := sc.wait(EventEndpointError|sep, 10*time.Second); ucxx.Status(c.Status) != ucxx.StatusExceedsLimit {
		t.Fatalf("endpoint error %v, want StatusExceedsLimit", ucxx.Status(c.Status))
	}
	if held := stats(t, server).UnexpectedBytes; held != 0 {
		t.Fatalf("%d bytes still held", held)
	}
}

// TestLargeActiveMessageWaitsWithItsSender: a rendezvous active message larger than
// the receiver's bound, sent before any am_recv, is not taken in: it is counted as a
// rendezvous tag message is, its sender's am_send waits, and an am_recv then gets it
// whole.
func TestLargeActiveMessageWaitsWithItsSender(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{MaxUnexpectedBytes: flowBound})
	p := &amPair{client: client, server: server}
	p.cep, p.sep, p.cc, p.sc = pair(t, client, server)
	big := numbered(1, 4*flowBound)[0]
	small := numbered(1, 100)[0]
	sid := p.startSend(t, big)
	exchange(t, client, p.cep, p.cc, server, p.sep, p.sc, []byte("barrier")) // its announcement is in
	if held := stats(t, server).UnexpectedBytes; held <= 0 || held > unexpectedLargeCharge+unexpectedOverhead {
		t.Fatalf("held %d bytes for a message left with its sender", held)
	}
	noCompletion(t, p.cc, sid)
	small1 := p.startSend(t, small)
	p.expect(t, p.startRecv(t), big, "the large message")
	p.waitSent(t, sid)
	p.expect(t, p.startRecv(t), small, "the message behind it")
	p.waitSent(t, small1)
	noCompletion(t, p.sc, EventEndpointError|p.sep)
	runtime.KeepAlive(big)
}

// TestFlowChunk: the chunk a receiver names is a sixteenth of its bound rounded down
// to a power of two, at least 4 KiB; a peer's chunk outside what one could name is
// refused.
func TestFlowChunk(t *testing.T) {
	for _, c := range []struct {
		max  int64
		want uint8
	}{{1, 12}, {64 << 10, 12}, {1 << 20, 16}, {DefaultMaxUnexpectedBytes, 22}, {3 << 20, 17}, {1 << 62, 58}} {
		if got := flowChunkLog2(c.max); got != c.want || !validChunkLog2(got) {
			t.Errorf("flowChunkLog2(%d) = %d, want %d", c.max, got, c.want)
		}
	}
	for _, k := range []uint8{1, 11, 63, 255} {
		if validChunkLog2(k) {
			t.Errorf("chunk 2^%d accepted", k)
		}
	}
}

// TestFlowControlMassCancel: an application that cancels thousands of held-back sends
// (its tasks cancelled, newest first) gets each completed as cancelled, and the sends
// it kept arrive in order. Each cancel finds its send where it is: before, each
// scanned the held-back sends and moved those after it (O(n²) for n cancels).
func TestFlowControlMassCancel(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{MaxUnexpectedBytes: flowBound})
	cep, sep, cc, sc := pair(t, client, server)
	tag := endpointInfo(t, client, cep).SendTag + 1
	msgs := numbered(20000, 64) // each charged 576 bytes: about 11x the bound
	defer runtime.KeepAlive(msgs)
	ids := sendAll(t, client, cep, tag, msgs)
	waitFor(t, "sends held back", func() bool { return stats(t, client).StalledSends > len(msgs)/2 })
	// The newest held are held back now; a pong on its way may still release a few of
	// them before their cancel comes: those are sent (StatusOK) and arrive.
	held := stats(t, client).StalledSends
	tried := map[int]bool{}
	start := time.Now()
	for i := len(ids) - 1; i >= len(ids)-held; i-- {
		if i%1000 == 7 {
			continue // kept: it must still arrive, in order
		}
		if err := client.Cancel(ids[i]); err != nil {
			t.Fatal(err)
		}
		tried[i] = true
	}
	cancelled := map[int]bool{}
	for i := range tried {
		switch c := cc.wait(ids[i], 10*time.Second); ucxx.Status(c.Status) {
		case ucxx.StatusCanceled:
			cancelled[i] = true
		case ucxx.StatusOK: // released before its cancel came
		default:
			t.Fatalf("cancelled send %d: %v", i, ucxx.Status(c.Status))
		}
	}
	t.Logf("%d of %d held-back sends cancelled in %v", len(cancelled), held, time.Since(start))
	if len(cancelled) < len(tried)*9/10 {
		t.Fatalf("only %d of %d held-back sends cancelled", len(cancelled), len(tried))
	}
	recvInOrder(t, server, sep, sc, tag, msgs, cancelled)
	for i, id := range ids {
		if !tried[i] {
			if c := cc.wait(id, 10*time.Second); c.Status != 0 {
				t.Fatalf("send %d: %v", i, ucxx.Status(c.Status))
			}
		}
	}
	if s := stats(t, client); s.StalledSends != 0 {
		t.Fatalf("%d sends still held back", s.StalledSends)
	}
}

// TestFlowChunkOutOfRangeIsRefused: a peer whose handshake names a flow-control chunk
// no ucxx-go could name (under 4 KiB, or 2^63) is refused, by either way of
// connecting: it is never accepted, and its connection fails. The listener goes on
// accepting honest peers.
func TestFlowChunkOutOfRangeIsRefused(t *testing.T) {
	for _, via := range []ConnectVia{ViaManager, ViaAddress} {
		for _, chunk := range []uint8{11, 63} {
			t.Run(fmt.Sprint(via, "/", chunk), func(t *testing.T) {
				server := newTestEngine(t, Options{})
				sc := newCollector(t, server)
				opts := EndpointOptions{Via: via}
				lh, port, err := server.ListenWith("127.0.0.1", 0, opts)
				if err != nil {
					t.Fatal(err)
				}
				liar := newTestEngine(t, Options{})
				liar.namedChunk = chunk
				lc := newCollector(t, liar)
				id, err := liar.ConnectWith("127.0.0.1", port, 5*time.Second, opts)
				if err != nil {
					t.Fatal(err)
				}
				if c := lc.wait(id, 10*time.Second); c.Status == 0 {
					// Its own half of the handshake done, it learns of the refusal as
					// its endpoint's failure.
					if c := lc.wait(EventEndpointError|c.Length, 10*time.Second); c.Status == 0 {
						t.Fatal("the liar's endpoint ended without an error")
					}
				}
				settle(t, server)
				noCompletion(t, sc, EventListenerAccept|lh)
				honest := newTestEngine(t, Options{})
				hc := newCollector(t, honest)
				if id, err = honest.ConnectWith("127.0.0.1", port, 5*time.Second, opts); err != nil {
					t.Fatal(err)
				}
				c := hc.wait(id, 10*time.Second)
				if c.Status != 0 {
					t.Fatalf("honest connect: %v", ucxx.Status(c.Status))
				}
				exchange(t, honest, c.Length, hc, server, sc.wait(EventListenerAccept|lh, 10*time.Second).Length, sc, []byte("hello"))
			})
		}
	}
}
