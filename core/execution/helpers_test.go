package execution

import (
	"os"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/core"
	"github.com/ucxx-go/ucxx-go/notifier"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

func TestMain(m *testing.M) {
	os.Setenv("UCX_NET_DEVICES", "lo") // UCX's TCP on loopback only
	os.Exit(m.Run())
}

// newContext makes a context that the test closes, checking it leaks nothing.
func newContext(t *testing.T, opts Options) *Context {
	t.Helper()
	c, err := New(opts)
	if err != nil {
		t.Fatalf("execution.New: %v", err)
	}
	t.Cleanup(func() {
		c.Close()
		if r := c.Resources(); r != (Resources{}) {
			t.Errorf("a closed context still holds %+v", r)
		}
	})
	return c
}

// queueWait reads e's completion queue until the completion of id.
func queueWait(t *testing.T, e *core.Engine, id uint64) notifier.Completion {
	t.Helper()
	var buf [64]notifier.Completion
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		n := e.Queue().Pop(buf[:])
		for _, c := range buf[:n] {
			if c.ID == id {
				return c
			}
		}
		if n == 0 {
			e.Queue().Wait(50 * time.Millisecond)
		}
	}
	t.Fatalf("no completion for %#x", id)
	return notifier.Completion{}
}

// enginePair starts two engines with one-sided transfers on, connected over loopback;
// the test shuts them down.
func enginePair(t *testing.T) (client, server *core.Engine, cep, sep uint64) {
	t.Helper()
	start := func() *core.Engine {
		e, err := core.New(core.Options{OneSided: true})
		if err != nil {
			t.Fatalf("core.New: %v", err)
		}
		t.Cleanup(func() { e.Shutdown(5 * time.Second); e.FreeQueue() })
		return e
	}
	client, server = start(), start()
	lh, port, err := server.Listen("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	id, err := client.Connect("127.0.0.1", port, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := queueWait(t, client, id)
	if c.Status != 0 {
		t.Fatalf("Connect: %v", ucxx.Status(c.Status))
	}
	return client, server, c.Length, queueWait(t, server, core.EventListenerAccept|lh).Length
}

// addr is b's address for the engine and the DAG's workers, and keeps b referenced
// for the rest of the test binary (lend). An address is no reference: the garbage
// collector may free a buffer whose only user is a vertex or a UCX request in flight,
// and a small make([]byte, n) that does not escape lives on the goroutine's stack,
// which moves when the stack grows. Keeping b in a global makes it escape and live.
func addr(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	lend(b)
	return uintptr(unsafe.Pointer(&b[0]))
}

// f64addr is addr for float64 elements.
func f64addr(b []float64) uintptr {
	lend(b)
	return uintptr(unsafe.Pointer(&b[0]))
}

// lent holds every buffer addr and f64addr gave out, until the test binary exits:
// tests may end with operations still in flight on their buffers (a cancelled receive,
// a reduction a failed test never awaited).
var lent struct {
	sync.Mutex
	bufs []any
}

func lend(b any) {
	lent.Lock()
	lent.bufs = append(lent.bufs, b)
	lent.Unlock()
}
