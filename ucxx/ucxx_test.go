package ucxx

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func TestMain(m *testing.M) {
	os.Setenv("UCX_NET_DEVICES", "lo") // UCX's TCP stays on loopback
	os.Exit(m.Run())
}

// newContextWorker makes a context with opts and a worker on it, both closed at the
// test's cleanup (the worker first).
func newContextWorker(tb testing.TB, opts map[string]string) *Worker {
	tb.Helper()
	ctx, err := NewContext(opts, 0)
	if err != nil {
		tb.Fatalf("NewContext(%v): %v", opts, err)
	}
	tb.Cleanup(ctx.Close)
	w, err := ctx.NewWorker(false)
	if err != nil {
		tb.Fatalf("NewWorker: %v", err)
	}
	tb.Cleanup(w.Close)
	return w
}

// newWorker makes a context and worker bound to the calling (locked) thread.
func newWorker(t *testing.T) *Worker {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	w := newContextWorker(t, nil)
	w.AttachEvents()
	return w
}

// progressUntil progresses w until cond holds on its events, failing after timeout.
func progressUntil(t *testing.T, w *Worker, timeout time.Duration, cond func(Event) bool) Event {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		w.Progress()
		for _, ev := range w.Events() {
			if cond(ev) {
				w.ResetEvents()
				return ev
			}
		}
	}
	t.Fatalf("no matching event within %v", timeout)
	return Event{}
}

func TestVersionAndStatus(t *testing.T) {
	if v := Version(); v == "" || v[0] < '1' {
		t.Fatalf("Version() = %q", v)
	}
	if s := StatusConnectionReset.String(); s == "" {
		t.Fatal("no text for UCS_ERR_CONNECTION_RESET")
	}
	err := StatusCanceled.Err("Endpoint.TagRecv")
	if !errors.Is(err, StatusCanceled) || errors.Is(err, StatusTimedOut) {
		t.Fatalf("errors.Is on %v", err)
	}
	if StatusOf(err) != StatusCanceled || StatusOf(nil) != StatusOK || StatusOf(errors.New("x")) != StatusIOError {
		t.Fatal("StatusOf")
	}
	if StatusOK.Err("x") != nil {
		t.Fatal("StatusOK.Err is not nil")
	}
	// ErrClosed is os.ErrClosed too, without its "file already closed": what was
	// closed is an endpoint, a worker, a listener.
	wrapped := fmt.Errorf("core: endpoint closed: %w", ErrClosed)
	if !errors.Is(wrapped, ErrClosed) || !errors.Is(wrapped, os.ErrClosed) || strings.Contains(wrapped.Error(), "file") {
		t.Fatalf("ErrClosed wrapped: %q", wrapped)
	}
}

func TestUnknownOption(t *testing.T) {
	_, err := NewContext(map[string]string{"NO_SUCH_OPTION": "1"}, 0)
	var e *Error
	if !errors.As(err, &e) || e.Status == StatusOK {
		t.Fatalf("NewContext with an unknown option: %v", err)
	}
}

