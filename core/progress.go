package core

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// idleWake bounds a blocking sleep with nothing scheduled: a safety net that costs
// nothing measurable (one wake-up a second), not a mechanism anything relies on.
const idleWake = time.Second

// maxProgressPasses bounds back-to-back ucp_worker_progress calls, so submissions
// and completions are handled between passes under sustained traffic.
const maxProgressPasses = 64

// run is the progress thread. It owns the worker from creation to destruction.
func (e *Engine) run(started chan<- error) {
	// Never unlocked: if the loop ends early UCX may have left thread-bound state, and
	// a locked goroutine that returns takes its thread with it.
	runtime.LockOSThread()
	e.requests.thread.claim()
	e.eps.thread.claim()
	defer close(e.done)
	defer liveEngines.Add(-1) // reserveP's count
	if err := e.setup(); err != nil {
		started <- err
		return
	}
	started <- nil
	if e.opts.WarmUp != "" {
		e.startWarmUp(e.opts.WarmUp, 0)
	}
	var evs [2]syscall.EpollEvent
	for {
		e.dispatch()
		e.progress()
		if e.stopping && e.finishStop() {
			return
		}
		if e.opts.Mode == Polling {
			continue
		}
		if e.cuda.waiting() {
			// Submissions wait for GPU streams: poll their events, yielding the CPU.
			yieldCPU()
			continue
		}
		e.sleep(evs[:])
	}
}

func (e *Engine) setup() (err error) {
	if e.ctx, err = newContext(e.opts.Mode, e.opts.UCXOptions, e.features()); err != nil {
		return err
	}
	e.rma.ctx = e.ctx
	defer func() {
		if err != nil {
			e.teardownWorker()
		}
	}()
	if e.worker, err = e.ctx.NewWorker(false); err != nil {
		return err
	}
	e.worker.AttachEvents()
	if err = e.worker.RegisterAM(); err != nil {
		return err
	}
	if e.opts.Mode == Polling {
		return nil
	}
	efd, err := e.worker.EventFD()
	if err != nil {
		return err
	}
	if e.epfd, err = syscall.EpollCreate1(syscall.EPOLL_CLOEXEC); err != nil {
		return fmt.Errorf("core: epoll create: %w", err)
	}
	for _, fd := range []int{efd, int(e.pool.wakeFD)} {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}
		if err = syscall.EpollCtl(e.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return fmt.Errorf("core: epoll add: %w", err)
		}
	}
	return nil
}

func (e *Engine) teardownWorker() {
	e.closeDialing()
	if e.epfd >= 0 {
		syscall.Close(e.epfd)
		e.epfd = -1
	}
	if e.rma.ctx != nil {
		e.rma.close()
		e.rma.ctx = nil
	}
	if e.worker != nil {
		e.worker.Close()
		e.worker = nil
	}
	e.rma.quarantine.releaseAll()
	if e.ctx != nil {
		e.ctx.Close()
		e.ctx = nil
	}
}

// dispatch takes every queued submission and issues it, in order.
func (e *Engine) dispatch() {
	e.cuda.pinWhenKnown()
	if e.cuda.waiting() {
		e.cuda.release(e.closing.Load())
	}
	batch := e.pool.swap(e.spare)
	for i := range batch {
		if s := batch[i].sink; s != nil {
			e.routes[batch[i].id] = s
		}
		e.cuda.pass(&batch[i], e.closing.Load())
		batch[i] = submission{} // drop references (closures, strings) held by the slot
	}
	e.spare = batch
	if len(batch) > 0 {
		e.worked = true
		e.drainEvents()
	}
}

// post dispatches s and tells a caller waiting for that (no delayed submission).
func (e *Engine) post(s *submission) {
	e.dispatchOne(s)
	if s.posted != nil {
		close(s.posted)
	}
}

