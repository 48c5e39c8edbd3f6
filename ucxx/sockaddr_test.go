package ucxx

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
	"time"
	"unsafe"
)

// exchange connects w to itself through a listener on listenIP, connecting to
// connectIP, and moves one message from the accepted endpoint to the client's worker.
func exchange(t *testing.T, w *Worker, listenIP, connectIP string) {
	t.Helper()
	l, err := w.Listen(listenIP, 0, 7)
	if err != nil {
		t.Fatalf("Listen(%q): %v", listenIP, err)
	}
	defer l.Close()
	client, err := w.Connect(connectIP, l.Port, 100)
	if err != nil {
		t.Fatalf("Connect(%q): %v", connectIP, err)
	}
	conn := progressUntil(t, w, 10*time.Second, func(ev Event) bool { return ev.Kind == EventConnRequest })
	server, err := w.AcceptEndpoint(conn.Ptr, 200)
	if err != nil {
		t.Fatalf("AcceptEndpoint: %v", err)
	}
	msg := bytes.Repeat([]byte("v6"), 50_000) // rendezvous-sized: the transport lanes carry it
	out := make([]byte, len(msg))
	if _, st := w.TagRecv(uintptr(unsafe.Pointer(&out[0])), uint64(len(out)), 9, ^uint64(0), MemoryUnknown, 1); st != StatusInProgress {
		t.Fatalf("TagRecv: %v", st)
	}
	if _, st := server.TagSend(uintptr(unsafe.Pointer(&msg[0])), uint64(len(msg)), 9, MemoryUnknown, 2); st != StatusOK && st != StatusInProgress {
		t.Fatalf("TagSend: %v", st)
	}
	ev := progressUntil(t, w, 10*time.Second, func(ev Event) bool { return ev.Kind == EventCompletion && ev.ID == 1 })
	FreeRequest(ev.Ptr)
	if ev.Status != StatusOK || !bytes.Equal(out, msg) {
		t.Fatalf("%s -> %s: status %v, data equal %v", listenIP, connectIP, ev.Status, bytes.Equal(out, msg))
	}
	runtime.KeepAlive(msg)
	for i, ep := range []*Endpoint{client, server} {
		if _, st := ep.Close(true, uint64(10+i)); st == StatusInProgress {
			progressUntil(t, w, 5*time.Second, func(ev Event) bool { return ev.Kind == EventCompletion && ev.ID == uint64(10+i) })
		}
	}
}

// Listeners and connections of either address family work once the TCP transport uses
// that family, and the other family is refused before UCX sees it (UCX 1.22 corrupts
// its heap accepting an IPv6 connection on IPv4 TCP interfaces).
func TestAddressFamilies(t *testing.T) {
	for _, c := range []struct {
		prio           string
		works, refused [][2]string // listen, connect
	}{
		{"", [][2]string{{"127.0.0.1", "127.0.0.1"}, {"0.0.0.0", "127.0.0.1"}, {"", "127.0.0.1"}},
			[][2]string{{"::1", "::1"}, {"::", "::1"}}},
		{"inet6", [][2]string{{"::1", "::1"}, {"::", "::1"}, {"", "::1"}},
			[][2]string{{"127.0.0.1", "127.0.0.1"}, {"0.0.0.0", "127.0.0.1"}}},
	} {
		t.Run("af_prio="+c.prio, func(t *testing.T) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			opts := map[string]string{}
			if c.prio != "" {
				opts["TCP_AF_PRIO"] = c.prio
			}
			w := newContextWorker(t, opts)
			w.AttachEvents()
			for _, p := range c.works {
				exchange(t, w, p[0], p[1])
			}
			for _, p := range c.refused {
				if _, err := w.Listen(p[0], 0, 1); !errors.Is(err, ErrAddressFamily) || StatusOf(err) != StatusUnsupported {
					t.Errorf("Listen(%q) = %v; want ErrAddressFamily", p[0], err)
				}
				if _, err := w.Connect(p[1], 1, 1); !errors.Is(err, ErrAddressFamily) {
					t.Errorf("Connect(%q) = %v; want ErrAddressFamily", p[1], err)
				}
			}
		})
	}
}
