package core

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Active messages over a loopback pair: the receiver allocates, and each message is
// delivered as a block with a one-frame record (block.go), its data at
// ucxx.AMDataOffset. Small messages come eagerly; large ones (1 MiB) by rendezvous,
// which the receiving engine fetches.

// amPair is a connected pair whose client sends active messages to the server.
type amPair struct {
	client, server *Engine
	cep, sep       uint64
	cc, sc         *collector
}

func newAMPair(t *testing.T) *amPair {
	t.Helper()
	p := &amPair{client: newTestEngine(t, Options{}), server: newTestEngine(t, Options{})}
	p.cep, p.sep, p.cc, p.sc = pair(t, p.client, p.server)
	return p
}

// startSend queues msg as an active message and returns the request id.
func (p *amPair) startSend(t *testing.T, msg []byte) uint64 {
	t.Helper()
	id, err := p.client.AMSend(p.cep, addr(msg), uint64(len(msg)), 0, 0)
	if err != nil {
		t.Fatalf("AMSend: %v", err)
	}
	return id
}

// startRecv queues an AMRecv on the server's endpoint.
func (p *amPair) startRecv(t *testing.T) uint64 {
	t.Helper()
	id, err := p.server.AMRecv(p.sep)
	if err != nil {
		t.Fatalf("AMRecv: %v", err)
	}
	return id
}

// expect waits for AMRecv id and checks its block: one host frame holding want, at
// ucxx.AMDataOffset, the block's size word covering exactly the data.
func (p *amPair) expect(t *testing.T, id uint64, want []byte, what string) {
	t.Helper()
	c := p.sc.wait(id, 10*time.Second)
	if st := ucxx.Status(c.Status); st != ucxx.StatusOK {
		t.Fatalf("%s: AMRecv completed with %v", what, st)
	}
	defer ucxx.CFreeAddr(uintptr(c.Length))
	size, frames := readBlock(t, c.Length)
	if len(frames) != 1 {
		t.Fatalf("%s: block of %d frames, want 1", what, len(frames))
	}
	f := frames[0]
	if f.loc != ucxx.AMDataOffset || f.size != uint64(len(want)) || f.memType != uint64(MemHost) || size != ucxx.AMDataOffset+uint64(len(want)) {
		t.Fatalf("%s: record: block size %d, frame at %d, %d bytes, memory type %#x; want %d, %d, %d, host",
			what, size, f.loc, f.size, f.memType, ucxx.AMDataOffset+len(want), ucxx.AMDataOffset, len(want))
	}
	if !bytes.Equal(f.data, want) {
		t.Fatalf("%s: the %d bytes received differ from those sent", what, len(want))
	}
}

// expectStatus waits for AMRecv id and checks that it failed with want, no block.
func (p *amPair) expectStatus(t *testing.T, id uint64, want ucxx.Status, what string) {
	t.Helper()
	c := p.sc.wait(id, 10*time.Second)
	if st := ucxx.Status(c.Status); st != want || c.Length != 0 {
		if st == ucxx.StatusOK && c.Length != 0 {
			ucxx.CFreeAddr(uintptr(c.Length))
		}
		t.Fatalf("%s: AMRecv completed with %v, block %#x; want %v and no block", what, st, c.Length, want)
	}
}

// waitSent waits for AMSend id to succeed.
func (p *amPair) waitSent(t *testing.T, id uint64) {
	t.Helper()
	if c := p.cc.wait(id, 10*time.Second); c.Status != 0 {
		t.Fatalf("AMSend completed with %v", ucxx.Status(c.Status))
	}
}

// amSizes are sent eagerly up to a few KiB; 1 MiB goes by rendezvous.
var amSizes = []int{0, 1, 100, 8192, 100_000, 1 << 20}

// TestAMRoundTrip sends one message of each size with the receive posted first, and
// one with the message there first (for a rendezvous message: its announcement).
func TestAMRoundTrip(t *testing.T) {
	p := newAMPair(t)
	for i, size := range amSizes {
		msg := testMessage(i, size)[0]
		what := fmt.Sprintf("%d bytes, receive first", size)
		rid := p.startRecv(t)
		p.waitSent(t, p.startSend(t, msg))
		p.expect(t, rid, msg, what)

		// The message first: the plain message sent after it is received once the
		// active message is in (or, by rendezvous, announced).
		what = fmt.Sprintf("%d bytes, message first", size)
		sid := p.startSend(t, msg)
		exchange(t, p.client, p.cep, p.cc, p.server, p.sep, p.sc, []byte("barrier"))
		p.expect(t, p.startRecv(t), msg, what)
		p.waitSent(t, sid)
		runtime.KeepAlive(msg)
	}
}