func (e *Engine) dispatchOne(s *submission) {
	switch s.op {
	case opTagSend, opSendMulti, opAMSend:
		e.dispatchSend(s) // flowcontrol.go
	case opTagRecv:
		var ep *endpoint
		if s.ep != 0 {
			if ep = e.eps.get(s.ep); ep == nil || ep.phase != phaseReady {
				st, ok := e.drainable(s.ep, ep, s.tag, s.mask)
				if !ok {
					e.completeNow(s.id, st, 0)
					return
				}
				ep = nil // receive on the worker: the endpoint is gone
			}
		}
		r := e.requests.add(s.id, opTagRecv, ep)
		r.slot = s.slot
		e.postTagRecv(r, s.addr, s.size, s.tag, s.mask, s.memType)
	case opCancel:
		r := e.requests.get(s.id)
		switch {
		case r == nil:
			e.cancelStalled(s.id) // a send flow control holds back, if it is one
		case r.canceled:
		case r.internal == notInternal:
			r.canceled = true
			e.worker.Cancel(r.ucp)
		case r.internal == stepMultiWhole:
			r.canceled = true
			e.multi.cancelMulti(r.multi)
		case r.internal == stepAMWait:
			e.am.cancelAMRecv(r)
		case r.internal == stepSemWait:
			e.rma.cancelWait(r)
		}
	case opRecvMulti:
		e.multi.recvMulti(s)
	case opAMRecv:
		e.am.amRecv(s)
	case opRecvProbed:
		e.recvProbed(s)
	case opProvideFrames:
		e.multi.provideFrames(s)
	case opRMA:
		e.rma.post(s)
	case opFlush:
		e.rma.flush(s)
	case opSignal:
		e.rma.signal(s)
	case opSemWait:
		e.rma.wait(s)
	case opConnect:
		e.connect(s)
	case opCloseEndpoint:
		e.closeEndpoint(s)
	case opAbortEndpoint:
		e.abortEndpoint(s)
	case opCall:
		s.call()
	}
}

// postTagSend posts s, a tag send, on ep, its endpoint (nil: gone), or completes it
// with the endpoint's status when ep takes no work.
func (e *Engine) postTagSend(s *submission, ep *endpoint) {
	if !e.accepts(ep, s) {
		return
	}
	r := e.requests.add(s.id, opTagSend, ep)
	r.slot, r.sent = s.slot, s.size
	e.requests.markCUDA(r, s.memType)
	r.track(ep.u.TagSend(s.addr, s.size, s.tag, s.memType, s.id))
}

// drainable reports whether a receive on a broken endpoint may still be posted (on the
// worker): its peer broke it, not the application, and a matching message already
// waits. Otherwise it returns the status the receive fails with.
func (t *progressThread) drainable(handle uint64, ep *endpoint, tag, mask uint64) (ucxx.Status, bool) {
	st, dead := t.eps.deadStatus(handle)
	if !dead {
		st = endpointStatus(ep)
	}
	if st == ucxx.StatusCanceled {
		return st, false // closed or aborted by the application
	}
	if t.waiting(tag, mask) {
		return st, true
	}
	return st, false
}

// readyEndpoint returns the submission's endpoint if work may be posted on it, or
// completes the submission with the endpoint's status and returns nil.
func (t *progressThread) readyEndpoint(s *submission) *endpoint {
	ep := t.eps.get(s.ep)
	if !t.accepts(ep, s) {
		return nil
	}
	return ep
}

// accepts reports whether s may be posted on ep, its endpoint (nil: gone), or
// completes s with the endpoint's status.
func (t *progressThread) accepts(ep *endpoint, s *submission) bool {
	if !ep.takes(s) {
		t.completeNow(s.id, endpointStatus(ep), 0)
		return false
	}
	return true
}

// endpointStatus is the status work on a gone or unusable endpoint fails with.
func endpointStatus(ep *endpoint) ucxx.Status {
	if ep != nil {
		if st := ucxx.Status(ep.failed.Load()); st != ucxx.StatusOK {
			return st
		}
	}
	return ucxx.StatusCanceled
}

// progress runs the worker until it is idle, handles what UCX reported, and hands
// completions to the queue. What UCX reported is handled after every pass, not once
// the worker is idle: a multi-buffer message's header completing in one pass posts
// the receives of its frames (multirecv.go) before the next pass reads their
// fragments, which would otherwise land in UCX's unexpected queue and be copied again
// (a shared-memory pass reads up to 16 FIFO elements of 8 KiB; 8 frames of 64 KiB are
// 64 of them).
func (e *Engine) progress() {
	for i := 0; i < maxProgressPasses && e.worker.Progress(); i++ {
		e.worked = true
		e.drainEvents()
	}
	if e.pollDialing() {
		e.worked = true
	}
	e.drainEvents()
	if len(e.rma.waits) > 0 {
		e.rma.checkWaits()
	}
	if e.unexpected.passes++; e.unexpected.passes >= drainEveryPasses {
		e.drainUnexpected()
	}
	if len(e.heldChanged) > 0 {
		e.settleHeld() // receives took held messages: pongs owed may go
	}
	if len(e.eps.timed) > 0 || e.ka.watched > 0 {
		now := time.Now()
		e.checkDeadlines(now)
		if e.ka.due(now) {
			e.keepaliveTick(now)
		}
	}
	e.flush()
}

// drainEvents handles the worker's events. Handling one can issue UCX calls that add
// events (a handshake step, a close), so it copies the batch out first and repeats
// until none are left.
func (e *Engine) drainEvents() {
	for {
		evs := e.worker.Events()
		if len(evs) == 0 {
			return
		}
		e.events = append(e.events[:0], evs...)
		e.worker.ResetEvents()
		for i := range e.events {
			ev := &e.events[i]
			switch ev.Kind {
			case ucxx.EventCompletion:
				e.onCompletion(ev)
			case ucxx.EventEpError:
				e.onEndpointError(ev.ID, ev.Status)
			case ucxx.EventConnRequest:
				e.accept(ev.ID, ev.Ptr)
			case ucxx.EventAM:
				e.am.onAM(ev)
			}
		}
	}
}

