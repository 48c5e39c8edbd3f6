package ucxx

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"testing"
	"time"
	"unsafe"
)

func TestMain(m *testing.M) {
	os.Setenv("UCX_NET_DEVICES", "lo") // UCX's TCP stays on loopback
	os.Exit(m.Run())
}

// newWorker makes a context and worker bound to the calling (locked) thread.
func newWorker(t *testing.T) *Worker {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	ctx, err := NewContext(nil)
	if err != nil {
		t.Fatalf("NewContext: %v", err)
	}
	t.Cleanup(ctx.Close)
	w, err := ctx.NewWorker(false)
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	t.Cleanup(w.Close)
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
}

func TestUnknownOption(t *testing.T) {
	_, err := NewContext(map[string]string{"NO_SUCH_OPTION": "1"})
	var e *Error
	if !errors.As(err, &e) || e.Status == StatusOK {
		t.Fatalf("NewContext with an unknown option: %v", err)
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
