package core

import (
	"sync"
	"sync/atomic"

	"github.com/ucxx-go/ucxx-go/notifier"
)

// opKind is what a submission asks the progress thread to do.
type opKind uint8

const (
	opTagSend opKind = iota + 1
	opTagRecv
	opCancel
	opConnect
	opCloseEndpoint
	opAbortEndpoint
	opCall // run a function on the progress thread (setup and teardown, not the hot path)
	opSendMulti
	opRecvMulti
	opAMSend
	opAMRecv
	opRecvProbed
	opProvideFrames
	opControl // a control word's send or receive (requests only, never submitted)
	opRMA     // puts and gets (rma.go)
	opFlush   // a flush of an endpoint's one-sided operations (and, a request only, the warm-up's of the worker)
	opSignal  // a semaphore signal (semaphores.go)
	opSemWait // a wait on a semaphore
)

// submission is one application request waiting for the progress thread. It is a
// value, so queueing one allocates nothing once the pool's slices have grown.
type submission struct {
	op      opKind
	id      uint64 // request id the completion will carry
	ep      uint64 // endpoint handle
	addr    uintptr
	size    uint64
	tag     uint64
	mask    uint64
	memType int
	slot    uint8           // inline completion slot + 1, or 0 (inline.go)
	cuda    cudaBuffers     // CUDA buffers: stream events to wait for, the device (cuda.go)
	timeout int64           // nanoseconds, for connect and close
	text    string          // connect: the peer's IP
	port    int             // connect: the peer's port
	epOpts  EndpointOptions // connect: how the endpoint is created
	call    func()          // opCall
	multi   *multiOp        // opSendMulti, opRecvMulti
	frames  []providedFrame // opProvideFrames: the frames the application allocated
	rma     *rmaOp          // opRMA, opSignal
	sink    *Sink           // where the completion goes instead of the queue (sink.go), or nil
	posted  chan bool       // set when delayed submission is off: closed once dispatched (posted, or held back by flow control)
	stalled bool            // a send flow control held back (flowcontrol.go)
}

// pool is the delayed-submission pool: application threads append, the progress thread
// takes everything in one swap and dispatches it as a batch (one wake-up, one pass, many
// operations).
//
// Wake-up protocol: before sleeping, the progress thread sets sleeping and then looks at
// the pool once more; a submitter appends and then clears sleeping, writing the wake
// eventfd only if it was the one to clear it. Either the progress thread sees the new
// item, or the submitter sees sleeping set and wakes it: never neither. While the
// progress thread is busy, submitting costs no system call.
type pool struct {
	mu       sync.Mutex // guards items and closed
	items    []submission
	closed   bool // closeIfEmpty closed it: push refuses
	sleeping atomic.Uint32
	wakeFD   notifier.EventFD
}

// push queues s for the progress thread; false, queueing nothing, once the stop has
// closed the pool (closeIfEmpty).
func (p *pool) push(s submission) bool {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false
	}
	p.items = append(p.items, s)
	p.mu.Unlock()
	if p.sleeping.CompareAndSwap(1, 0) {
		p.kick()
	}
	return true
}

// closeIfEmpty closes the pool if nothing is queued, and reports whether it did: the
// stop's last dispatch has then seen every submission pushed, and push refuses the
// rest. A submitter that checked Engine.closing just before the stop began may push
// after that dispatch: closeIfEmpty refuses to close over it, so it is dispatched.
func (p *pool) closeIfEmpty() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.items) > 0 {
		return false
	}
	p.closed = true
	return true
}

// kick wakes the progress thread.
func (p *pool) kick() { p.wakeFD.Signal() }

// swap takes every queued submission, handing spare over as the new queue, so the
// two slices alternate and neither is reallocated in steady state.
func (p *pool) swap(spare []submission) []submission {
	p.mu.Lock()
	batch := p.items
	p.items = spare[:0]
	p.mu.Unlock()
	return batch
}

func (p *pool) empty() bool {
	p.mu.Lock()
	n := len(p.items)
	p.mu.Unlock()
	return n == 0
}

// prepareSleep announces that the progress thread is about to sleep and reports
// whether it may: false when work arrived meanwhile.
func (p *pool) prepareSleep() bool {
	p.sleeping.Store(1) // an atomic swap on amd64: ordered before the check below
	if !p.empty() {
		p.sleeping.Store(0)
		return false
	}
	return true
}

func (p *pool) awake() { p.sleeping.Store(0) }

// drainWake empties the wake eventfd's counter.
func (p *pool) drainWake() { p.wakeFD.Drain() }