// sleepTimeout is how long the worker may go without a progress pass when nothing
// wakes it: the thread's sleep, and the owner's timer in loop mode.
func (e *Engine) sleepTimeout() time.Duration {
	timeout := idleWake
	switch {
	case len(e.pending) > 0 || e.stopping || e.eps.ucxClosing > 0:
		// The queue is full, shutdown is waiting on requests, or an endpoint's close
		// may end in any progress pass (nothing wakes the thread for it).
		timeout = time.Millisecond
	case len(e.rma.waits) > 0:
		// A semaphore's counter changes with no event here (a peer's put into
		// shared memory): look again soon.
		timeout = semaphorePoll
	case e.requests.cuda > 0 || e.cuda.waiting():
		// A CUDA copy ends with no event (see cudaSpinFor): without a spin (Options.
		// SpinBeforeSleep 0) a receive into device memory would advance once per
		// idle wake-up. Submissions waiting for GPU streams likewise (the thread
		// modes poll those without sleeping; loop mode's owner looks again soon).
		timeout = semaphorePoll
	default:
		next := e.eps.nextDeadline()
		if e.ka.watched > 0 && (next.IsZero() || e.ka.next.Before(next)) {
			next = e.ka.next
		}
		if d := time.Until(next); !next.IsZero() && d < timeout {
			timeout = max(d, time.Millisecond)
		}
	}
	return timeout
}

// sleep arms the worker and waits in epoll for UCX, a submission or a deadline,
// after polling for SpinBeforeSleep: on a busy connection the next message usually
// comes sooner than a sleep and a wake-up would take.
func (e *Engine) sleep(evs []syscall.EpollEvent) {
	if e.worked {
		e.lastWork = time.Now()
	}
	if e.spin() {
		return
	}
	e.drainUnexpected() // before an idle wait: what came unasked is held and bounded now
	if !e.pool.prepareSleep() {
		return
	}
	defer e.pool.awake()
	if armed, err := e.worker.Arm(); err != nil || !armed {
		return
	}
	timeout := e.sleepTimeout()
	var n int
	var err error
	// The blocking wait only for a long sleep: the short ones (a full queue, shutdown,
	// an endpoint's UCX close, semaphore waits) poll for what no event announces.
	if q := e.opts.QuietAfter; q > 0 && timeout > time.Millisecond && time.Since(e.lastWork) > q {
		n, err = epollWaitBlocking(e.epfd, evs, timeout)
	} else {
		n, err = epollWaitFor(e.epfd, evs, timeout)
	}
	if err != nil && !errors.Is(err, syscall.EINTR) {
		return
	}
	for i := 0; i < n; i++ {
		if int(evs[i].Fd) == int(e.pool.wakeFD) {
			e.pool.drainWake()
		}
	}
}

// spin polls the pool and the worker until either has work (true) or the spin
// time is over (false; with CUDA requests in flight, see cudaSpinFor), yielding the
// CPU between polls. It spins only after a pass that did work: a wake-up that finds
// nothing to do (the idle timeout, a signal the Go runtime sends a thread that has run
// for 10 ms) goes straight back to sleep, so an idle engine stays idle.
func (e *Engine) spin() bool {
	worked := e.worked
	e.worked = false
	if !worked || e.opts.SpinBeforeSleep <= 0 || e.stopping {
		return false
	}
	deadline := time.Now().Add(e.opts.SpinBeforeSleep)
	for {
		if !e.pool.empty() || e.worker.Progress() || len(e.worker.Events()) > 0 || e.rma.waitReady() || e.pollDialing() {
			e.worked = true
			return true
		}
		if now := time.Now(); now.After(deadline) && !(e.requests.cuda > 0 && now.Sub(e.lastWork) < cudaSpinFor) {
			return false
		}
		yieldCPU()
	}
}

