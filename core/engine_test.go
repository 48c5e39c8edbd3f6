package core

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

func TestEchoOverLoopback(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"blocking", Options{}},
		{"polling", Options{Mode: Polling}},
		{"no-delayed-submission", Options{NoDelayedSubmission: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := newTestEngine(t, tc.opts), newTestEngine(t, tc.opts)
			cep, sep, cc, sc := pair(t, client, server)
			ci, err := client.EndpointInfo(cep)
			if err != nil {
				t.Fatal(err)
			}
			si, err := server.EndpointInfo(sep)
			if err != nil {
				t.Fatal(err)
			}
			if ci.SendTag != si.RecvTag || si.SendTag != ci.RecvTag {
				t.Fatalf("tags not exchanged: client %+v server %+v", ci, si)
			}
			for _, size := range []int{0, 1, 8192, 1 << 20} {
				msg := bytes.Repeat([]byte{byte(size)}, size)
				for i := range msg {
					msg[i] = byte(i * 7)
				}
				out := make([]byte, size+1) // room to spare: a short message is fine
				rid, err := server.TagRecv(sep, addr(out), uint64(len(out)), si.RecvTag, ^uint64(0), 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				sid, err := client.TagSend(cep, addr(msg), uint64(size), ci.SendTag, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				if c := cc.wait(sid, 10*time.Second); c.Status != 0 {
					t.Fatalf("send %d: status %d", size, c.Status)
				}
				c := sc.wait(rid, 10*time.Second)
				if c.Status != 0 || c.Length != uint64(size) || c.Tag != si.RecvTag {
					t.Fatalf("recv %d: %+v", size, c)
				}
				if !bytes.Equal(out[:size], msg) {
					t.Fatalf("recv %d: payload differs", size)
				}
			}
			closeID, err := client.CloseEndpoint(cep, 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if c := cc.wait(closeID, 5*time.Second); c.Status != 0 {
				t.Fatalf("close: status %d", c.Status)
			}
			if _, err := client.TagSend(cep, 0, 0, 0, 0, 0); !errors.Is(err, ucxx.ErrClosed) {
				t.Fatalf("send after close: %v, want ErrClosed", err)
			}
			// The server learns of the close: its endpoint reports an error event.
			ev := sc.wait(EventEndpointError|sep, 10*time.Second)
			if ev.Status == 0 {
				t.Fatalf("peer close reported with status 0")
			}
		})
	}
}

// TestQuietEngineWakes: engines whose progress threads sleep in the blocking wait
// after 1 ms without work still wake for a submission (the sender) and for UCX (the
// receiver), each way, after being quiet.
func TestQuietEngineWakes(t *testing.T) {
	opts := Options{QuietAfter: time.Millisecond}
	client, server := newTestEngine(t, opts), newTestEngine(t, opts)
	cep, sep, cc, sc := pair(t, client, server)
	// A thread that missed its wake-up would still run at its idle timeout (idleWake,
	// a second): an exchange taking that long is the failure, not a slow machine.
	const missed = idleWake / 2
	for i := range 3 {
		for _, dir := range []struct {
			from, to     *Engine
			fromEP, toEP uint64
			fc, tc       *collector
		}{{client, server, cep, sep, cc, sc}, {server, client, sep, cep, sc, cc}} {
			// Idleness is what is under test: no event says a thread has gone quiet,
			// only time without work does (many times QuietAfter here).
			time.Sleep(20 * time.Millisecond)
			start := time.Now()
			exchange(t, dir.from, dir.fromEP, dir.fc, dir.to, dir.toEP, dir.tc, []byte{byte(i), 1})
			if d := time.Since(start); d > missed {
				t.Fatalf("exchange %d after quiet took %v: a wake-up was missed", i, d)
			}
		}
	}
}
