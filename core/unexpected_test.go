package core

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// floodTags sends n messages of size bytes from engine e's endpoint ep on tags base+1,
// base+2, ... that nobody receives, and waits until every send completed or failed.
func floodTags(t *testing.T, e *Engine, ep uint64, c *collector, base uint64, n, size int) {
	t.Helper()
	msg := bytes.Repeat([]byte{0xab}, size)
	ids := make([]uint64, n)
	for i := range ids {
		id, err := e.TagSend(ep, addr(msg), uint64(size), base+uint64(i+1), 0, 0)
		if err != nil {
			break // the receiver already failed the connection
		}
		ids[i] = id
	}
	for _, id := range ids {
		if id != 0 {
			c.wait(id, 10*time.Second)
		}
	}
}

func unexpectedBytes(t *testing.T, e *Engine) int64 {
	t.Helper()
	return stats(t, e).UnexpectedBytes
}

// TestUnexpectedFloodFailsTheEndpoint: a peer sending messages nobody receives, and
// ignoring flow control, makes the engine hold them only up to MaxUnexpectedBytes;
// past it the endpoint fails with StatusExceedsLimit and what it held is freed. Before
// the bound, 40,000 such messages of 8 KiB grew the receiver by 470 MB.
func TestUnexpectedFloodFailsTheEndpoint(t *testing.T) {
	const bound = 1 << 20
	client, server := unpaced(newTestEngine(t, Options{})), newTestEngine(t, Options{MaxUnexpectedBytes: bound})
	cep, sep, cc, sc := pair(t, client, server)
	floodTags(t, client, cep, cc, endpointInfo(t, client, cep).SendTag, 400, 8<<10) // 3.2 MiB
	if c := sc.wait(EventEndpointError|sep, 10*time.Second); ucxx.Status(c.Status) != ucxx.StatusExceedsLimit {
		t.Fatalf("endpoint error status %d, want StatusExceedsLimit", c.Status)
	}
	if n := unexpectedBytes(t, server); n != 0 {
		t.Fatalf("%d bytes still held after the endpoint failed", n)
	}
}

// TestUnexpectedWithinTheBoundIsReceivedInOrder: messages that arrive before their
// receives are held and matched in arrival order, by exact tag and under a mask, and
// the endpoint stays up.
func TestUnexpectedWithinTheBoundIsReceivedInOrder(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, sep, cc, sc := pair(t, client, server)
	base := endpointInfo(t, client, cep).SendTag
	msgs := make([][]byte, 6)
	for i := range msgs {
		msgs[i] = []byte(fmt.Sprintf("message %d", i))
		tag := base + 1 + uint64(i%2) // tags base+1 and base+2, alternating
		id, err := client.TagSend(cep, addr(msgs[i]), uint64(len(msgs[i])), tag, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if c := cc.wait(id, 5*time.Second); c.Status != 0 {
			t.Fatalf("send %d: status %d", i, c.Status)
		}
	}
	// A barrier: once this message is in, so are the six before it.
	ping := []byte("ping")
	recvPing := make([]byte, 4)
	rid, _ := server.TagRecv(sep, addr(recvPing), 4, base+99, ^uint64(0), 0, 0)
	sid, _ := client.TagSend(cep, addr(ping), 4, base+99, 0, 0)
	cc.wait(sid, 5*time.Second)
	sc.wait(rid, 5*time.Second)
	if n := unexpectedBytes(t, server); n <= 0 {
		t.Fatalf("held %d bytes; the six messages should be held", n)
	}
	recv := func(tag, mask uint64) string {
		buf := make([]byte, 64)
		id, err := server.TagRecv(sep, addr(buf), 64, tag, mask, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		c := sc.wait(id, 5*time.Second)
		if c.Status != 0 {
			t.Fatalf("receive: status %d", c.Status)
		}
		return string(buf[:c.Length])
	}
	// Tag base+2 holds messages 1, 3, 5; then any tag of the endpoint (a mask) gets
	// the oldest left: 0, 2, 4.
	for _, want := range []string{"message 1", "message 3"} {
		if got := recv(base+2, ^uint64(0)); got != want {
			t.Fatalf("exact tag: got %q, want %q", got, want)
		}
	}
	for _, want := range []string{"message 0", "message 2", "message 4", "message 5"} {
		if got := recv(base, ^uint64(1<<UserTagBits-1)); got != want {
			t.Fatalf("masked: got %q, want %q", got, want)
		}
	}
	if n := unexpectedBytes(t, server); n != 0 {
		t.Fatalf("%d bytes held after every message was received", n)
	}
	noCompletion(t, sc, EventEndpointError|sep)
}

// TestUnexpectedOrphansAreBounded: messages whose tag names no endpoint are held up to
// the bound and dropped beyond it; the connection they came on stays up.
func TestUnexpectedOrphansAreBounded(t *testing.T) {
	const bound = 256 << 10
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{MaxUnexpectedBytes: bound})
	cep, sep, cc, sc := pair(t, client, server)
	floodTags(t, client, cep, cc, 0, 200, 8<<10) // ids 0: nobody's
	exchange(t, client, cep, cc, server, sep, sc, []byte("still up"))
	if n := unexpectedBytes(t, server); n > bound || n <= 0 {
		t.Fatalf("held %d bytes of orphans; want some, at most %d", n, bound)
	}
	noCompletion(t, sc, EventEndpointError|sep)
}

// TestUnexpectedOfAClosedEndpointIsFreed: messages that arrive for an endpoint the
// application is closing or closed, unreceived, are freed with it: those held at the
// close, and those still in UCX's queue or in flight then (they are known as the closed
// endpoint's, not kept as orphans).
func TestUnexpectedOfAClosedEndpointIsFreed(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, sep, cc, sc := pair(t, client, server)
	base := endpointInfo(t, client, cep).SendTag
	floodTags(t, client, cep, cc, base, 20, 8<<10) // held at the close
	msg := bytes.Repeat([]byte{0xcd}, 8<<10)
	for i := range 200 { // in flight at the close
		if _, err := client.TagSend(cep, addr(msg), uint64(len(msg)), base+uint64(100+i), 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	id, err := server.CloseEndpoint(sep, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sc.wait(id, 5*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for n := unexpectedBytes(t, server); n != 0; n = unexpectedBytes(t, server) {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still held 5 s after the endpoint was closed", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
