package core

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/notifier"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// collectN reads n completions carrying id (listener accepts share one id), keeping
// the others for the collector's wait.
func collectN(t *testing.T, c *collector, id uint64, n int, timeout time.Duration) []notifier.Completion {
	t.Helper()
	var out []notifier.Completion
	if comp, ok := c.got[id]; ok {
		out = append(out, comp)
		delete(c.got, id)
	}
	deadline := time.Now().Add(timeout)
	for len(out) < n {
		m := c.q.Pop(c.buf[:])
		for _, comp := range c.buf[:m] {
			if comp.ID == id {
				out = append(out, comp)
			} else {
				c.got[comp.ID] = comp
			}
		}
		if m > 0 {
			continue
		}
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("%d of %d completions for %#x within %v", len(out), n, id, timeout)
		}
		c.q.Wait(min(left, 100*time.Millisecond))
	}
	return out
}

func TestCancelPendingRecv(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, sep, cc, sc := pair(t, client, server)
	tag := endpointInfo(t, server, sep).RecvTag
	// A receive of 1 MiB first: UCX reuses its request memory, and a cancelled
	// receive's completion once reported that earlier receive's length and tag.
	exchange(t, client, cep, cc, server, sep, sc, make([]byte, 1<<20))

	buf := make([]byte, 64)
	rid, err := server.TagRecv(sep, addr(buf), uint64(len(buf)), tag, ^uint64(0), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Cancel(rid); err != nil {
		t.Fatal(err)
	}
	if c := sc.wait(rid, 5*time.Second); c.Status != int64(ucxx.StatusCanceled) || c.Length != 0 {
		t.Fatalf("cancelled recv: %+v; want status %d", c, ucxx.StatusCanceled)
	}
	// Cancelling what already ended is harmless and reports nothing.
	if err := server.Cancel(rid); err != nil {
		t.Fatal(err)
	}

	// The cancelled receive took nothing: both directions still work.
	exchange(t, client, cep, cc, server, sep, sc, []byte("after cancel"))
	exchange(t, server, sep, sc, client, cep, cc, []byte("and back"))
	noCompletion(t, sc, rid)
	runtime.KeepAlive(buf)
}

func TestRecvTruncated(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, sep, cc, sc := pair(t, client, server)
	sendTag := endpointInfo(t, client, cep).SendTag
	// No subtests: the collectors belong to this test's t.
	for _, tc := range []struct {
		name          string
		msg, buf      int
		postRecvFirst bool
	}{
		{"eager, expected", 64, 16, true},
		{"eager, unexpected", 64, 16, false},
		{"rendezvous, expected", 1 << 20, 1 << 10, true},
		{"rendezvous, unexpected", 1 << 20, 1 << 10, false},
	} {
		msg, buf := bytes.Repeat([]byte{0xab}, tc.msg), make([]byte, tc.buf)
		recv := func() uint64 {
			rid, err := server.TagRecv(sep, addr(buf), uint64(len(buf)), sendTag, ^uint64(0), 0, 0)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			return rid
		}
		var rid uint64
		if tc.postRecvFirst {
			rid = recv()
		}
		sid, err := client.TagSend(cep, addr(msg), uint64(len(msg)), sendTag, 0, 0)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !tc.postRecvFirst {
			if tc.msg <= 64 {
				// An eager send completes once sent: the message is then most likely
				// waiting at the server as an unexpected one. A rendezvous send waits
				// for its receive, so its request-to-send simply races the receive.
				if c := cc.wait(sid, 5*time.Second); c.Status != 0 {
					t.Fatalf("%s: send status %d", tc.name, c.Status)
				}
			}
			rid = recv()
		}
		if c := sc.wait(rid, 5*time.Second); c.Status != int64(ucxx.StatusMessageTruncated) {
			t.Fatalf("%s: recv of %d bytes into %d: %+v; want status %d", tc.name, tc.msg, tc.buf, c, ucxx.StatusMessageTruncated)
		}
		if tc.postRecvFirst || tc.msg > 64 {
			// The sender's status for a truncated message is UCX's business; it must end.
			c := cc.wait(sid, 5*time.Second)
			t.Logf("%s: send status %d", tc.name, c.Status)
		}
		runtime.KeepAlive(msg)
		runtime.KeepAlive(buf)

		exchange(t, client, cep, cc, server, sep, sc, []byte("still fine"))
		exchange(t, server, sep, sc, client, cep, cc, []byte("both ways"))
	}
}

// freePort returns a loopback port that nothing listens on: one the engine's own
// listener had, closed again.
func freePort(t *testing.T, e *Engine) int {
	t.Helper()
	lh, port, err := e.Listen("127.0.0.1", 0)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	if err := e.CloseListener(lh); err != nil {
		t.Fatalf("CloseListener: %v", err)
	}
	return port
}

func TestConnectNoListener(t *testing.T) {
	e := newTestEngine(t, Options{})
	c := newCollector(t, e)
	port := freePort(t, e)
	const timeout = 2 * time.Second
	start := time.Now()
	id, err := e.Connect("127.0.0.1", port, timeout)
	if err != nil {
		t.Fatal(err)
	}
	// The handshake deadline answers at the latest; the wait's slack covers scheduling.
	comp := c.wait(id, timeout+time.Second)
	if comp.Status == 0 {
		t.Fatalf("connect to a closed port succeeded: %+v", comp)
	}
	t.Logf("connect failed after %v with status %d (%v)", time.Since(start).Round(time.Millisecond), comp.Status, ucxx.Status(comp.Status))
	waitIdle(t, e)
}

func TestConnectInvalidAddress(t *testing.T) {
	e := newTestEngine(t, Options{})
	c := newCollector(t, e)
	for _, port := range []int{0, -1, 65536} {
		if _, err := e.Connect("127.0.0.1", port, time.Second); ucxx.StatusOf(err) != ucxx.StatusInvalidParam {
			t.Errorf("Connect(port %d) = %v; want StatusInvalidParam", port, err)
		}
	}
	// An address that does not parse fails in its completion.
	id, err := e.Connect("not-an-ip", 4000, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if comp := c.wait(id, 2*time.Second); comp.Status != int64(ucxx.StatusInvalidParam) {
		t.Fatalf("Connect(not-an-ip): %+v; want status %d", comp, ucxx.StatusInvalidParam)
	}
	waitIdle(t, e)
}

// TestConnectTimeout connects to a listener whose engine cannot answer: its progress
// thread is held, so neither UCX's connection nor the tag handshake can finish, and
// the connect must fail with StatusTimedOut at its deadline.
func TestConnectTimeout(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cc := newCollector(t, client)
	_, port, err := server.Listen("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	release := holdProgress(t, server)
	const timeout = 200 * time.Millisecond
	start := time.Now()
	id, err := client.Connect("127.0.0.1", port, timeout)
	if err != nil {
		t.Fatal(err)
	}
	comp := cc.wait(id, 2*time.Second)
	elapsed := time.Since(start)
	if comp.Status != int64(ucxx.StatusTimedOut) {
		t.Fatalf("connect to a stalled listener: %+v; want status %d (timed out)", comp, ucxx.StatusTimedOut)
	}
	if elapsed < timeout {
		t.Fatalf("timed out after %v, before its %v deadline", elapsed, timeout)
	}
	waitIdle(t, client)

	// Once the server runs again, both engines still connect.
	release()
	cep, sep, cc2, sc := pair(t, client, server)
	exchange(t, client, cep, cc2, server, sep, sc, []byte("after timeout"))
}

func TestRecvFailsWhenPeerShutsDown(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, _, cc, _ := pair(t, client, server)
	tag := endpointInfo(t, client, cep).RecvTag
	buf := make([]byte, 64)
	rid, err := client.TagRecv(cep, addr(buf), uint64(len(buf)), tag, ^uint64(0), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Stats(); err != nil { // the receive is posted once this returns
		t.Fatal(err)
	}
	if err := server.Shutdown(2 * time.Second); err != nil {
		t.Fatalf("server Shutdown: %v", err)
	}
	recv := cc.wait(rid, 5*time.Second)
	if recv.Status == 0 {
		t.Fatalf("recv pending when the peer shut down: %+v; want a failure", recv)
	}
	ev := cc.wait(EventEndpointError|cep, 5*time.Second)
	if ev.Status == 0 {
		t.Fatalf("endpoint error event with status 0: %+v", ev)
	}
	t.Logf("recv status %d (%v), endpoint error %d (%v)", recv.Status, ucxx.Status(recv.Status), ev.Status, ucxx.Status(ev.Status))
	if recv.Status != ev.Status {
		t.Errorf("recv failed with %d, the endpoint with %d: a receive should report the endpoint's error", recv.Status, ev.Status)
	}
	if _, err := client.TagSend(cep, addr(buf), 8, 0, 0, 0); err == nil {
		t.Fatal("send on the failed endpoint was accepted")
	}
	waitIdle(t, client)
	runtime.KeepAlive(buf)
}

func TestAbortEndpointCancelsRecv(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, sep, cc, sc := pair(t, client, server)
	tag := endpointInfo(t, client, cep).RecvTag
	buf := make([]byte, 64)
	rid, err := client.TagRecv(cep, addr(buf), uint64(len(buf)), tag, ^uint64(0), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.AbortEndpoint(cep); err != nil {
		t.Fatal(err)
	}
	if c := cc.wait(rid, 5*time.Second); c.Status != int64(ucxx.StatusCanceled) {
		t.Fatalf("recv on an aborted endpoint: %+v; want status %d", c, ucxx.StatusCanceled)
	}
	if _, err := client.TagSend(cep, addr(buf), 8, 0, 0, 0); !errors.Is(err, ErrEndpointClosed) {
		t.Fatalf("send after abort: %v; want ErrEndpointClosed", err)
	}
	// The peer learns of it.
	if ev := sc.wait(EventEndpointError|sep, 5*time.Second); ev.Status == 0 {
		t.Fatalf("peer's endpoint error event with status 0: %+v", ev)
	}
	waitIdle(t, client)
	noCompletion(t, cc, EventEndpointError|cep) // aborted by us: not an error event
	runtime.KeepAlive(buf)
}

func TestShutdownWithPendingWorkerRecv(t *testing.T) {
	e := newTestEngine(t, Options{})
	c := newCollector(t, e)
	buf := make([]byte, 64)
	rid, err := e.TagRecv(0, addr(buf), uint64(len(buf)), 42, ^uint64(0), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := e.Shutdown(2 * time.Second); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(start); d >= 2*time.Second {
		t.Fatalf("Shutdown took %v", d)
	}
	// The receive's completion is in the queue before it is closed.
	if comp := c.wait(rid, time.Second); comp.Status != int64(ucxx.StatusCanceled) {
		t.Fatalf("recv pending at shutdown: %+v; want status %d", comp, ucxx.StatusCanceled)
	}
	if r, err := e.Queue().Wait(time.Second); r != notifier.Closed || err != nil {
		t.Fatalf("queue Wait after Shutdown = %v, %v; want Closed", r, err)
	}
	runtime.KeepAlive(buf)
}

func TestOperationsAfterShutdown(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, _, _, _ := pair(t, client, server)
	lh, _, err := client.Listen("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Shutdown(2 * time.Second); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	buf := make([]byte, 8)
	for name, op := range map[string]func() error{
		"Shutdown":      func() error { return client.Shutdown(time.Second) },
		"TagRecv(ep=0)": func() error { _, err := client.TagRecv(0, addr(buf), 8, 1, ^uint64(0), 0, 0); return err },
		"Cancel":        func() error { return client.Cancel(1) },
		"Connect":       func() error { _, err := client.Connect("127.0.0.1", 9, time.Second); return err },
		"CloseEndpoint": func() error { _, err := client.CloseEndpoint(cep, time.Second); return err },
		"AbortEndpoint": func() error { return client.AbortEndpoint(cep) },
		"Listen":        func() error { _, _, err := client.Listen("127.0.0.1", 0); return err },
		"CloseListener": func() error { return client.CloseListener(lh) },
		"EndpointInfo":  func() error { _, err := client.EndpointInfo(cep); return err },
		"WorkerAddress": func() error { _, err := client.WorkerAddress(); return err },
		"Stats":         func() error { _, err := client.Stats(); return err },
	} {
		if err := op(); !errors.Is(err, ErrEngineClosed) {
			t.Errorf("%s after Shutdown: %v; want ErrEngineClosed", name, err)
		}
	}
	// Endpoint operations check the endpoint first; Shutdown aborted it, so they fail
	// as closed (ErrEndpointClosed), which is still a ucxx.ErrClosed.
	for name, op := range map[string]func() error{
		"TagSend": func() error { _, err := client.TagSend(cep, addr(buf), 8, 1, 0, 0); return err },
		"TagRecv": func() error { _, err := client.TagRecv(cep, addr(buf), 8, 1, ^uint64(0), 0, 0); return err },
	} {
		if err := op(); !errors.Is(err, ucxx.ErrClosed) {
			t.Errorf("%s after Shutdown: %v; want a ucxx.ErrClosed", name, err)
		}
	}
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open files: %v", err)
	}
	return len(ents)
}

func TestNewUnknownUCXOption(t *testing.T) {
	bad := Options{UCXOptions: map[string]string{"NO_SUCH_OPTION": "1"}}
	newBad := func() error {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			e, err := New(bad)
			if e != nil {
				err = errors.New("New returned an engine with its error")
				e.Shutdown(time.Second)
				e.FreeQueue()
			}
			done <- err
		}()
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
			t.Fatal("New with a bad option hung")
			return nil
		}
	}
	newBad() // UCX's one-time global setup happens here, not in the measured call

	goroutines, fds := runtime.NumGoroutine(), openFDs(t)
	err := newBad()
	if err == nil {
		t.Fatal("New with an unknown UCX option succeeded")
	}
	var uerr *ucxx.Error
	if !errors.As(err, &uerr) || ucxx.StatusOf(err) == ucxx.StatusOK {
		t.Fatalf("New: %v (%T); want a *ucxx.Error with a UCS status", err, err)
	}
	t.Logf("New: %v", err)
	if got := openFDs(t); got != fds {
		t.Errorf("open files: %d before New, %d after: New leaked on error", fds, got)
	}
	// The failed progress goroutine exits right after New returns: wait a bounded time.
	deadline := time.Now().Add(time.Second)
	for runtime.NumGoroutine() > goroutines {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines before New, %d after:\n%s", goroutines, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

// TestManyEndpoints connects 200 endpoints from one engine to one listener at once and
// sends one message each way on every connection.
func TestManyEndpoints(t *testing.T) {
	const n = 200
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cc, sc := newCollector(t, client), newCollector(t, server)
	lh, port, err := server.Listen("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uint64, n)
	for i := range ids {
		if ids[i], err = client.Connect("127.0.0.1", port, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	ceps := make([]uint64, n)
	for i, id := range ids {
		c := cc.wait(id, 10*time.Second)
		if c.Status != 0 {
			t.Fatalf("connect %d: status %d", i, c.Status)
		}
		ceps[i] = c.Length
	}
	accepts := collectN(t, sc, EventListenerAccept|lh, n, 10*time.Second)

	// Pair each client endpoint with its server end by their tags.
	byRecvTag := make(map[uint64]int, n) // server recv tag -> index into accepts
	sinfo := make([]EndpointInfo, n)
	for j, a := range accepts {
		if a.Status != 0 {
			t.Fatalf("accept %d: status %d", j, a.Status)
		}
		sinfo[j] = endpointInfo(t, server, a.Length)
		byRecvTag[sinfo[j].RecvTag] = j
	}
	if len(byRecvTag) != n {
		t.Fatalf("%d distinct receive tags among %d endpoints", len(byRecvTag), n)
	}
	peer := make([]int, n)
	for i, cep := range ceps {
		ci := endpointInfo(t, client, cep)
		j, ok := byRecvTag[ci.SendTag]
		if !ok || sinfo[j].SendTag != ci.RecvTag {
			t.Fatalf("client endpoint %d has no server end with matching tags", i)
		}
		delete(byRecvTag, ci.SendTag)
		peer[i] = j
	}

	cbufs, sbufs := make([][]byte, n), make([][]byte, n)
	cmsgs, smsgs := make([][]byte, n), make([][]byte, n)
	var crids, srids, csids, ssids [n]uint64
	for i := range n {
		j := peer[i]
		cbufs[i], sbufs[j] = make([]byte, 8), make([]byte, 8)
		cmsgs[i], smsgs[j] = binary.LittleEndian.AppendUint64(nil, uint64(i)), binary.LittleEndian.AppendUint64(nil, uint64(i)|1<<40)
		if srids[j], err = server.TagRecv(accepts[j].Length, addr(sbufs[j]), 8, sinfo[j].RecvTag, ^uint64(0), 0, 0); err != nil {
			t.Fatal(err)
		}
		if crids[i], err = client.TagRecv(ceps[i], addr(cbufs[i]), 8, sinfo[j].SendTag, ^uint64(0), 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		j := peer[i]
		if csids[i], err = client.TagSend(ceps[i], addr(cmsgs[i]), 8, sinfo[j].RecvTag, 0, 0); err != nil {
			t.Fatal(err)
		}
		if ssids[j], err = server.TagSend(accepts[j].Length, addr(smsgs[j]), 8, sinfo[j].SendTag, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		j := peer[i]
		for _, w := range []struct {
			c  *collector
			id uint64
		}{{cc, csids[i]}, {sc, ssids[j]}, {cc, crids[i]}, {sc, srids[j]}} {
			if comp := w.c.wait(w.id, 5*time.Second); comp.Status != 0 {
				t.Fatalf("connection %d: request %#x status %d", i, w.id, comp.Status)
			}
		}
		if !bytes.Equal(sbufs[j], cmsgs[i]) || !bytes.Equal(cbufs[i], smsgs[j]) {
			t.Fatalf("connection %d: server got %x (want %x), client got %x (want %x)", i, sbufs[j], cmsgs[i], cbufs[i], smsgs[j])
		}
	}
	if s, err := server.Stats(); err != nil || s.Endpoints != n {
		t.Fatalf("server Stats = %+v, %v; want %d endpoints", s, err, n)
	}
	runtime.KeepAlive(cbufs)
	runtime.KeepAlive(sbufs)
	runtime.KeepAlive(cmsgs)
	runtime.KeepAlive(smsgs)
}

// TestQueueFullBackpressure runs 300 messages into a server whose completion ring holds
// 4: completions that do not fit wait in the engine and all arrive, in order of
// completion, as the consumer drains the ring.
func TestQueueFullBackpressure(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{QueueCapacity: 4})
	cep, sep, cc, sc := pair(t, client, server)
	tag := endpointInfo(t, server, sep).RecvTag
	const n = 300
	bufs, msgs := make([][]byte, n), make([][]byte, n)
	rids, sids := make([]uint64, n), make([]uint64, n)
	var err error
	for i := range n {
		bufs[i], msgs[i] = make([]byte, 8), binary.LittleEndian.AppendUint64(nil, uint64(i))
		if rids[i], err = server.TagRecv(sep, addr(bufs[i]), 8, tag, ^uint64(0), 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if sids[i], err = client.TagSend(cep, addr(msgs[i]), 8, tag, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if c := cc.wait(sids[i], 5*time.Second); c.Status != 0 {
			t.Fatalf("send %d: status %d", i, c.Status)
		}
		if c := sc.wait(rids[i], 5*time.Second); c.Status != 0 || !bytes.Equal(bufs[i], msgs[i]) {
			t.Fatalf("recv %d: %+v, payload %x", i, c, bufs[i])
		}
	}
	runtime.KeepAlive(bufs)
	runtime.KeepAlive(msgs)
}

// TestShutdownDeliversEveryCompletion: completions that did not fit in a full ring
// must still reach a consumer that keeps draining until notifier.Closed.
func TestShutdownDeliversEveryCompletion(t *testing.T) {
	e := newTestEngine(t, Options{QueueCapacity: 2})
	q := e.Queue()
	const n = 16
	buf := make([]byte, 64)
	want := make(map[uint64]bool, n)
	for i := range n {
		id, err := e.TagRecv(0, addr(buf), uint64(len(buf)), uint64(i), ^uint64(0), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		want[id] = true
	}
	if _, err := e.Stats(); err != nil { // every receive is posted
		t.Fatal(err)
	}
	// The consumer drains until Closed, as the Python side does.
	seen := make(chan map[uint64]bool, 1)
	go func() {
		got := make(map[uint64]bool)
		var dst [8]notifier.Completion
		for {
			r, err := q.Wait(-1)
			for m := q.Pop(dst[:]); m > 0; m = q.Pop(dst[:]) {
				for _, c := range dst[:m] {
					got[c.ID] = true
				}
			}
			if r == notifier.Closed || err != nil {
				seen <- got
				return
			}
		}
	}()
	if err := e.Shutdown(2 * time.Second); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	var got map[uint64]bool
	select {
	case got = <-seen:
	case <-time.After(2 * time.Second):
		t.Fatal("consumer did not see Closed")
	}
	for id := range want {
		if !got[id] {
			t.Errorf("request %#x: no completion before the queue closed", id)
		}
	}
	runtime.KeepAlive(buf)
}

// TestCloseEndpointPeerStalled closes an endpoint with a rendezvous send in flight
// while the peer's progress thread is held: the graceful close cannot finish, but its
// completion comes at the close timeout.
func TestCloseEndpointPeerStalled(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, _, cc, _ := pair(t, client, server)
	release := holdProgress(t, server)
	msg := make([]byte, 1<<20)
	sid, err := client.TagSend(cep, addr(msg), uint64(len(msg)), endpointInfo(t, client, cep).SendTag, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 200 * time.Millisecond
	start := time.Now()
	cid, err := client.CloseEndpoint(cep, timeout)
	if err != nil {
		t.Fatal(err)
	}
	if c := cc.wait(cid, 2*time.Second); c.Status != 0 {
		t.Fatalf("close: %+v; want status 0", c)
	}
	t.Logf("close answered after %v", time.Since(start).Round(time.Millisecond))
	if _, err := client.TagSend(cep, addr(msg), 8, 0, 0, 0); !errors.Is(err, ErrEndpointClosed) {
		t.Fatalf("send after close: %v; want ErrEndpointClosed", err)
	}
	// Once the peer runs again the send ends one way or the other, and nothing leaks.
	release()
	c := cc.wait(sid, 5*time.Second)
	t.Logf("send in flight at close: status %d (%v)", c.Status, ucxx.Status(c.Status))
	waitIdle(t, client)
	runtime.KeepAlive(msg)
}

func TestListenErrors(t *testing.T) {
	e := newTestEngine(t, Options{})
	lh, port, err := e.Listen("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Listen("127.0.0.1", port); ucxx.StatusOf(err) == ucxx.StatusOK {
		t.Fatalf("second Listen on port %d: %v; want a UCX error", port, err)
	} else {
		t.Logf("second Listen: %v", err)
	}
	if _, _, err := e.Listen("not-an-ip", 0); ucxx.StatusOf(err) != ucxx.StatusInvalidParam {
		t.Fatalf("Listen(not-an-ip): %v; want StatusInvalidParam", err)
	}
	if s, err := e.Stats(); err != nil || s.Listeners != 1 {
		t.Fatalf("Stats = %+v, %v; want the one good listener", s, err)
	}
	if err := e.CloseListener(lh); err != nil {
		t.Fatal(err)
	}
	if err := e.CloseListener(lh); !errors.Is(err, ErrListenerClosed) {
		t.Fatalf("second CloseListener: %v; want ErrListenerClosed", err)
	}
}

// TestRecvDrainsBrokenEndpoint: a message the peer sent before closing stays
// receivable on our endpoint after the peer's close has torn it down (UCXX's drain
// semantics), whenever the application gets round to asking; a receive with nothing
// waiting fails with the peer's status, not with a silent cancel.
func TestRecvDrainsBrokenEndpoint(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, sep, cc, sc := pair(t, client, server)
	ci := endpointInfo(t, client, cep)
	si := endpointInfo(t, server, sep)
	msg := []byte("sent before the close")
	sid, err := client.TagSend(cep, addr(msg), uint64(len(msg)), ci.SendTag, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	cc.wait(sid, 5*time.Second)
	closeID, _ := client.CloseEndpoint(cep, 2*time.Second)
	cc.wait(closeID, 5*time.Second)
	ev := sc.wait(EventEndpointError|sep, 10*time.Second)
	// Let the server engine finish closing the endpoint in UCX.
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, err := server.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if s.Endpoints == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server still holds %d endpoints", s.Endpoints)
		}
		time.Sleep(5 * time.Millisecond)
	}
	out := make([]byte, 64)
	rid, err := server.TagRecv(sep, addr(out), 64, si.RecvTag, ^uint64(0), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c := sc.wait(rid, 5*time.Second); c.Status != 0 || !bytes.Equal(out[:c.Length], msg) {
		t.Fatalf("drain: %+v %q", c, out[:c.Length])
	}
	rid, _ = server.TagRecv(sep, addr(out), 64, si.RecvTag, ^uint64(0), 0, 0)
	if c := sc.wait(rid, 5*time.Second); c.Status != ev.Status {
		t.Fatalf("receive with nothing left: status %d, want the peer's %d", c.Status, ev.Status)
	}
	// Once the application closes it, the handle drains nothing more.
	closeID, _ = server.CloseEndpoint(sep, time.Second)
	sc.wait(closeID, 5*time.Second)
	rid, _ = server.TagRecv(sep, addr(out), 64, si.RecvTag, ^uint64(0), 0, 0)
	if c := sc.wait(rid, 5*time.Second); c.Status != int64(ucxx.StatusCanceled) {
		t.Fatalf("receive after our close: status %d, want Canceled", c.Status)
	}
}

// TestFreeQueueAfterShutdownGaveUp: after a Shutdown that gave up on a progress
// thread still busy, FreeQueue leaves the ring mapped (that thread may still push
// completions into it) and frees it once the thread has exited.
func TestFreeQueueAfterShutdownGaveUp(t *testing.T) {
	e := newTestEngine(t, Options{})
	q := e.Queue()
	release, running := make(chan struct{}), make(chan struct{})
	go e.onThread(func() { close(running); <-release })
	<-running
	if err := e.Shutdown(10 * time.Millisecond); err != ErrShutdownTimeout {
		t.Fatalf("Shutdown behind a busy progress thread: %v, want ErrShutdownTimeout", err)
	}
	e.FreeQueue()
	if _, err := q.Wait(0); errors.Is(err, notifier.ErrClosed) {
		t.Fatal("the ring was freed while the progress thread still ran")
	}
	close(release)
	<-e.done
	for deadline := time.Now().Add(5 * time.Second); ; {
		if _, err := q.Wait(0); errors.Is(err, notifier.ErrClosed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the ring was not freed after the progress thread exited")
		}
		runtime.Gosched()
	}
}