// TestDefaultsGiveWay: a default applies unless the environment or an option names its
// variable; a default this UCX does not know is left out.
func TestDefaultsGiveWay(t *testing.T) {
	t.Setenv("UCX_TCP_RX_SEG_SIZE", "128K")
	defaults := map[string]string{
		"MM_ERROR_HANDLING": "y",    // applies
		"TCP_RX_SEG_SIZE":   "256K", // the environment wins
		"TCP_TX_SEG_SIZE":   "256K", // the option wins
		"NO_SUCH_OPTION":    "1",    // unknown: left out
	}
	ctx, err := NewContextWithDefaults(defaults, map[string]string{"UCX_TCP_TX_SEG_SIZE": "32K"}, 0)
	if err != nil {
		t.Fatalf("NewContextWithDefaults: %v", err)
	}
	defer ctx.Close()
	cfg := ctx.Config() // transport variables only where modified, not from the environment
	for k, want := range map[string]string{"MM_ERROR_HANDLING": "y", "TCP_TX_SEG_SIZE": "32K"} {
		if got := cfg[k]; got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if got := cfg["TCP_RX_SEG_SIZE"]; got == "256K" {
		t.Errorf("TCP_RX_SEG_SIZE = %q: the default overrode the environment", got)
	}
}

func TestBadAddresses(t *testing.T) {
	w := newWorker(t)
	for _, tc := range []struct {
		ip   string
		port int
	}{{"not-an-ip", 1}, {"127.0.0.1", -1}, {"127.0.0.1", 70000}} {
		if _, err := w.Connect(tc.ip, tc.port, 1); !errors.Is(err, StatusInvalidParam) {
			t.Errorf("Connect(%q, %d) = %v; want InvalidParam", tc.ip, tc.port, err)
		}
		if _, err := w.Listen(tc.ip, tc.port, 1); !errors.Is(err, StatusInvalidParam) {
			t.Errorf("Listen(%q, %d) = %v; want InvalidParam", tc.ip, tc.port, err)
		}
	}
	if _, err := w.ConnectAddress(nil, 1); !errors.Is(err, StatusInvalidParam) {
		t.Errorf("ConnectAddress(nil) = %v", err)
	}
}

// TestLoopback drives the raw layer by hand on one worker: listen, connect, accept,
// a tag message each way through the event buffer, endpoint error on close.
func TestLoopback(t *testing.T) {
	w := newWorker(t)
	if fd, err := w.EventFD(); err != nil || fd < 0 {
		t.Fatalf("EventFD = %d, %v", fd, err)
	}
	if addr, err := w.Address(); err != nil || len(addr) == 0 {
		t.Fatalf("Address = %d bytes, %v", len(addr), err)
	}
	l, err := w.Listen("127.0.0.1", 0, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Port <= 0 {
		t.Fatalf("listener port %d", l.Port)
	}
	client, err := w.Connect("127.0.0.1", l.Port, 100)
	if err != nil {
		t.Fatal(err)
	}
	conn := progressUntil(t, w, 5*time.Second, func(ev Event) bool { return ev.Kind == EventConnRequest })
	if conn.ID != 7 {
		t.Fatalf("connection request names listener %d, want 7", conn.ID)
	}
	server, err := w.AcceptEndpoint(conn.Ptr, 200)
	if err != nil {
		t.Fatal(err)
	}

	msg := []byte("hello, ucx")
	out := make([]byte, 32)
	recvReq, st := w.TagRecv(uintptr(unsafe.Pointer(&out[0])), uint64(len(out)), 42, ^uint64(0), MemoryUnknown, 1)
	if st != StatusInProgress {
		t.Fatalf("TagRecv before the send: status %v", st)
	}
	if _, st = client.TagSend(uintptr(unsafe.Pointer(&msg[0])), uint64(len(msg)), 42, MemoryUnknown, 2); st != StatusOK && st != StatusInProgress {
		t.Fatalf("TagSend: %v", st)
	}
	ev := progressUntil(t, w, 5*time.Second, func(ev Event) bool { return ev.Kind == EventCompletion && ev.ID == 1 })
	if ev.Status != StatusOK || ev.Length != uint64(len(msg)) || ev.Tag != 42 || ev.Ptr != recvReq {
		t.Fatalf("recv completion %+v", ev)
	}
	FreeRequest(ev.Ptr)
	if !bytes.Equal(out[:len(msg)], msg) {
		t.Fatalf("received %q", out[:len(msg)])
	}
	if local, remote, err := client.Sockaddrs(); err != nil || local == "" || remote == "" {
		t.Fatalf("Sockaddrs = %q, %q, %v", local, remote, err)
	}

	// Cancelling a receive completes it with StatusCanceled.
	req, _ := w.TagRecv(uintptr(unsafe.Pointer(&out[0])), uint64(len(out)), 43, ^uint64(0), MemoryUnknown, 3)
	w.Cancel(req)
	ev = progressUntil(t, w, 5*time.Second, func(ev Event) bool { return ev.Kind == EventCompletion && ev.ID == 3 })
	if ev.Status != StatusCanceled {
		t.Fatalf("cancelled recv: %v", ev.Status)
	}
	FreeRequest(ev.Ptr)

	// Closing one end reports an error on the other.
	req, st = client.Close(true, 4)
	if st == StatusInProgress {
		ev = progressUntil(t, w, 5*time.Second, func(ev Event) bool { return ev.Kind == EventCompletion && ev.ID == 4 })
		FreeRequest(ev.Ptr)
	}
	ev = progressUntil(t, w, 10*time.Second, func(ev Event) bool { return ev.Kind == EventEpError })
	if ev.ID != 200 || ev.Status == StatusOK {
		t.Fatalf("error event %+v; want endpoint 200 with a failure", ev)
	}
	if req, st = server.Close(true, 5); st == StatusInProgress {
		ev = progressUntil(t, w, 5*time.Second, func(ev Event) bool { return ev.Kind == EventCompletion && ev.ID == 5 })
		FreeRequest(ev.Ptr)
	}
	_ = req
}

// modePair is two workers with their own contexts made with UCX options opts (as two
// processes would have), and a client endpoint with error handling mode to the
// server, through a listener or by worker address. The test's locked thread
// progresses both; their events land in the client's buffer.
type modePair struct {
	t              *testing.T
	client, server *Worker
	cep, sep       *Endpoint
	pending        []Event
}

// newModePair connects the pair; it returns the error of the client's endpoint
// creation, or of the connection (an EventEpError before the connection request).
func newModePair(t *testing.T, opts map[string]string, mode ErrHandling, byAddress bool) (*modePair, error) {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread) // registered first, runs last
	p := &modePair{t: t}
	p.client = newContextWorker(t, opts) // its event buffer serves both: it must go last
	p.client.AttachEvents()
	p.server = newContextWorker(t, opts)
	t.Cleanup(p.close) // endpoints close before the workers
	var err error
	if byAddress {
		addr, aerr := p.server.Address()
		if aerr != nil {
			t.Fatal(aerr)
		}
		p.cep, err = p.client.ConnectAddressWith(addr, 100, mode)
		return p, err
	}
	l, err := p.server.Listen("127.0.0.1", 0, 7)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	if p.cep, err = p.client.ConnectWith("127.0.0.1", l.Port, 100, mode); err != nil {
		return p, err
	}
	ev := p.await(func(ev Event) bool { return ev.Kind == EventConnRequest || ev.Kind == EventEpError })
	if ev.Kind == EventEpError {
		return p, ev.Status.Err("connect")
	}
	p.sep, err = p.server.AcceptEndpointWith(ev.Ptr, 200, mode)
	return p, err
}

// await progresses both workers until an event matches, for up to 5 s; events
// drained and not matched wait in pending for a later await.
func (p *modePair) await(match func(Event) bool) Event {
	p.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.pending = append(p.pending, p.client.Events()...)
		p.client.ResetEvents()
		if i := slices.IndexFunc(p.pending, match); i >= 0 {
			ev := p.pending[i]
			p.pending = slices.Delete(p.pending, i, i+1)
			return ev
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no matching event within 5 s; pending %+v", p.pending)
		}
		p.client.Progress()
		p.server.Progress()
	}
}

