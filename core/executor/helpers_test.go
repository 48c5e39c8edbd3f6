package executor

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/core/plan"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// memNet connects in-process ranks: ordered mailboxes per (source, destination,
// tag), as a communicator's tagged messages are.
type memNet struct {
	mu    sync.Mutex
	boxes map[[3]int]chan []byte
}

func (n *memNet) box(src, dst int, tag uint16) chan []byte {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := [3]int{src, dst, int(tag)}
	if n.boxes[k] == nil {
		n.boxes[k] = make(chan []byte, 64)
	}
	return n.boxes[k]
}

type memWorld struct {
	rank, size int
	net        *memNet
}

func (w *memWorld) Rank() int { return w.rank }
func (w *memWorld) Size() int { return w.size }

func (w *memWorld) Send(dst int, tag uint16, b []byte) error {
	w.net.box(w.rank, dst, tag) <- append([]byte(nil), b...)
	return nil
}

func (w *memWorld) Recv(src int, tag uint16, b []byte) (int, error) {
	select {
	case m := <-w.net.box(src, w.rank, tag):
		if len(m) > len(b) {
			return 0, fmt.Errorf("a %d-byte message for a %d-byte buffer", len(m), len(b))
		}
		return copy(b, m), nil
	case <-time.After(10 * time.Second):
		return 0, fmt.Errorf("no message from rank %d tag %#x: %w", src, tag, ErrTimeout)
	}
}

// newWorld makes n in-process ranks, each with an executor.
func newWorld(t *testing.T, n int, opts Options) []*Executor {
	t.Helper()
	net := &memNet{boxes: make(map[[3]int]chan []byte)}
	xs := make([]*Executor, n)
	for r := range n {
		xs[r] = New(&memWorld{rank: r, size: n, net: net}, opts)
	}
	t.Cleanup(func() {
		for _, x := range xs {
			x.Close()
		}
	})
	return xs
}

// onAll runs f on every rank at once and returns each rank's error.
func onAll(xs []*Executor, f func(r int, x *Executor) error) []error {
	errs := make([]error, len(xs))
	var wg sync.WaitGroup
	for r, x := range xs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(r, x)
		}()
	}
	wg.Wait()
	return errs
}

func loadFixture(t *testing.T, name string) *plan.Plan {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "plan", "testdata", "mscclpp-v0.9.0", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := plan.Load(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p
}

func addr(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&b[0]))
}

func f32s(b []byte) []float32 { return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4) }

// segmentsLeft counts this process's segment files in /dev/shm.
func segmentsLeft(t *testing.T) int {
	t.Helper()
	m, err := filepath.Glob(fmt.Sprintf("%s/%s%d-*", shmDir, shmPrefix, os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// cbytes returns n bytes of C memory (never freed: tests only). Buffers the executor
// writes from other threads must not be Go memory a goroutine stack could hold.
func cbytes(n int) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(ucxx.CMalloc(uint64(n))), n)
}