// TestAMOrder: receives get the messages in the order they were sent, receives
// posted first or messages there first, for trains of eager messages, of rendezvous
// messages, and of both mixed.
func TestAMOrder(t *testing.T) {
	for _, c := range []struct {
		name  string
		sizes []int
	}{
		{"eager", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
		{"rendezvous", []int{1 << 20, 1<<20 + 1, 1<<20 + 2, 1<<20 + 3}},
		{"mixed", []int{1 << 20, 10, 1 << 20, 0, 20, 1 << 20, 30}},
	} {
		for _, recvFirst := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/recvFirst=%t", c.name, recvFirst), func(t *testing.T) {
				p := newAMPair(t)
				msgs := make([][]byte, len(c.sizes))
				for i, size := range c.sizes {
					msgs[i] = testMessage(100+i, size)[0]
				}
				rids := make([]uint64, len(msgs))
				if recvFirst {
					for i := range rids {
						rids[i] = p.startRecv(t)
					}
				}
				sids := make([]uint64, len(msgs))
				for i, msg := range msgs {
					sids[i] = p.startSend(t, msg)
				}
				if !recvFirst {
					exchange(t, p.client, p.cep, p.cc, p.server, p.sep, p.sc, []byte("barrier"))
					for i := range rids {
						rids[i] = p.startRecv(t)
					}
				}
				for i, msg := range msgs {
					p.expect(t, rids[i], msg, fmt.Sprintf("message %d (%d bytes)", i, len(msg)))
				}
				for _, id := range sids {
					p.waitSent(t, id)
				}
				runtime.KeepAlive(msgs)
			})
		}
	}
}

// TestAMRecvCancel: a waiting AMRecv cancelled completes with Canceled and takes
// nothing: the next message goes to the next receive. Cancelling it again, or
// cancelling a receive that completed, reports nothing more.
func TestAMRecvCancel(t *testing.T) {
	p := newAMPair(t)
	r1, r2 := p.startRecv(t), p.startRecv(t)
	if err := p.server.Cancel(r1); err != nil {
		t.Fatal(err)
	}
	p.expectStatus(t, r1, ucxx.StatusCanceled, "cancelled AMRecv")
	if err := p.server.Cancel(r1); err != nil {
		t.Fatal(err)
	}
	msgs := [][]byte{[]byte("first"), []byte("second")}
	for _, msg := range msgs {
		p.waitSent(t, p.startSend(t, msg))
	}
	p.expect(t, r2, msgs[0], "the receive behind the cancelled one")
	r3 := p.startRecv(t)
	p.expect(t, r3, msgs[1], "the next receive")
	if err := p.server.Cancel(r3); err != nil {
		t.Fatal(err)
	}
	settle(t, p.server)
	noCompletion(t, p.sc, r1)
	noCompletion(t, p.sc, r3)
}

// TestAMRecvCancelTakesNothing: a cancelled AMRecv, whatever its completion says (see
// TestAMRecvCancel), takes no message: the receives posted behind it and after it
// get the messages in order.
func TestAMRecvCancelTakesNothing(t *testing.T) {
	p := newAMPair(t)
	r1, r2 := p.startRecv(t), p.startRecv(t)
	if err := p.server.Cancel(r1); err != nil {
		t.Fatal(err)
	}
	settle(t, p.server)
	msgs := [][]byte{[]byte("first"), []byte("second")}
	for _, msg := range msgs {
		p.waitSent(t, p.startSend(t, msg))
	}
	p.expect(t, r2, msgs[0], "the receive behind the cancelled one")
	p.expect(t, p.startRecv(t), msgs[1], "the next receive")
}

// TestAMRecvEndpointGone: AMRecvs waiting when the endpoint goes fail with Canceled
// when the application aborts or closes it, with the endpoint's error when the peer
// goes away; an AMRecv after that is refused.
func TestAMRecvEndpointGone(t *testing.T) {
	for _, how := range []string{"abort", "close", "peer aborts"} {
		t.Run(how, func(t *testing.T) {
			p := newAMPair(t)
			ids := []uint64{p.startRecv(t), p.startRecv(t)}
			settle(t, p.server)
			want := ucxx.StatusCanceled
			switch how {
			case "abort":
				if err := p.server.AbortEndpoint(p.sep); err != nil {
					t.Fatal(err)
				}
			case "close":
				cid, err := p.server.CloseEndpoint(p.sep, 2*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if c := p.sc.wait(cid, 5*time.Second); c.Status != 0 {
					t.Fatalf("close: %v", ucxx.Status(c.Status))
				}
			case "peer aborts":
				if err := p.client.AbortEndpoint(p.cep); err != nil {
					t.Fatal(err)
				}
				ev := p.sc.wait(EventEndpointError|p.sep, 10*time.Second)
				if ev.Status == 0 {
					t.Fatal("endpoint error event with status 0")
				}
				want = ucxx.Status(ev.Status)
			}
			for i, id := range ids {
				p.expectStatus(t, id, want, fmt.Sprintf("AMRecv %d", i))
			}
			_, err := p.server.AMRecv(p.sep)
			if how == "peer aborts" {
				if ucxx.StatusOf(err) != want && !errors.Is(err, ErrEndpointClosed) {
					t.Fatalf("AMRecv on the broken endpoint: %v; want its status %v or ErrEndpointClosed", err, want)
				}
			} else if !errors.Is(err, ErrEndpointClosed) {
				t.Fatalf("AMRecv on the closed endpoint: %v; want ErrEndpointClosed", err)
			}
			waitIdle(t, p.server)
		})
	}
}
