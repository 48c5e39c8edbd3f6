package core

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Stream waits against releases, without a GPU: checkedPages stands in for CUDA's side
// of counter pages (a stream "waits" by reading the counter when asked whether it
// passed) and records every use of a page that is freed, or unmapped under a stream
// still waiting. The real pages are real C memory: UCX registers them.

type checkedPages struct {
	mu         sync.Mutex
	live       map[unsafe.Pointer]bool
	mapped     map[unsafe.Pointer]bool
	byDev      map[uintptr]unsafe.Pointer
	markers    []*checkedMarker
	hold       bool // streams are stuck behind other work: no marker passes
	maps       int
	violations []string
}

func newCheckedPages() *checkedPages {
	return &checkedPages{live: map[unsafe.Pointer]bool{}, mapped: map[unsafe.Pointer]bool{}, byDev: map[uintptr]unsafe.Pointer{}}
}

func (c *checkedPages) violate(format string, args ...any) {
	c.violations = append(c.violations, fmt.Sprintf(format, args...))
}

func (c *checkedPages) alloc() unsafe.Pointer {
	p := ucxx.CAllocPage(semaphoreMemory)
	c.mu.Lock()
	c.live[p] = true
	c.mu.Unlock()
	return p
}

func (c *checkedPages) free(p unsafe.Pointer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live[p] {
		c.violate("free of a page not live: %p", p)
	}
	if c.mapped[p] {
		c.violate("free of a page still mapped for devices: %p", p)
	}
	for _, m := range c.markers {
		if m.page == p && !m.destroyed {
			c.violate("free of a page with a marker not destroyed: %p", p)
		}
	}
	delete(c.live, p)
	ucxx.CFree(p)
}

func (c *checkedPages) mapForDevices(p unsafe.Pointer) (uintptr, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.maps++
	if !c.live[p] {
		c.violate("map of a freed page: %p", p)
	}
	c.mapped[p] = true
	dev := uintptr(p) ^ 1<<44
	c.byDev[dev] = p
	return dev, nil
}

func (c *checkedPages) unmapForDevices(p unsafe.Pointer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.mapped[p] {
		c.violate("unmap of a page not mapped: %p", p)
	}
	for _, m := range c.markers {
		if m.page == p && !m.destroyed && !c.reached(m) {
			c.violate("unmap of a page a stream still waits on: %p", p)
		}
	}
	delete(c.mapped, p)
	return nil
}

func (c *checkedPages) waitOnStream(stream, dev uintptr, value uint64) (streamMarker, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.byDev[dev]
	if !c.live[p] || !c.mapped[p] {
		c.violate("stream wait on a page freed or unmapped: %p", p)
	}
	m := &checkedMarker{pages: c, page: p, value: value}
	c.markers = append(c.markers, m)
	return m, nil
}

// reached is what the device would see: the counter at the marker's value, compared
// cyclically as cuStreamWaitValue64's GEQ does. c.mu held.
func (c *checkedPages) reached(m *checkedMarker) bool {
	if !c.live[m.page] {
		c.violate("a waiting stream read a freed page: %p", m.page)
		return true
	}
	return int64(atomic.LoadUint64((*uint64)(m.page))-m.value) >= 0
}

func (c *checkedPages) state() (live int, violations []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.live), append([]string(nil), c.violations...)
}

type checkedMarker struct {
	pages     *checkedPages
	page      unsafe.Pointer
	value     uint64
	destroyed bool
}

func (m *checkedMarker) passed() bool {
	m.pages.mu.Lock()
	defer m.pages.mu.Unlock()
	return !m.pages.hold && m.pages.reached(m)
}

func (m *checkedMarker) destroy() {
	m.pages.mu.Lock()
	m.destroyed = true
	m.pages.mu.Unlock()
}

// withCheckedPages makes e's new semaphores use checked pages.
func withCheckedPages(t *testing.T, e *Engine) *checkedPages {
	t.Helper()
	c := newCheckedPages()
	if err := e.onThread(func() { e.rma.counters = c }); err != nil {
		t.Fatal(err)
	}
	return c
}

func checkPages(t *testing.T, c *checkedPages, wantLive int) {
	t.Helper()
	live, violations := c.state()
	for _, v := range violations {
		t.Error(v)
	}
	if live != wantLive {
		t.Errorf("%d counter pages live, want %d", live, wantLive)
	}
}