// beginStop starts shutdown on the progress thread: listeners go, endpoints are
// aborted, every request still in flight is cancelled.
func (e *Engine) beginStop(deadline time.Time, done chan error) {
	e.stopping, e.stopBy, e.stopDone = true, deadline, done
	e.stopWarmUp()
	e.multi.dropAllAwaiting()
	e.dropAllHeld()
	for h := range e.listeners {
		e.closeListener(h)
	}
	for _, ep := range e.eps.byHandle {
		switch {
		case ep.phase == phaseHandshake:
			e.failHandshake(ep, ucxx.StatusCanceled)
		case ep.phase >= phaseClosing:
			// A graceful close waiting for its sends or the peer's answer to its
			// goodbye waits no more: its control receive would stay posted.
			e.closeUCX(ep, true)
		default:
			e.teardown(ep, ucxx.StatusCanceled, true)
		}
	}
	e.conns.closeAll() // every endpoint is forced closed: no goodbye needs its socket
	// After the endpoints' teardowns: what waited for room, and the worker's streams.
	e.multi.failAllWaiting(ucxx.StatusCanceled)
	e.multi.stopWorkerStreams()
	for _, r := range e.requests.byID {
		// A worker stream's drops of a rejected message too: no endpoint's teardown
		// cancels them.
		if !r.canceled && (r.internal == notInternal || r.internal == stepMultiDiscard && r.ep == nil) {
			r.canceled = true
			e.worker.Cancel(r.ucp)
		}
	}
}

// finishStop ends the loop once nothing is in flight or the deadline passed: the
// worker and context are destroyed and the queue is closed.
func (e *Engine) finishStop() bool {
	// What came unasked since the last drain is dropped now (each drop a receive in
	// flight until it ends), not left in UCX's queue for it to warn of at the end.
	e.drainUnexpected()
	// Completions waiting for room in the queue count as in flight: their consumer
	// has not seen them yet.
	if (e.requests.len() > 0 || len(e.pending) > 0) && time.Now().Before(e.stopBy) {
		return false
	}
	if !e.pool.closeIfEmpty() {
		return false // submitted after the last dispatch: the next pass dispatches it
	}
	e.flush()
	var err error
	if n, p := e.requests.len(), len(e.pending); n > 0 || p > 0 {
		err = fmt.Errorf("core: %d requests in flight and %d completions undelivered at shutdown", n, p)
	}
	e.teardownWorker()
	e.queue.Close()
	e.stopDone <- err
	return true
}

// epollWait is epoll_wait as a raw system call. syscall.EpollWait tells the Go
// scheduler the thread is in a system call, and sysmon then hands the thread's P to
// another thread, which waking up must take back (benchmarks/design-notes.md). A raw
// call keeps the P; New raises the P count (reserveP) so nobody waits for it, and a
// GC stop-the-world interrupts the wait with a signal (EINTR).
func epollWait(epfd int, evs []syscall.EpollEvent, msec int) (int, error) {
	r, _, errno := syscall.RawSyscall6(syscall.SYS_EPOLL_WAIT, uintptr(epfd), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), uintptr(msec), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// epollWaitBlocking is epoll_wait for timeout (rounded up to the millisecond) as a
// system call the Go scheduler knows about: the thread gives up its P while it waits,
// and the runtime leaves it alone.
func epollWaitBlocking(epfd int, evs []syscall.EpollEvent, timeout time.Duration) (int, error) {
	return syscall.EpollWait(epfd, evs, int((timeout+time.Millisecond-1)/time.Millisecond))
}

// cudaSpinFor: while requests that move CUDA memory are in flight, the spin after
// work goes on past SpinBeforeSleep, until this long has passed since the last work:
// a CUDA copy ends with no event to wake the thread (UCX polls its CUDA events), so
// a sleeping thread noticed the end of a 1 GiB put ~240 us late. A CUDA receive
// posted long before its message comes stops the spin after this long.
const cudaSpinFor = 100 * time.Millisecond

// semaphorePoll is how often the progress thread looks at the counters of pending
// semaphore waits while nothing else wakes it.
const semaphorePoll = 50 * time.Microsecond

// epollWaitFor is epollWait for timeout, to the microsecond where the kernel has
// epoll_pwait2 (Linux 5.11), else rounded up to the millisecond.
func epollWaitFor(epfd int, evs []syscall.EpollEvent, timeout time.Duration) (int, error) {
	if timeout < time.Millisecond && !noPwait2.Load() {
		ts := syscall.NsecToTimespec(int64(timeout))
		r, _, errno := syscall.RawSyscall6(sysEpollPwait2, uintptr(epfd), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), uintptr(unsafe.Pointer(&ts)), 0, 0)
		if errno != syscall.ENOSYS {
			if errno != 0 {
				return 0, errno
			}
			return int(r), nil
		}
		noPwait2.Store(true)
	}
	return epollWait(epfd, evs, int((timeout+time.Millisecond-1)/time.Millisecond))
}

// sysEpollPwait2 is epoll_pwait2's system call number on amd64 and arm64 alike.
const sysEpollPwait2 = 441

var noPwait2 atomic.Bool

// yieldCPU lets another thread that is runnable on this CPU run (sched_yield): the
// busy waits (spin before sleep, the inline wait, gated GPU work) poll between
// yields, so a thread sharing the CPU, the application's or a peer's, is not held up.
func yieldCPU() { syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