// send moves size bytes from client to server, tag-matched on the server's worker,
// and returns how long it took.
func (p *modePair) send(size int) time.Duration {
	p.t.Helper()
	msg, in := CMalloc(uint64(size)), CMalloc(uint64(size))
	defer CFree(msg)
	defer CFree(in)
	start := time.Now()
	p.server.TagRecv(uintptr(in), uint64(size), 9, ^uint64(0), MemoryUnknown, 1)
	if _, st := p.cep.TagSend(uintptr(msg), uint64(size), 9, MemoryUnknown, 2); st != StatusOK && st != StatusInProgress {
		p.t.Fatalf("TagSend: %v", st)
	}
	done := 0
	for done < 2 {
		ev := p.await(func(ev Event) bool {
			return ev.Kind == EventCompletion && (ev.ID == 1 || ev.ID == 2) || ev.Kind == EventEpError
		})
		if ev.Kind == EventEpError || ev.Status != StatusOK {
			p.t.Fatalf("transfer of %d bytes: %+v", size, ev)
		}
		FreeRequest(ev.Ptr)
		done++
	}
	return time.Since(start)
}

func (p *modePair) close() {
	for i, ep := range []*Endpoint{p.cep, p.sep} {
		if ep == nil {
			continue
		}
		id := uint64(1000 + i)
		if _, st := ep.Close(true, id); st == StatusInProgress {
			ev := p.await(func(ev Event) bool { return ev.Kind == EventCompletion && ev.ID == id })
			FreeRequest(ev.Ptr)
		}
	}
	p.pending = append(p.pending, p.client.Events()...)
	p.client.ResetEvents()
	for _, ev := range p.pending {
		if ev.Kind == EventCompletion {
			FreeRequest(ev.Ptr)
		}
	}
	p.pending = nil
}