// TestSemaphoreReleaseRacesStreamWait: a stream wait and a release of one semaphore,
// concurrently, many times: the wait either queues on a live, mapped page or fails
// with ErrNoSemaphore; no page is used after it is freed; every page is freed.
func TestSemaphoreReleaseRacesStreamWait(t *testing.T) {
	p := newRMAPair(t)
	pages := withCheckedPages(t, p.server)
	var queued, refused int
	for i := range 300 {
		sem, err := p.server.NewSemaphore(p.sep)
		if err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		var waitErr, releaseErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			waitErr = p.server.WaitSemaphoreOnStream(sem, 1, uintptr(i%3+1))
		}()
		go func() {
			defer wg.Done()
			<-start
			releaseErr = p.server.ReleaseSemaphore(sem)
		}()
		close(start)
		wg.Wait()
		if releaseErr != nil {
			t.Fatalf("release: %v", releaseErr)
		}
		switch {
		case waitErr == nil:
			queued++
		case errors.Is(waitErr, ErrNoSemaphore) && errors.Is(waitErr, ucxx.StatusNoElem):
			refused++
		default:
			t.Fatalf("stream wait racing a release: %v", waitErr)
		}
	}
	t.Logf("%d waits queued before the release, %d refused after it", queued, refused)
	checkPages(t, pages, 0)
}

// TestSemaphoreStreamWaitOrders: a stream wait after the release is refused and maps
// nothing; a stream waiting at the release is let through (the counter meets every
// wait) and its page is freed once the stream passed, not before.
func TestSemaphoreStreamWaitOrders(t *testing.T) {
	p := newRMAPair(t)
	pages := withCheckedPages(t, p.server)

	t.Run("release-then-wait", func(t *testing.T) {
		sem, _ := p.server.NewSemaphore(p.sep)
		if err := p.server.ReleaseSemaphore(sem); err != nil {
			t.Fatal(err)
		}
		err := p.server.WaitSemaphoreOnStream(sem, 1, 1)
		if !errors.Is(err, ErrNoSemaphore) || !errors.Is(err, ucxx.StatusNoElem) || ucxx.StatusOf(err) != ucxx.StatusNoElem {
			t.Fatalf("stream wait on a released semaphore: %v", err)
		}
		if pages.maps != 0 {
			t.Fatalf("%d maps for a released semaphore", pages.maps)
		}
		checkPages(t, pages, 0)
	})

	t.Run("wait-then-release", func(t *testing.T) {
		sem, _ := p.server.NewSemaphore(p.sep)
		if err := p.server.WaitSemaphoreOnStream(sem, 5, 1); err != nil {
			t.Fatal(err)
		}
		if err := p.server.WaitSemaphoreOnStream(sem, 7, 2); err != nil {
			t.Fatal(err)
		}
		if err := p.server.ReleaseSemaphore(sem); err != nil {
			t.Fatal(err)
		}
		checkPages(t, pages, 0) // both streams saw the released counter and passed
	})

	t.Run("stream-stuck-at-release", func(t *testing.T) {
		sem, _ := p.server.NewSemaphore(p.sep)
		if err := p.server.WaitSemaphoreOnStream(sem, 5, 1); err != nil {
			t.Fatal(err)
		}
		pages.mu.Lock()
		pages.hold = true
		page := pages.markers[len(pages.markers)-1].page
		pages.mu.Unlock()
		if err := p.server.ReleaseSemaphore(sem); err != nil {
			t.Fatal(err)
		}
		checkPages(t, pages, 1) // kept for the stream
		if v := atomic.LoadUint64((*uint64)(page)); v != released(0) {
			t.Fatalf("a released counter holds %d", v)
		}
		pages.mu.Lock()
		pages.hold = false
		pages.mu.Unlock()
		// The next release sweeps the pages that waited.
		other, _ := p.server.NewSemaphore(p.sep)
		if err := p.server.ReleaseSemaphore(other); err != nil {
			t.Fatal(err)
		}
		checkPages(t, pages, 0)
	})
}

// TestReleasedMeetsEveryWait: the released value meets, in the device's cyclic
// comparison, a wait for any value up to 2^62 ahead of the counter or behind it, also
// across the wrap of the word.
func TestReleasedMeetsEveryWait(t *testing.T) {
	for _, v := range []uint64{0, 1, 5, 1 << 40, 1<<63 - 3, ^uint64(0) - 2} {
		for _, d := range []uint64{0, 1, 1000, 1<<62 - 1} {
			for _, w := range []uint64{v + d, v - d} {
				if int64(released(v)-w) < 0 {
					t.Errorf("counter %d released to %d does not meet a wait for %d", v, released(v), w)
				}
			}
		}
	}
}
