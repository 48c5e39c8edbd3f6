package core

import (
	"bytes"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/notifier"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// An eager send, and a receive whose message is there, end within the submitting
// call; nothing of theirs reaches the queue.
func TestInlineCompletion(t *testing.T) {
	opts := Options{InlineWait: 2 * time.Second} // long: the outcome must not depend on timing
	client, server := newTestEngine(t, opts), newTestEngine(t, opts)
	cep, sep, cc, sc := pair(t, client, server)
	ci, _ := client.EndpointInfo(cep)
	si, _ := server.EndpointInfo(sep)

	msg := []byte("inline!!")
	st, err := client.TagSendInline(cep, addr(msg), uint64(len(msg)), ci.SendTag, 0, 0)
	if err != nil || !st.Done || st.Status != ucxx.StatusOK {
		t.Fatalf("TagSendInline: %+v, %v; want Done with status OK", st, err)
	}
	out := make([]byte, 16)
	rt, err := server.TagRecvInline(sep, addr(out), uint64(len(out)), si.RecvTag, ^uint64(0), 0, 0)
	if err != nil || !rt.Done || rt.Status != ucxx.StatusOK || rt.Length != uint64(len(msg)) {
		t.Fatalf("TagRecvInline: %+v, %v; want Done, length %d", rt, err, len(msg))
	}
	if !bytes.Equal(out[:len(msg)], msg) {
		t.Fatalf("payload %q, want %q", out[:len(msg)], msg)
	}
	// A round trip through the queue afterwards: had the inline completions been
	// queued too, they would come out first.
	sid, err := client.TagSend(cep, addr(msg), uint64(len(msg)), ci.SendTag, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	rid, err := server.TagRecv(sep, addr(out), uint64(len(out)), si.RecvTag, ^uint64(0), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	cc.wait(sid, 10*time.Second)
	sc.wait(rid, 10*time.Second)
	for _, c := range []*collector{cc, sc} {
		if len(c.got) != 0 {
			t.Fatalf("completions queued besides the awaited ones: %v", c.got)
		}
		var buf [8]notifier.Completion
		if n := c.q.Pop(buf[:]); n != 0 {
			t.Fatalf("queue holds %d more completions: %v", n, buf[:n])
		}
	}
}

// A receive whose message does not come within the wait is reported through the
// queue, once, when it does; so is a rendezvous send nobody receives yet.
func TestInlineWaitExpires(t *testing.T) {
	opts := Options{InlineWait: time.Millisecond}
	client, server := newTestEngine(t, opts), newTestEngine(t, opts)
	cep, sep, cc, sc := pair(t, client, server)
	ci, _ := client.EndpointInfo(cep)
	si, _ := server.EndpointInfo(sep)

	out := make([]byte, 1<<20)
	rt, err := server.TagRecvInline(sep, addr(out), uint64(len(out)), si.RecvTag, ^uint64(0), 0, 0)
	if err != nil || rt.Done {
		t.Fatalf("TagRecvInline with no message: %+v, %v; want a pending ticket", rt, err)
	}
	msg := bytes.Repeat([]byte{7}, 1<<20)
	st, err := client.TagSendInline(cep, addr(msg), uint64(len(msg)), ci.SendTag, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Done {
		if c := cc.wait(st.ID, 10*time.Second); c.Status != 0 {
			t.Fatalf("send: status %d", c.Status)
		}
	}
	c := sc.wait(rt.ID, 10*time.Second)
	if c.Status != 0 || c.Length != uint64(len(msg)) || !bytes.Equal(out, msg) {
		t.Fatalf("receive: %+v, payload equal %v", c, bytes.Equal(out, msg))
	}
}

// After inlineBackoff waits in a row come to nothing the budget waits the minimum,
// with a full wait every inlineProbe calls; one that pays off restores it.
func TestInlineBudgetBacksOff(t *testing.T) {
	const limit = 50 * time.Microsecond
	var b inlineBudget
	for i := 0; i < inlineBackoff; i++ {
		if w := b.wait(limit); w != limit {
			t.Fatalf("miss %d: wait %v, want %v", i, w, limit)
		}
		b.update(false)
	}
	full := 0
	for i := 0; i < 2*inlineProbe; i++ {
		if b.wait(limit) == limit {
			full++
		}
		b.update(false)
	}
	if full != 2 {
		t.Fatalf("%d full waits in %d backed-off calls, want 2 probes", full, 2*inlineProbe)
	}
	b.update(true)
	if w := b.wait(limit); w != limit {
		t.Fatalf("after a hit: wait %v, want %v", w, limit)
	}
}

// A progress thread completing a request whose caller gave up must not complete the
// slot's next user; and when every slot is taken, calls do without.
func TestInlineSlots(t *testing.T) {
	var s inlineSlots
	s.init()
	n := s.acquire(10)
	if _, _, ok := s.wait(n, 10, 0); ok {
		t.Fatal("wait with nothing completed reported a completion")
	}
	m := s.acquire(11)
	if m != n {
		t.Fatalf("freed slot not reused: got %d, want %d", m, n)
	}
	if s.complete(m, 10, ucxx.StatusOK, 1) {
		t.Fatal("stale request 10 completed the slot request 11 waits in")
	}
	if !s.complete(m, 11, ucxx.StatusOK, 8) {
		t.Fatal("request 11 could not complete its own slot")
	}
	if st, length, ok := s.wait(m, 11, time.Second); !ok || st != ucxx.StatusOK || length != 8 {
		t.Fatalf("wait: %v %d %v, want OK 8 true", st, length, ok)
	}
	for i := 0; i < inlineSlotCount; i++ {
		if s.acquire(uint64(100+i)) == 0 {
			t.Fatalf("slot %d not available", i)
		}
	}
	if s.acquire(999) != 0 {
		t.Fatal("acquire succeeded with every slot taken")
	}
}
