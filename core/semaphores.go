package core

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Semaphores: a 64-bit counter in registered host memory, bound to one endpoint. Its
// peer signals it with the key PackSemaphore gives: each signal adds to the peer's
// running total and writes the new total into the counter with a put, after a fence,
// so it lands after every put the peer issued before it on the worker (put with
// signal). A wait completes once the counter reaches a value; the progress thread
// watches the counters of pending waits, so nobody polls from Python.
//
// Why a put of a total and not a remote atomic add: UCX 1.22 offers no atomic
// protocol on endpoints with peer error handling (none of its atomic protocols is
// marked as handling errors), so ucp_atomic_op_nbx fails on every transport there;
// a semaphore has one signaller, its endpoint's peer, so writing its total is the
// same add. The total is one aligned 8-byte word, which the transports here copy
// with one store.

// localSemaphore is one semaphore of this side: its counter. The progress thread owns
// it, except the device side (semaphorestreams.go), which application threads use
// under devMu.
type localSemaphore struct {
	id      uint64
	ep      *endpoint
	counter unsafe.Pointer // from pages.alloc: a page of its own (CUDA maps whole pages)
	pages   counterPages
	mh      *ucxx.MemHandle
	rkey    []byte

	// devMu guards the device side. The progress thread takes it in freeSemaphore
	// while holding nothing else; a stream wait holds it through its CUDA calls.
	devMu sync.Mutex
	// dev is where devices see the counter once a stream waited on it (0 until then).
	dev uintptr
	// closed: the semaphore was released; no stream wait may map or use the counter.
	closed bool
	// passed holds, per stream that waited on the counter, a marker queued after its
	// latest wait: the counter's page is freed only once every marker passed.
	passed map[uintptr]streamMarker
}

func (s *localSemaphore) value() uint64 { return atomic.LoadUint64((*uint64)(s.counter)) }

// semaphoreMemory is the size of a counter, and of the total a signal writes into it:
// one word (the counter lives in a page of its own).
const semaphoreMemory = 8

// NewSemaphore makes a semaphore at 0 on endpoint ep, for its peer to signal.
//
// Errors: ErrOneSidedOff, ErrEngineClosed, ErrEndpointClosed, the endpoint's failure,
// UCX's status for ucp_mem_map.
func (e *Engine) NewSemaphore(ep uint64) (id uint64, err error) {
	if err := e.oneSided("NewSemaphore"); err != nil {
		return 0, err
	}
	if ferr := e.onThread(func() { id, err = e.rma.newSemaphore(ep) }); ferr != nil {
		return 0, ferr
	}
	return id, err
}

// PackSemaphore returns semaphore id's packed key, for its endpoint's peer to pass to
// UnpackKey and Signal.
//
// Errors: ErrEngineClosed, ErrNoSemaphore, UCX's status for ucp_rkey_pack.
func (e *Engine) PackSemaphore(id uint64) (packed []byte, err error) {
	if ferr := e.onThread(func() { packed, err = e.rma.packSemaphore(id) }); ferr != nil {
		return nil, ferr
	}
	return packed, err
}

// SemaphoreValue returns semaphore id's counter.
//
// Errors: ErrEngineClosed, ErrNoSemaphore.
func (e *Engine) SemaphoreValue(id uint64) (v uint64, err error) {
	if ferr := e.onThread(func() {
		if s := e.rma.sems[id]; s != nil {
			v = s.value()
		} else {
			err = fmt.Errorf("SemaphoreValue: %w", ErrNoSemaphore)
		}
	}); ferr != nil {
		return 0, ferr
	}
	return v, err
}

// WaitSemaphore queues a wait that completes once semaphore id's counter reaches
// value (StatusOK, the counter in Length), or fails with its endpoint's status when
// the endpoint fails, or StatusCanceled when cancelled or the semaphore released.
//
// Errors: ErrEngineClosed.
func (e *Engine) WaitSemaphore(id uint64, value uint64) (uint64, error) {
	return e.waitSemaphore(id, value, nil)
}

func (e *Engine) waitSemaphore(id uint64, value uint64, sink *Sink) (uint64, error) {
	rid := e.newID()
	return rid, e.submit(submission{op: opSemWait, id: rid, addr: uintptr(id), size: value, sink: sink})
}

// Signal adds n to the peer's semaphore named by remote key key on endpoint ep.
//
// Errors: ErrOneSidedOff, ErrEngineClosed, ErrEndpointClosed, the endpoint's failure.
// A key that is not a semaphore's of this endpoint completes with StatusInvalidParam.
func (e *Engine) Signal(ep uint64, key uint64, n uint64) (uint64, error) {
	return e.signal(ep, key, n, nil)
}

func (e *Engine) signal(ep uint64, key uint64, n uint64, sink *Sink) (uint64, error) {
	if err := e.oneSided("Signal"); err != nil {
		return 0, err
	}
	if _, err := e.eps.live(ep); err != nil {
		return 0, err
	}
	op := &rmaOp{id: e.newID(), signalKey: key, signalBy: n}
	return op.id, e.submit(submission{op: opSignal, id: op.id, ep: ep, rma: op, sink: sink})
}

// ReleaseSemaphore frees semaphore id; its pending waits end with StatusCanceled, and
// streams waiting on it are let through (WaitSemaphoreOnStream).
//
// Errors: ErrEngineClosed, ErrNoSemaphore.
func (e *Engine) ReleaseSemaphore(id uint64) (err error) {
	if ferr := e.onThread(func() {
		if s := e.rma.sems[id]; s != nil {
			e.rma.freeSemaphore(s, ucxx.StatusCanceled)
		} else {
			err = fmt.Errorf("ReleaseSemaphore: %w", ErrNoSemaphore)
		}
	}); ferr != nil {
		return ferr
	}
	return err
}

