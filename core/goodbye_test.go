package core

import (
	"bytes"
	"runtime"
	"testing"
	"time"
)

// TestCloseDeliversToABusyPeer: messages sent just before a graceful close reach a
// peer whose progress thread was busy while they were sent and the close began: the
// close waits for the peer's answer to its goodbye, so UCX's disconnect cannot
// overtake them.
func TestCloseDeliversToABusyPeer(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, sep, cc, sc := pair(t, client, server)
	const count, size = 32, 16 << 10
	bufs := make([][]byte, count)
	release := holdProgress(t, client)
	ids := make([]uint64, count)
	for i := range bufs {
		bufs[i] = bytes.Repeat([]byte{byte(i + 1)}, size)
		id, err := server.TagSend(sep, addr(bufs[i]), size, 9, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	closeID, err := server.CloseEndpoint(sep, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	release()
	for i := range bufs {
		got := make([]byte, size)
		id, err := client.TagRecv(cep, addr(got), size, 9, ^uint64(0), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if c := cc.wait(id, 5*time.Second); c.Status != 0 || c.Length != size || !bytes.Equal(got, bufs[i]) {
			t.Fatalf("message %d: status %d, length %d, intact %v", i, c.Status, c.Length, bytes.Equal(got, bufs[i]))
		}
	}
	for i, id := range ids {
		if c := sc.wait(id, 5*time.Second); c.Status != 0 {
			t.Fatalf("send %d: status %d", i, c.Status)
		}
	}
	if c := sc.wait(closeID, 10*time.Second); c.Status != 0 {
		t.Fatalf("close: %+v", c)
	}
	waitIdle(t, server)
	runtime.KeepAlive(bufs)
}

// TestCloseOfAStalledPeerEndsByTheDeadline: a graceful close whose peer never answers
// the goodbye (its progress thread is stalled) completes by the close's deadline.
func TestCloseOfAStalledPeerEndsByTheDeadline(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	_, sep, _, sc := pair(t, client, server)
	release := holdProgress(t, client)
	defer release()
	const timeout = 300 * time.Millisecond
	start := time.Now()
	id, err := server.CloseEndpoint(sep, timeout)
	if err != nil {
		t.Fatal(err)
	}
	if c := sc.wait(id, 10*timeout); c.Status != 0 {
		t.Fatalf("close: %+v", c)
	}
	if took := time.Since(start); took < timeout {
		t.Fatalf("close answered after %v, before the peer could answer and before the %v deadline", took, timeout)
	}
}

// TestBothSidesCloseGracefullyAtOnce: two sides closing at once each answer the
// other's goodbye, so neither waits for its deadline.
func TestBothSidesCloseGracefullyAtOnce(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, sep, cc, sc := pair(t, client, server)
	const timeout = time.Minute
	cid, err := client.CloseEndpoint(cep, timeout)
	if err != nil {
		t.Fatal(err)
	}
	sid, err := server.CloseEndpoint(sep, timeout)
	if err != nil {
		t.Fatal(err)
	}
	// Far less than the deadline: each close ended on the other's answer.
	if c := cc.wait(cid, 10*time.Second); c.Status != 0 {
		t.Fatalf("client close: %+v", c)
	}
	if c := sc.wait(sid, 10*time.Second); c.Status != 0 {
		t.Fatalf("server close: %+v", c)
	}
	waitIdle(t, client)
	waitIdle(t, server)
}
