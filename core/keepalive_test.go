package core

import (
	"bytes"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// TestKeepaliveFailsAFrozenPeer: a peer whose progress thread stops (as under SIGSTOP)
// keeps its connection up; once the keepalive timeout passes without a word from it,
// the endpoint fails with StatusTimedOut, and so does a receive pending on it.
func TestKeepaliveFailsAFrozenPeer(t *testing.T) {
	const timeout = 600 * time.Millisecond
	client := newTestEngine(t, Options{KeepaliveTimeout: timeout})
	server := newTestEngine(t, Options{KeepaliveTimeout: timeout})
	_, sep, _, sc := pair(t, client, server)
	buf := make([]byte, 8)
	id, err := server.TagRecv(sep, addr(buf), 8, 1, ^uint64(0), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	release := holdProgress(t, client)
	defer release()
	start := time.Now()
	if c := sc.wait(id, 10*timeout); ucxx.Status(c.Status) != ucxx.StatusTimedOut {
		t.Fatalf("pending receive ended with status %d, want StatusTimedOut", c.Status)
	}
	// The server last heard the client at most one keepalive interval (timeout/3)
	// before the hold: its silence began then, not at start.
	if took, least := time.Since(start), timeout-timeout/3; took < least {
		t.Fatalf("failed after %v: before the %v timeout less one keepalive interval", took, timeout)
	}
	if c := sc.wait(EventEndpointError|sep, time.Second); ucxx.Status(c.Status) != ucxx.StatusTimedOut {
		t.Fatalf("endpoint error status %d, want StatusTimedOut", c.Status)
	}
}

// TestKeepaliveKeepsAnIdleConnection: a connection idle for several keepalive timeouts
// stays up while both peers run, and carries messages afterwards; so does one where
// only one side keeps alive (keepalive is off for it: the handshake says so).
func TestKeepaliveKeepsAnIdleConnection(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, serverTimeout := range []time.Duration{timeout, -1} {
		client := newTestEngine(t, Options{KeepaliveTimeout: timeout})
		server := newTestEngine(t, Options{KeepaliveTimeout: serverTimeout})
		cep, sep, cc, sc := pair(t, client, server)
		buf := make([]byte, 8)
		id, err := server.TagRecv(sep, addr(buf), 8, 1, ^uint64(0), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		// The idle time is what is tested, not a synchronisation: five timeouts.
		time.Sleep(5 * timeout)
		noCompletion(t, sc, id)
		noCompletion(t, sc, EventEndpointError|sep)
		noCompletion(t, cc, EventEndpointError|cep)
		msg := []byte("still up")
		sid, err := client.TagSend(cep, addr(msg), 8, 1, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if c := cc.wait(sid, 5*time.Second); c.Status != 0 {
			t.Fatalf("server keepalive %v: send status %d", serverTimeout, c.Status)
		}
		if c := sc.wait(id, 5*time.Second); c.Status != 0 || !bytes.Equal(buf, msg) {
			t.Fatalf("server keepalive %v: receive status %d, got %q", serverTimeout, c.Status, buf)
		}
	}
}
