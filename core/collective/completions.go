package collective

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ucxx-go/ucxx-go/core"
	"github.com/ucxx-go/ucxx-go/notifier"
)

// completionReader reads a communicator engine's completion queue and hands each
// completion to whoever waits for its id. Ids of requests are unique; an event id
// (an accepted connection) repeats, so completions wait in a queue per id until taken.
type completionReader struct {
	e *core.Engine

	mu   sync.Mutex
	got  map[uint64][]notifier.Completion
	held map[uint64][]byte // Go memory lent to UCX, by request id (see hold)
	// forgotten: request ids whose completions are dropped when they come (forget)
	forgotten map[uint64]struct{}
	arrived   chan struct{} // closed and replaced when completions arrive
	closed    bool
	done      chan struct{}
}

func newCompletionReader(e *core.Engine) *completionReader {
	r := &completionReader{e: e, got: make(map[uint64][]notifier.Completion), held: make(map[uint64][]byte), forgotten: make(map[uint64]struct{}), arrived: make(chan struct{}), done: make(chan struct{})}
	go r.read()
	return r
}

// read moves completions from the queue into got until the queue closes.
func (r *completionReader) read() {
	defer close(r.done)
	q := r.e.Queue()
	var buf [256]notifier.Completion
	for {
		n := q.Pop(buf[:])
		if n == 0 {
			if res, err := q.Wait(100 * time.Millisecond); err != nil || res == notifier.Closed {
				r.mu.Lock()
				r.closed = true
				clear(r.held) // the worker is gone: UCX holds nothing any more
				close(r.arrived)
				r.mu.Unlock()
				return
			}
			continue
		}
		r.mu.Lock()
		for _, c := range buf[:n] {
			delete(r.held, c.ID)
			if _, ok := r.forgotten[c.ID]; ok {
				delete(r.forgotten, c.ID)
				continue
			}
			r.got[c.ID] = append(r.got[c.ID], c)
		}
		close(r.arrived)
		r.arrived = make(chan struct{})
		r.mu.Unlock()
	}
}

// hold keeps b reachable until request id's completion arrives or the engine stops.
// The engine takes buffers as addresses, which the garbage collector does not see:
// Go memory lent to a request must stay referenced for as long as UCX may read or
// write it, which is past the waiter's return when the waiter gives up (a timeout
// whose cancellation is not confirmed in time). Call it right after submitting id.
func (r *completionReader) hold(id uint64, b []byte) {
	if len(b) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || len(r.got[id]) > 0 {
		return // already ended
	}
	r.held[id] = b
}

// forget drops request id's completion, now or when it comes: nobody waits for it
// (a receive cancelled and given up).
func (r *completionReader) forget(id uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.got[id]; ok {
		delete(r.got, id)
		return
	}
	if !r.closed {
		r.forgotten[id] = struct{}{}
	}
}

// errEngineGone: the communicator's engine stopped while a completion was awaited.
var errEngineGone = errors.New("collective: the communicator's engine stopped")

// wait returns the next completion of id, or an error once deadline passes.
func (r *completionReader) wait(id uint64, deadline time.Time) (notifier.Completion, error) {
	return r.waitAny([]uint64{id}, deadline)
}

// waitAny returns the next completion of the first of ids that has one, or an error
// once deadline passes.
func (r *completionReader) waitAny(ids []uint64, deadline time.Time) (notifier.Completion, error) {
	for {
		r.mu.Lock()
		for _, id := range ids {
			if q := r.got[id]; len(q) > 0 {
				c := q[0]
				if len(q) == 1 {
					delete(r.got, id)
				} else {
					r.got[id] = q[1:]
				}
				r.mu.Unlock()
				return c, nil
			}
		}
		closed, arrived := r.closed, r.arrived
		r.mu.Unlock()
		if closed {
			return notifier.Completion{}, errEngineGone
		}
		left := time.Until(deadline)
		if left <= 0 {
			return notifier.Completion{}, fmt.Errorf("collective: no completion of %#x in time: %w", ids, ErrTimeout)
		}
		t := time.NewTimer(left)
		select {
		case <-arrived:
		case <-t.C:
		}
		t.Stop()
	}
}
