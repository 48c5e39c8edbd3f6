package core

import (
	"errors"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

func TestFrameCapacityClasses(t *testing.T) {
	for _, tc := range []struct{ n, want uint64 }{
		{0, 1},
		{100, 100},
		{64<<10 - 1, 64<<10 - 1},
		{64 << 10, 64 << 10},
		{64<<10 + 1, 72 << 10},
		{1 << 20, 1 << 20},
		{1<<20 + 1, 1<<20 + 128<<10},
		{10 << 20, 10 << 20},
		{10<<20 + 4096, 11 << 20},
	} {
		got := frameCapacity(tc.n)
		if got != tc.want {
			t.Errorf("frameCapacity(%d) = %d, want %d", tc.n, got, tc.want)
		}
		if got < tc.n || (tc.n >= hostFrameCacheMin && got > tc.n+tc.n/8) {
			t.Errorf("frameCapacity(%d) = %d: not within an eighth above", tc.n, got)
		}
	}
}

// A released frame serves the next get of its size class, and only of its class.
func TestHostFrameCacheReusesBySizeClass(t *testing.T) {
	c := newHostFrameCache(8<<20, time.Hour)
	a := c.get(1 << 20)
	if a == 0 {
		t.Fatal("get: no memory")
	}
	fill(a, 1<<20) // the frame is writable over its whole size
	if err := c.put(a); err != nil {
		t.Fatal(err)
	}
	if b := c.get(1<<20 - 100); b != a { // the same class
		t.Fatalf("get after put: %#x, want the released %#x", b, a)
	}
	other := c.get(2 << 20) // another class: a new frame
	if other == a || other == 0 {
		t.Fatalf("get of another class: %#x", other)
	}
	for _, p := range []uintptr{a, other} {
		if err := c.put(p); err != nil {
			t.Fatal(err)
		}
	}
	s := c.stats()
	if s.hits != 1 || s.misses != 2 || s.kept != 2 || s.lent != 0 || s.bytes != 3<<20 {
		t.Fatalf("stats %+v", s)
	}
	c.freeAll(t)
}

// The cache keeps at most its bound, the oldest frames going first; frames under the
// minimum or over the bound are freed at once.
func TestHostFrameCacheBounded(t *testing.T) {
	c := newHostFrameCache(3<<20, time.Hour)
	var frames []uintptr
	for range 4 {
		frames = append(frames, c.get(1<<20))
	}
	small, huge := c.get(1000), c.get(4<<20)
	for _, p := range append(frames, small, huge) {
		if err := c.put(p); err != nil {
			t.Fatal(err)
		}
	}
	s := c.stats()
	if s.kept != 3 || s.bytes != 3<<20 || s.lent != 0 {
		t.Fatalf("stats %+v, want 3 frames of 1 MiB kept", s)
	}
	want := []uintptr{frames[3], frames[2], frames[1]} // newest first; frames[0] evicted
	for _, w := range want {
		if got := c.get(1 << 20); got != w {
			t.Fatalf("get: %#x, want %#x", got, w)
		}
	}
	for _, w := range want {
		if err := c.put(w); err != nil {
			t.Fatal(err)
		}
	}
	c.freeAll(t)
}

// What was not lent, or was given back already, is refused and not freed.
func TestHostFrameCacheRefusesUnknownFrames(t *testing.T) {
	c := newHostFrameCache(8<<20, time.Hour)
	a := c.get(256 << 10)
	if err := c.put(a); err != nil {
		t.Fatal(err)
	}
	if err := c.put(a); !errors.Is(err, ErrUnknownHostFrame) {
		t.Fatalf("second put: %v, want ErrUnknownHostFrame", err)
	}
	var local [64]byte
	if err := c.put(uintptr(unsafe.Pointer(&local[0]))); !errors.Is(err, ErrUnknownHostFrame) {
		t.Fatalf("put of memory never lent: %v", err)
	}
	if s := c.stats(); s.kept != 1 {
		t.Fatalf("stats %+v: the refused puts changed the cache", s)
	}
	c.freeAll(t)
}

// Frames kept unused for the idle time are freed by the cache's own trim.
func TestHostFrameCacheTrimsIdleFrames(t *testing.T) {
	c := newHostFrameCache(8<<20, 20*time.Millisecond)
	a, b := c.get(1<<20), c.get(1<<20)
	if err := c.put(a); err != nil {
		t.Fatal(err)
	}
	if err := c.put(b); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.stats().kept > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("frames still kept after 10 s: %+v", c.stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.mu.Lock()
	armed := c.armed
	c.mu.Unlock()
	if armed {
		t.Fatal("a trim is still scheduled with nothing kept")
	}
	// Kept again after the trim: the cache arms a new one.
	d := c.get(1 << 20)
	if err := c.put(d); err != nil {
		t.Fatal(err)
	}
	if s := c.stats(); s.kept != 1 {
		t.Fatalf("stats %+v", s)
	}
	c.freeAll(t)
}

// Gets and puts from many goroutines: every frame is lent to one at a time.
func TestHostFrameCacheConcurrent(t *testing.T) {
	c := newHostFrameCache(4<<20, time.Hour)
	done := make(chan error)
	for g := range 8 {
		go func() {
			for i := range 200 {
				n := uint64(64<<10) << (i % 3)
				p := c.get(n)
				mark := []byte{byte(g), byte(i)}
				ucxx.CopyBetween(p, uintptr(unsafe.Pointer(&mark[0])), 2)
				runtime.Gosched()
				back := make([]byte, 2)
				ucxx.CopyFrom(back, p)
				if back[0] != mark[0] || back[1] != mark[1] {
					done <- errors.New("a frame lent to two at once")
					return
				}
				if err := c.put(p); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if s := c.stats(); s.lent != 0 || s.bytes > 4<<20 {
		t.Fatalf("stats %+v", s)
	}
	c.freeAll(t)
}

func TestHostFrameCacheBytesFromEnv(t *testing.T) {
	for s, want := range map[string]uint64{"": 64 << 20, "0": 0, "1048576": 1 << 20, "lots": 64 << 20} {
		if got := hostFrameCacheBytes(s); got != want {
			t.Errorf("hostFrameCacheBytes(%q) = %d, want %d", s, got, want)
		}
	}
	// No cache: frames are freed at once.
	c := newHostFrameCache(0, time.Hour)
	if err := c.put(c.get(1 << 20)); err != nil {
		t.Fatal(err)
	}
	if s := c.stats(); s.kept != 0 || s.hits != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// fill writes every byte of the n at `at`.
func fill(at uintptr, n uint64) {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	ucxx.CopyBetween(at, uintptr(unsafe.Pointer(&b[0])), n)
	runtime.KeepAlive(b)
}

// freeAll frees what a test's cache keeps; every frame must be back.
func (c *hostFrameCache) freeAll(t *testing.T) {
	t.Helper()
	if s := c.stats(); s.lent != 0 {
		t.Errorf("%d frames still lent", s.lent)
	}
	c.mu.Lock()
	kept := c.kept
	c.kept, c.bytes = nil, 0
	c.mu.Unlock()
	for _, f := range kept {
		ucxx.CFreeAddr(f.at)
	}
}

// hostFrameCacheStats is what a cache holds and has done, for tests.
type hostFrameCacheStats struct {
	hits, misses uint64
	kept, lent   int
	bytes        uint64
}

func (c *hostFrameCache) stats() hostFrameCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return hostFrameCacheStats{hits: c.hits, misses: c.misses, kept: len(c.kept), lent: len(c.lent), bytes: c.bytes}
}
