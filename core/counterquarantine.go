package core

import (
	"sync/atomic"
	"time"
	"unsafe"
)

// quarantinedPages keeps the pages of released semaphore counters from going back to
// the heap while the worker lives. A peer that holds a semaphore's key can still put
// into its counter after the release: UCX's TCP and CMA transports write to the
// address they are given and do not revoke a key when its memory is unmapped
// (ucp_mem_unmap), so a signal in flight, or a peer's late one, would land in freed
// memory, which the heap may have handed to anything. A released page waits here
// and is reused only for another counter once it waited its age (quarantineAge) and
// quarantineDepth pages were released after it (an honest peer's signal in flight
// has landed by then; a very late or hostile one can move that counter, never other
// memory); the rest go back to the heap after the worker is destroyed (releaseAll).
//
// It wraps the counterPages that makes the pages. Progress thread.
type quarantinedPages struct {
	counterPages
	retired []retiredPage // oldest first
	age     time.Duration
	now     func() time.Time
}

// retiredPage is a released page and when it was released.
type retiredPage struct {
	page unsafe.Pointer
	at   time.Time
}

const (
	// quarantineDepth is how many released counter pages wait at least before the
	// oldest is used again (4 KiB each).
	quarantineDepth = 64
)

// quarantineAge is how long a released page waits at least: twice the keepalive
// timeout, past which a peer that went silent has its endpoint failed, and never less
// than twice the default (keepalive off: the default's). Every page released within it
// stays: the application's rate of releases bounds them.
func quarantineAge(keepalive time.Duration) time.Duration {
	return 2 * max(keepalive, DefaultKeepaliveTimeout)
}

// newQuarantinedPages quarantines the pages of pages for age (quarantineAge).
func newQuarantinedPages(pages counterPages, age time.Duration) *quarantinedPages {
	return &quarantinedPages{counterPages: pages, age: age, now: time.Now}
}

// alloc returns a zeroed page: the oldest released one once it waited q.age and more
// than quarantineDepth wait, else a new one.
func (q *quarantinedPages) alloc() unsafe.Pointer {
	if len(q.retired) > quarantineDepth && q.now().Sub(q.retired[0].at) >= q.age {
		p := q.retired[0].page
		copy(q.retired, q.retired[1:])
		q.retired[len(q.retired)-1] = retiredPage{}
		q.retired = q.retired[:len(q.retired)-1]
		atomic.StoreUint64((*uint64)(p), 0) // the counter is the page's only word in use
		return p
	}
	return q.counterPages.alloc()
}

// free puts a released page in quarantine.
func (q *quarantinedPages) free(page unsafe.Pointer) {
	q.retired = append(q.retired, retiredPage{page, q.now()})
}

// releaseAll frees every page in quarantine. Only once the worker is destroyed: no
// transport can write into them then.
func (q *quarantinedPages) releaseAll() {
	for _, r := range q.retired {
		q.counterPages.free(r.page)
	}
	q.retired = nil
}
