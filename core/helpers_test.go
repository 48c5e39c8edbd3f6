package core

import (
	"os"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/notifier"
)

func TestMain(m *testing.M) {
	// Keep UCX's TCP on loopback, whatever interfaces the machine has.
	os.Setenv("UCX_NET_DEVICES", "lo")
	os.Exit(m.Run())
}

// newTestEngine starts an engine that the test shuts down.
func newTestEngine(t testing.TB, opts Options) *Engine {
	t.Helper()
	e, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Shutdown(5 * time.Second); err != nil && err != ErrEngineClosed {
			t.Errorf("Shutdown: %v", err)
		}
		e.FreeQueue()
	})
	return e
}

// collector reads an engine's queue the way the Python consumer does, with a deadline.
type collector struct {
	t   testing.TB
	q   *notifier.Queue
	got map[uint64]notifier.Completion
	buf [256]notifier.Completion
}

func newCollector(t testing.TB, e *Engine) *collector {
	return &collector{t: t, q: e.Queue(), got: make(map[uint64]notifier.Completion)}
}

// wait returns the completion of id, failing the test after timeout.
func (c *collector) wait(id uint64, timeout time.Duration) notifier.Completion {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if comp, ok := c.got[id]; ok {
			delete(c.got, id)
			return comp
		}
		n := c.q.Pop(c.buf[:])
		for _, comp := range c.buf[:n] {
			c.got[comp.ID] = comp
		}
		if n > 0 {
			continue
		}
		left := time.Until(deadline)
		if left <= 0 {
			c.t.Fatalf("no completion for request %#x within %v", id, timeout)
		}
		c.q.Wait(min(left, 100*time.Millisecond))
	}
}

// pair connects two engines through a listener on loopback and returns the endpoint
// handles of client and server.
func pair(t testing.TB, client, server *Engine) (cep, sep uint64, cc, sc *collector) {
	t.Helper()
	lh, port, err := server.Listen("127.0.0.1", 0)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	if port <= 0 {
		t.Fatalf("Listen: port %d", port)
	}
	cc, sc = newCollector(t, client), newCollector(t, server)
	id, err := client.Connect("127.0.0.1", port, 5*time.Second)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	comp := cc.wait(id, 10*time.Second)
	if comp.Status != 0 {
		t.Fatalf("Connect completed with status %d", comp.Status)
	}
	acc := sc.wait(EventListenerAccept|lh, 10*time.Second)
	return comp.Length, acc.Length, cc, sc
}

// addr lends b to UCX for an operation that outlives the call. b must live in the heap:
// Go 1.25+ may put a small make([]byte, n) on the goroutine's stack, which moves when
// the stack grows, and UCX would then write into the old copy. Storing b where the
// heap can see it makes every caller's buffer escape (TestSharedMemoryOnlyTLS's 8-byte
// receive got the old stack's bytes after an unrelated change moved its frame).
func addr(b []byte) uintptr {
	lent.Store(&b)
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))
}

var lent atomic.Pointer[[]byte]