func (o *oneSided) newSemaphore(h uint64) (uint64, error) {
	ep := o.eps.get(h)
	if ep == nil || ep.phase != phaseReady {
		return 0, endpointError(ep)
	}
	mem := o.counters.alloc()
	if mem == nil {
		return 0, ucxx.StatusNoMemory.Err("NewSemaphore")
	}
	mh, err := o.ctx.MemMap(uintptr(mem), semaphoreMemory, ucsMemType(uint64(MemHost)))
	if err != nil {
		o.counters.free(mem)
		return 0, err
	}
	s := &localSemaphore{id: o.newID(), ep: ep, counter: mem, pages: o.counters, mh: mh}
	o.sems[s.id] = s
	ep.semaphores++
	return s.id, nil
}

func (o *oneSided) packSemaphore(id uint64) ([]byte, error) {
	s := o.sems[id]
	if s == nil {
		return nil, fmt.Errorf("PackSemaphore: %w", ErrNoSemaphore)
	}
	return packKey(s.mh, &s.rkey, packedKey{kind: keySemaphore, memType: MemHost, addr: uint64(uintptr(s.counter)), length: semaphoreMemory})
}

// wait queues or completes a wait (opSemWait: addr is the semaphore, size the value).
func (o *oneSided) wait(sub *submission) {
	s := o.sems[uint64(sub.addr)]
	if s == nil {
		o.completeNow(sub.id, ucxx.StatusCanceled, 0)
		return
	}
	if v := s.value(); v >= sub.size {
		o.completeNow(sub.id, ucxx.StatusOK, v)
		return
	}
	if s.ep.phase != phaseReady {
		o.completeNow(sub.id, endpointStatus(s.ep), 0)
		return
	}
	r := o.requests.add(sub.id, opSemWait, nil)
	r.internal, r.sem, r.expect = stepSemWait, s, sub.size
	o.waits = append(o.waits, r)
}

// waitReady reports whether a pending wait's counter reached its value.
func (o *oneSided) waitReady() bool {
	for _, r := range o.waits {
		if r.sem.value() >= r.expect {
			return true
		}
	}
	return false
}

// checkWaits completes the waits whose counter reached their value.
func (o *oneSided) checkWaits() {
	kept := o.waits[:0]
	for _, r := range o.waits {
		if v := r.sem.value(); v >= r.expect {
			o.endWait(r, ucxx.StatusOK, v)
		} else {
			kept = append(kept, r)
		}
	}
	clear(o.waits[len(kept):])
	o.waits = kept
}

func (o *oneSided) endWait(r *request, st ucxx.Status, v uint64) {
	o.requests.remove(r.id)
	o.completeNow(r.id, st, v)
	o.requests.recycle(r)
}

// endWaitsIf ends the waits for which match holds with st.
func (o *oneSided) endWaitsIf(match func(*request) bool, st ucxx.Status) {
	kept := o.waits[:0]
	for _, r := range o.waits {
		if match(r) {
			o.endWait(r, st, 0)
		} else {
			kept = append(kept, r)
		}
	}
	clear(o.waits[len(kept):])
	o.waits = kept
}

// cancelWait ends a wait the application cancelled.
func (o *oneSided) cancelWait(c *request) {
	o.endWaitsIf(func(r *request) bool { return r == c }, ucxx.StatusCanceled)
}

// failWaits ends the waits on ep's semaphores with st (the endpoint failed or closes).
func (o *oneSided) failWaits(ep *endpoint, st ucxx.Status) {
	if len(o.waits) > 0 {
		o.endWaitsIf(func(r *request) bool { return r.sem.ep == ep }, st)
	}
}

// freeSemaphore releases s: its waits end with st, and UCX forgets its page and it is
// freed at once or, while streams may still be waiting on it, once they passed
// (semaphorestreams.go).
func (o *oneSided) freeSemaphore(s *localSemaphore, st ucxx.Status) {
	o.endWaitsIf(func(r *request) bool { return r.sem == s }, st)
	delete(o.sems, s.id)
	s.ep.semaphores--
	if !s.retire() {
		o.retiring = append(o.retiring, s)
	}
	o.sweepRetiring()
}

// signal posts a semaphore signal (opSignal): the new total, after a fence.
func (o *oneSided) signal(sub *submission) {
	op := sub.rma
	ep := o.readyEndpoint(sub)
	if ep == nil {
		return
	}
	k := o.remotes[op.signalKey]
	if k == nil || k.ep != ep || k.kind != keySemaphore {
		o.completeNow(op.id, ucxx.StatusInvalidParam, 0)
		return
	}
	if err := o.worker.Fence(); err != nil {
		o.completeNow(op.id, ucxx.StatusIOError, 0)
		return
	}
	k.signalled += op.signalBy
	op.operand = ucxx.CMalloc(semaphoreMemory)
	*(*uint64)(op.operand) = k.signalled
	op.remaining = 1
	r := o.requests.add(o.newID(), opRMA, ep)
	r.internal, r.rma = stepRMAPart, op
	r.track(ep.u.Put(uintptr(op.operand), semaphoreMemory, nil, ucsMemType(uint64(MemHost)), k.addr, k.key, r.id))
}
