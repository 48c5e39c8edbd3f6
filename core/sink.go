package core

import (
	"sync"

	"github.com/ucxx-go/ucxx-go/notifier"
)

// Sink takes the completions of the operations submitted through it, for a Go caller
// that waits for them itself instead of reading the engine's completion queue: the
// layers above the engine (a scheduler, a collective executor) and any Go program
// that shares an engine with another consumer of its queue (the Python bindings).
// An operation submitted through a sink completes exactly as the same operation
// submitted to the engine (same statuses, same one completion, Cancel works), only
// its completion is delivered here, never to the queue, and never inline.
//
// The progress thread delivers; any goroutine may Take. The zero value is not usable:
// make one with NewSink.
type Sink struct {
	mu    sync.Mutex
	items []notifier.Completion
	ready chan struct{}
}

// NewSink makes an empty sink.
func NewSink() *Sink { return &Sink{ready: make(chan struct{}, 1)} }

// deliver appends c and signals Ready. Progress thread.
func (s *Sink) deliver(c notifier.Completion) {
	s.mu.Lock()
	s.items = append(s.items, c)
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default: // a signal is pending already
	}
}

// Ready is signalled when completions arrive: after a receive from it, Take returns
// at least the completions delivered before the signal (it may have taken them already
// with an earlier Take). One signal may stand for many completions.
func (s *Sink) Ready() <-chan struct{} { return s.ready }

// Take appends the completions delivered so far to dst, in the order of delivery, and
// returns it.
func (s *Sink) Take(dst []notifier.Completion) []notifier.Completion {
	s.mu.Lock()
	dst = append(dst, s.items...)
	clear(s.items)
	s.items = s.items[:0]
	s.mu.Unlock()
	return dst
}

// The operations a Go caller submits through a sink. Each is the Engine method of the
// same name (same arguments, errors and completion), routed here.

// TagSend is Engine.TagSend, completing into s.
func (s *Sink) TagSend(e *Engine, ep uint64, addr uintptr, size uint64, tag uint64, memType int, stream uintptr) (uint64, error) {
	t, err := e.tagSend(ep, addr, size, tag, memType, stream, false, s)
	return t.ID, err
}

// TagRecv is Engine.TagRecv, completing into s.
func (s *Sink) TagRecv(e *Engine, ep uint64, addr uintptr, size uint64, tag, mask uint64, memType int, stream uintptr) (uint64, error) {
	t, err := e.tagRecv(ep, addr, size, tag, mask, memType, stream, false, s)
	return t.ID, err
}

// Put is Engine.Put, completing into s.
func (s *Sink) Put(e *Engine, ep uint64, t Transfer, stream uintptr) (uint64, error) {
	tk, err := e.transfer(ep, []Transfer{t}, false, stream, false, s)
	return tk.ID, err
}

// Get is Engine.Get, completing into s.
func (s *Sink) Get(e *Engine, ep uint64, t Transfer, stream uintptr) (uint64, error) {
	tk, err := e.transfer(ep, []Transfer{t}, true, stream, false, s)
	return tk.ID, err
}

// Flush is Engine.Flush, completing into s.
func (s *Sink) Flush(e *Engine, ep uint64) (uint64, error) { return e.flushEndpoint(ep, s) }

// Signal is Engine.Signal, completing into s.
func (s *Sink) Signal(e *Engine, ep uint64, key uint64, n uint64) (uint64, error) {
	return e.signal(ep, key, n, s)
}

// WaitSemaphore is Engine.WaitSemaphore, completing into s.
func (s *Sink) WaitSemaphore(e *Engine, id uint64, value uint64) (uint64, error) {
	return e.waitSemaphore(id, value, s)
}
