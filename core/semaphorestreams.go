package core

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Stream waits on semaphores: the device side of a semaphore. A CUDA stream waits on
// the device for a counter to reach a value (cuStreamWaitValue64 on the counter's page,
// pinned and mapped for devices at the first such wait), so the host never blocks.
//
// Application threads queue stream waits while the progress thread may release the
// semaphore, so its device side is a small state machine under devMu, closed by the
// release as Go's internal/poll closes an FD: a wait that comes after the release gets
// ErrNoSemaphore and touches nothing; a stream already waiting is let through, since
// the release moves the counter past every wait (released); and the page stays
// registered with UCX, pinned and allocated until every stream that waited on it
// passed its wait (a marker queued after each wait says so), never freed or unmapped
// under a device that may still read it.

// released is the counter value that lets every stream wait on a counter at v through.
// The device compares cyclically, (int64)(counter - value) >= 0 (cuStreamWaitValue64's
// GEQ), so all ones would not do: v + 2^62 meets every wait for a value less than 2^62
// ahead of v or behind it.
func released(v uint64) uint64 { return v + 1<<62 }

// counterPages makes and frees the pages of semaphore counters and does what stream
// waits need of CUDA. cudaCounterPages is the real one; tests substitute one that
// checks every use is of a live page.
type counterPages interface {
	// alloc returns a zeroed page for a counter, or nil.
	alloc() unsafe.Pointer
	// free frees a page from alloc; it is no longer mapped for devices.
	free(page unsafe.Pointer)
	// mapForDevices pins page and returns where devices see it.
	mapForDevices(page unsafe.Pointer) (dev uintptr, err error)
	// unmapForDevices undoes mapForDevices.
	unmapForDevices(page unsafe.Pointer) error
	// waitOnStream queues on stream a wait until the word at device address dev is at
	// least value, then a marker that passes once the stream is past the wait. A wait
	// that was queued comes with a marker, even with an error.
	waitOnStream(stream uintptr, dev uintptr, value uint64) (streamMarker, error)
}

// streamMarker is a point queued on a stream.
type streamMarker interface {
	// passed reports whether the stream reached the marker (an error counts as
	// passed: a failed stream no longer runs).
	passed() bool
	// destroy releases the marker; it may be called before it passed.
	destroy()
}

// WaitSemaphoreOnStream queues on a CUDA stream a wait, on the device, until semaphore
// id's counter reaches value; the caller does not wait. The stream's context must be
// current on the calling thread (it is on a thread that uses the stream through the
// CUDA runtime). The counter is mapped for devices at the first such wait.
//
// Releasing the semaphore lets a stream that waits on it through, as if it had been
// signalled: release it only once the streams that wait on it have passed, or what
// they go on to read may not have arrived. Its page stays allocated until they have.
//
// Errors: ErrEngineClosed, ErrNoSemaphore (also when a release wins a race with this
// call), ucxx.ErrNoCUDA, a *ucxx.CUDAError (CUDA_ERROR_NOT_SUPPORTED where the driver
// lacks stream memory operations).
func (e *Engine) WaitSemaphoreOnStream(id uint64, value uint64, stream uintptr) error {
	var s *localSemaphore
	if err := e.onThread(func() { s = e.rma.sems[id] }); err != nil {
		return err
	}
	if s == nil {
		return fmt.Errorf("WaitSemaphoreOnStream: %w", ErrNoSemaphore)
	}
	return s.waitOnStream(value, stream)
}

// waitOnStream queues a stream wait on s's counter, unless s was released.
// Application thread.
func (s *localSemaphore) waitOnStream(value uint64, stream uintptr) error {
	s.devMu.Lock()
	defer s.devMu.Unlock()
	if s.closed {
		return fmt.Errorf("WaitSemaphoreOnStream: %w", ErrNoSemaphore)
	}
	if s.dev == 0 {
		dev, err := s.pages.mapForDevices(s.counter)
		if err != nil {
			return err
		}
		s.dev = dev
	}
	m, err := s.pages.waitOnStream(stream, s.dev, value)
	if m != nil {
		if s.passed == nil {
			s.passed = make(map[uintptr]streamMarker)
		}
		if old := s.passed[stream]; old != nil {
			old.destroy() // the new marker is later on the same stream
		}
		s.passed[stream] = m
	}
	return err
}

// retire closes s's device side and, once no stream may still read the counter, has
// UCX forget its page and frees it, reporting whether it did; otherwise sweepRetiring
// tries again later. Progress thread.
func (s *localSemaphore) retire() bool {
	s.devMu.Lock()
	defer s.devMu.Unlock()
	if !s.closed {
		s.closed = true
		if s.dev != 0 {
			c := (*uint64)(s.counter)
			atomic.StoreUint64(c, released(atomic.LoadUint64(c)))
		}
	}
	for stream, m := range s.passed {
		if !m.passed() {
			return false
		}
		m.destroy()
		delete(s.passed, stream)
	}
	s.mh.Unmap()
	if s.dev != 0 {
		if s.pages.unmapForDevices(s.counter) != nil {
			return true // still pinned for devices: the page stays allocated, forgotten
		}
		s.dev = 0
	}
	s.pages.free(s.counter)
	s.counter = nil
	return true
}

// abandon has UCX forget the page of a semaphore whose streams have not passed at
// shutdown; the page stays pinned and allocated. Progress thread.
func (s *localSemaphore) abandon() { s.mh.Unmap() }

// sweepRetiring frees the pages of released semaphores whose streams have passed.
// Progress thread: each release, and shutdown.
func (o *oneSided) sweepRetiring() {
	kept := o.retiring[:0]
	for _, s := range o.retiring {
		if !s.retire() {
			kept = append(kept, s)
		}
	}
	clear(o.retiring[len(kept):])
	o.retiring = kept
}

// cudaCounterPages is counterPages over C pages and the CUDA driver.
type cudaCounterPages struct{}

func (cudaCounterPages) alloc() unsafe.Pointer    { return ucxx.CAllocPage(semaphoreMemory) }
func (cudaCounterPages) free(page unsafe.Pointer) { ucxx.CFree(page) }

func (cudaCounterPages) mapForDevices(page unsafe.Pointer) (uintptr, error) {
	d, err := ucxx.CUDA()
	if err != nil {
		return 0, err
	}
	return d.MapHost(uintptr(page), semaphoreMemory)
}

func (cudaCounterPages) unmapForDevices(page unsafe.Pointer) error {
	d, err := ucxx.CUDA()
	if err != nil {
		return err
	}
	return d.UnmapHost(uintptr(page))
}

func (cudaCounterPages) waitOnStream(stream uintptr, dev uintptr, value uint64) (streamMarker, error) {
	d, err := ucxx.CUDA()
	if err != nil {
		return nil, err
	}
	if err := d.StreamWaitAtLeast(stream, dev, value); err != nil {
		return nil, err
	}
	ev, err := d.RecordEvent(stream)
	if err != nil {
		// The wait is queued and nothing will say when the stream passed it: the
		// page must stay.
		return neverPassed{}, err
	}
	return cudaMarker{ev}, nil
}

// cudaMarker is a CUDA event as a streamMarker.
type cudaMarker struct{ ev ucxx.CUDAEvent }

func (m cudaMarker) passed() bool {
	done, err := m.ev.Done()
	return done || err != nil
}

func (m cudaMarker) destroy() { m.ev.Destroy() }

// neverPassed is the marker of a wait whose passing cannot be known.
type neverPassed struct{}

func (neverPassed) passed() bool { return false }
func (neverPassed) destroy()     {}