// TestErrHandlingModes: which transports UCX picks, and whether it connects at all,
// with and without error handling. Posix, sysv and self have no peer failure handler
// and cma no active-message lane, so error handling rules out shared memory; a
// listener connection needs tcp enabled for UCX's connection manager (its device).
func TestErrHandlingModes(t *testing.T) {
	if ErrHandling(0) != ErrHandlingPeer || ErrHandlingPeer.String() != "peer" || ErrHandlingNone.String() != "none" {
		t.Fatal("ErrHandling's zero value must be peer error handling")
	}
	isShm := func(tr Transport) bool { return slices.Contains([]string{"posix", "sysv", "cma"}, tr.Name) }
	isTCPData := func(tr Transport) bool { return tr.Name == "tcp" && tr.Device != "" }
	for _, tc := range []struct {
		name      string
		tls       string
		mode      ErrHandling
		byAddress bool
		fail      Status // the connection's failure, or StatusOK
		shm       bool   // shared memory carries the data (else TCP)
	}{
		{"sm-address-peer", "sm,self", ErrHandlingPeer, true, StatusUnreachable, false},
		{"sm-address-none", "sm,self", ErrHandlingNone, true, StatusOK, true},
		{"sm-listener-peer", "sm,self", ErrHandlingPeer, false, StatusUnreachable, false},
		{"smtcp-listener-peer", "sm,self,tcp", ErrHandlingPeer, false, StatusOK, false},
		{"smtcp-listener-none", "sm,self,tcp", ErrHandlingNone, false, StatusOK, true},
		{"smtcp-address-none", "sm,self,tcp", ErrHandlingNone, true, StatusOK, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newModePair(t, map[string]string{"TLS": tc.tls}, tc.mode, tc.byAddress)
			if tc.fail != StatusOK {
				if !errors.Is(err, tc.fail) {
					t.Fatalf("connection: %v; want %v", err, tc.fail)
				}
				return
			}
			if err != nil {
				t.Fatalf("connection: %v", err)
			}
			if p.cep.ErrHandling() != tc.mode || (p.sep != nil && p.sep.ErrHandling() != tc.mode) {
				t.Fatalf("endpoints report modes %v, %v; want %v", p.cep.ErrHandling(), p.sep, tc.mode)
			}
			p.send(8)
			p.send(1 << 20)
			var total time.Duration
			const n = 10
			for range n {
				total += p.send(1 << 20)
			}
			for _, ep := range []*Endpoint{p.cep, p.sep} {
				if ep == nil {
					continue
				}
				ts, err := ep.Transports()
				if err != nil {
					t.Fatalf("Transports: %v", err)
				}
				t.Logf("transports %v; 1 MiB one way in %v (mean of %d)", ts, (total / n).Round(time.Microsecond), n)
				if shm := slices.ContainsFunc(ts, isShm); shm != tc.shm || shm == slices.ContainsFunc(ts, isTCPData) {
					t.Fatalf("transports %v; want shared memory %v and TCP data lanes %v", ts, tc.shm, !tc.shm)
				}
			}
		})
	}
}
