package core

import (
	"bytes"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/notifier"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// sinkWait returns the completion of id from s, keeping others in got, failing the
// test after timeout.
func sinkWait(t *testing.T, s *Sink, got map[uint64]notifier.Completion, id uint64, timeout time.Duration) notifier.Completion {
	t.Helper()
	deadline := time.After(timeout)
	for {
		for _, c := range s.Take(nil) {
			if _, dup := got[c.ID]; dup {
				t.Fatalf("two completions for %#x", c.ID)
			}
			got[c.ID] = c
		}
		if c, ok := got[id]; ok {
			return c
		}
		select {
		case <-s.Ready():
		case <-deadline:
			t.Fatalf("no completion for %#x in the sink within %v", id, timeout)
		}
	}
}

// TestSinkTakesItsCompletions: sends, receives, puts, flushes, signals and semaphore
// waits submitted through a sink complete into it, with the statuses and lengths the
// queue would carry, and nothing of them reaches the queue; a cancelled receive
// completes Canceled into its sink.
func TestSinkTakesItsCompletions(t *testing.T) {
	p := newRMAPair(t)
	cs, ss := NewSink(), NewSink()
	cgot, sgot := map[uint64]notifier.Completion{}, map[uint64]notifier.Completion{}

	msg := []byte("through a sink")
	in := make([]byte, 64)
	rid, err := ss.TagRecv(p.server, p.sep, addr(in), uint64(len(in)), 7, ^uint64(0), ucxx.MemoryHost, 0)
	if err != nil {
		t.Fatal(err)
	}
	sid, err := cs.TagSend(p.client, p.cep, addr(msg), uint64(len(msg)), 7, ucxx.MemoryHost, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c := sinkWait(t, cs, cgot, sid, 10*time.Second); c.Status != 0 || c.Length != uint64(len(msg)) {
		t.Fatalf("send: %+v", c)
	}
	if c := sinkWait(t, ss, sgot, rid, 10*time.Second); c.Status != 0 || c.Length != uint64(len(msg)) || !bytes.Equal(in[:len(msg)], msg) {
		t.Fatalf("recv: %+v %q", c, in[:c.Length])
	}

	target := make([]byte, 32)
	_, key := p.share(t, target)
	src := bytes.Repeat([]byte{9}, 32)
	sem, err := p.server.NewSemaphore(p.sep)
	if err != nil {
		t.Fatal(err)
	}
	packed, err := p.server.PackSemaphore(sem)
	if err != nil {
		t.Fatal(err)
	}
	skey, err := p.client.UnpackKey(p.cep, addr(packed), len(packed))
	if err != nil {
		t.Fatal(err)
	}
	wid, err := ss.WaitSemaphore(p.server, sem, 1)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := cs.Put(p.client, p.cep, Transfer{Key: key.ID, Addr: addr(src), Size: 32, MemType: MemHost}, 0)
	if err != nil {
		t.Fatal(err)
	}
	fid, err := cs.Flush(p.client, p.cep)
	if err != nil {
		t.Fatal(err)
	}
	gid, err := cs.Signal(p.client, p.cep, skey.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	for what, id := range map[string]uint64{"put": pid, "flush": fid, "signal": gid} {
		if c := sinkWait(t, cs, cgot, id, 10*time.Second); c.Status != 0 {
			t.Fatalf("%s: %v", what, ucxx.Status(c.Status))
		}
	}
	if c := sinkWait(t, ss, sgot, wid, 10*time.Second); c.Status != 0 || c.Length != 1 || !bytes.Equal(target, src) {
		t.Fatalf("semaphore wait: %+v", c)
	}

	// A receive cancelled: Canceled, into its sink.
	cid, err := ss.TagRecv(p.server, p.sep, addr(in), uint64(len(in)), 99, ^uint64(0), ucxx.MemoryHost, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.server.Cancel(cid); err != nil {
		t.Fatal(err)
	}
	if c := sinkWait(t, ss, sgot, cid, 10*time.Second); ucxx.Status(c.Status) != ucxx.StatusCanceled {
		t.Fatalf("cancelled receive: %v", ucxx.Status(c.Status))
	}

	settle(t, p.client)
	settle(t, p.server)
	for _, id := range []uint64{sid, pid, fid, gid} {
		noCompletion(t, p.cc, id)
	}
	for _, id := range []uint64{rid, wid, cid} {
		noCompletion(t, p.sc, id)
	}
}
