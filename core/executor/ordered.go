package executor

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ucxx-go/ucxx-go/core/internal/pause"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Stream-ordered device calls (Call.Ordered), NCCL's semantics: the call is queued
// after the work its caller's streams hold and before the work they get next, and
// returns once queued, not once done. Ten calls in a row then cost the device's time
// for ten, not ten host round trips (an unordered call's host waits for its lanes).
//
// What the host's wait at a call's end gave, the device keeps instead:
//   - the call's lanes wait on the device for the caller's streams (an event
//     recorded at the call's start), and every peer reaches this rank's buffers
//     only after a wait on a signal this rank's lanes send after that (the plan is
//     fenced: callerWorkFenced; the device lanes keep their opening handshakes);
//   - the caller's streams wait on the device for every lane's end (an event each);
//   - a device call after an ordered one starts its lanes after the earlier call's
//     lanes ended: through the caller's stream, which waits for them, where the two
//     calls share one; else each lane waits for the earlier call's lane ends
//     (orderAfter). Counters count signals across calls, so a signal queued for a
//     later call only ever meets that call's wait.
//
// Where a call cannot be ordered so it runs as an unordered call does, which the
// semantics allow: buffers without a stream (nothing to order on), host memory, a
// caller's per-thread default stream (CU_STREAM_PER_THREAD names the calling
// thread's, and the call may be queued from another). A plan that is not fenced
// lets a peer reach this rank's buffers on the strength of the announcement alone:
// before such a call is announced the host waits for the caller's streams and for
// the ordered calls in flight.
//
// Calls queued and not yet seen done are in flight (at most maxInFlight: the next
// call waits for the oldest). A watcher goroutine polls them while any are, against
// the lives of their ranks and the executor's timeout, counted from when the call's
// first lane started on the device (after the caller's work and the earlier calls,
// which are no rank's lateness). A call that fails there (a rank died, the timeout
// passed) releases this rank's counters, so that no stream stays blocked, and breaks
// the executor: Synchronize and the next call report it. Close waits for the calls
// in flight for the timeout at most (flightGrace after a failure), leaks what those
// that did not end may still touch, and reports nothing. Before
// anything a queued op may still use is freed (a context's streams and scratch, a
// peer allocation's mapping), the host waits for the calls in flight (settle); a
// context a call replaces waits for every rank's (retireContext).

// maxInFlight bounds the ordered calls queued and not yet seen done.
const maxInFlight = 64

// flightPollPause is how often the watcher looks at the calls in flight: how late a
// dead rank or a passed deadline is noticed, nothing on any call's path.
const flightPollPause = 500 * time.Microsecond

// flightCall is a stream-ordered call queued on the device.
type flightCall struct {
	// ends[:n] are recorded on the call's lane streams after their last ops; start
	// on lane 0's before its first, after its waits for the caller and earlier calls.
	ends  []ucxx.CUDAEvent
	n     int
	start ucxx.CUDAEvent
	ctx   *planContext // its context, whose connected ranks it waits on
	// started is when the watcher first saw start done (zero: not yet); the call
	// fails the executor's timeout after it.
	started time.Time
	// streams are the caller's streams the call is ordered on (deduplicated).
	streams []uintptr
}

// flight is a gpuState's stream-ordered calls still in flight.
type flight struct {
	mu    sync.Mutex
	calls []*flightCall // oldest first
	spare []*flightCall
	// err is the first failure of a call in flight, for good (the executor is
	// broken after it), found at failedAt.
	err      error
	failedAt time.Time
	// watching: a watcher goroutine runs (until no call is in flight).
	watching bool
	// closed: the executor closes (shut) or its GPU side is gone, events with it:
	// nothing is polled again.
	closed bool
	// alive is the board's look at a rank's process; timeout the executor's.
	alive   func(r int) bool
	timeout time.Duration
}

// failure returns the first failure of a call in flight, or nil.
func (f *flight) failure() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// pending returns how many calls are in flight (not yet seen done).
func (f *flight) pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// holds reports whether a call in flight uses ctx: after settling, one that a
// failure (or Close's bound) left behind.
func (f *flight) holds(ctx *planContext) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fc := range f.calls {
		if fc.ctx == ctx {
			return true
		}
	}
	return false
}

// shut stops the watching for good (the executor closes: the board the watcher
// looks at goes); a poll in progress finishes first.
func (f *flight) shut() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
}

// OrderedStreams returns the caller's streams an ordered call c is queued on (its
// distinct non-zero Streams), into buf; none when one is the per-thread default
// stream, which only the calling thread can name (such a call runs as an ordinary
// one).
func OrderedStreams(c *Call, buf []uintptr) []uintptr {
	buf = buf[:0]
	for _, s := range c.Streams {
		if s == ucxx.StreamPerThread {
			return buf[:0]
		}
		if s != 0 && !slices.Contains(buf, s) {
			buf = append(buf, s)
		}
	}
	return buf
}

// orderAfter makes a device call's lanes (streams) start after the newest ordered
// call in flight ended on every lane, unless the call waits for a stream that call
// is ordered on (that stream waits for its ends: the caller's event covers them).
// Call it with the context current, before any lane queues an op.
func (g *gpuState) orderAfter(streams []ucxx.CUDAStream, callerStreams []uintptr) error {
	f := &g.flight
	f.mu.Lock()
	var last *flightCall
	if len(f.calls) > 0 {
		last = f.calls[len(f.calls)-1]
	}
	f.mu.Unlock()
	if last == nil {
		return nil
	}
	for _, s := range callerStreams {
		if slices.Contains(last.streams, s) {
			return nil
		}
	}
	for _, s := range streams {
		for _, e := range last.ends[:last.n] {
			if err := g.d.StreamWaitEvent(s.Handle(), e); err != nil {
				return err
			}
		}
	}
	return nil
}

// takeFlight returns a flight call with an end event for each of lanes, waiting
// for the oldest call in flight when maxInFlight are. Call it with the context
// current.
func (g *gpuState) takeFlight(lanes int) (*flightCall, error) {
	f := &g.flight
	f.mu.Lock()
	full := len(f.calls) >= maxInFlight
	f.mu.Unlock()
	if full {
		if err := g.settleUntil(maxInFlight-1, time.Time{}); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	var fc *flightCall
	if k := len(f.spare); k > 0 {
		fc, f.spare = f.spare[k-1], f.spare[:k-1]
	} else {
		fc = new(flightCall)
	}
	f.mu.Unlock()
	var err error
	if fc.start == (ucxx.CUDAEvent{}) {
		fc.start, err = g.d.NewEvent(false)
	}
	for err == nil && len(fc.ends) < lanes {
		var e ucxx.CUDAEvent
		if e, err = g.d.NewEvent(false); err == nil {
			fc.ends = append(fc.ends, e)
		}
	}
	if err != nil {
		f.mu.Lock()
		f.spare = append(f.spare, fc)
		f.mu.Unlock()
		return nil, err
	}
	fc.n, fc.started = lanes, time.Time{}
	return fc, nil
}

// fly puts a queued call in flight: the caller's streams wait for its lanes' ends,
// and the watcher watches it. After a failure of another call in flight the call's
// counters are released too (its waits must not hold a stream) and the failure is
// its error. Call it with the context current.
func (g *gpuState) fly(fc *flightCall, ctx *planContext, callerStreams []uintptr) error {
	var err error
	for _, s := range callerStreams {
		for _, e := range fc.ends[:fc.n] {
			if err == nil {
				err = g.d.StreamWaitEvent(s, e)
			}
		}
	}
	fc.ctx = ctx
	fc.streams = append(fc.streams[:0], callerStreams...)
	if err != nil {
		err = fmt.Errorf("executor: order the caller's stream after the call: %w", err)
	}
	f := &g.flight
	f.mu.Lock()
	f.calls = append(f.calls, fc)
	if f.err != nil {
		releaseOwnCounters(ctx)
		err = f.err
	}
	start := !f.watching && !f.closed
	if start {
		f.watching = true
	}
	f.mu.Unlock()
	if start {
		go g.watch()
	}
	return err
}

// watch polls the calls in flight until none is (or the executor closes). Only the
// watcher ends its watch: a settle that empties the flight while it sleeps leaves
// it to see so, so that a call flown meanwhile never starts a second one.
func (g *gpuState) watch() {
	f := &g.flight
	for {
		g.pollFlight()
		f.mu.Lock()
		if len(f.calls) == 0 || f.closed {
			f.watching = false
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		time.Sleep(flightPollPause)
	}
}

// pollFlight retires the calls in flight that ended, oldest first, checks the
// oldest still running against its ranks' lives and the timeout (failing it:
// failFlight), and returns how many remain (0 once the executor closed).
func (g *gpuState) pollFlight() int {
	f := &g.flight
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0
	}
	for len(f.calls) > 0 {
		fc := f.calls[0]
		done, err := g.ended(fc)
		if err != nil {
			g.failFlight(err)
			done = true // a device error: nothing of it will end better
		}
		if !done {
			if err := g.checkFlight(fc); err != nil {
				g.failFlight(err)
			}
			break
		}
		f.calls[0] = nil
		f.calls = f.calls[1:]
		fc.ctx = nil
		f.spare = append(f.spare, fc)
	}
	if len(f.calls) == 0 {
		f.calls = f.calls[:0:0]
	}
	return len(f.calls)
}

// ended reports whether every lane of fc ended, and notes when it is first seen
// started.
func (g *gpuState) ended(fc *flightCall) (bool, error) {
	var done bool
	err := g.cctx.Use(func() (err error) {
		if done, err = ucxx.EventsDone(fc.ends[:fc.n]); err != nil {
			return err
		}
		if !done && fc.started.IsZero() {
			ok, err := fc.start.Done()
			if err != nil {
				return err
			}
			if ok {
				fc.started = time.Now()
			}
		}
		return nil
	})
	return done, err
}

// checkFlight fails a call still running one of whose ranks died, or that started
// more than the timeout ago.
func (g *gpuState) checkFlight(fc *flightCall) error {
	for _, q := range fc.ctx.connected {
		if g.flight.alive != nil && !g.flight.alive(q) {
			return &RankError{Rank: q, Op: "a stream-ordered call", Err: fmt.Errorf("the rank's process ended: %w", ErrRankFailed)}
		}
	}
	if !fc.started.IsZero() && time.Since(fc.started) > g.flight.timeout {
		return &RankError{Rank: -1, Op: "a stream-ordered call", Err: fmt.Errorf("its lanes did not finish within %v of starting: %w", g.flight.timeout, ErrTimeout)}
	}
	return nil
}

// failFlight records the first failure and releases this rank's counters of every
// call in flight, so that none of their waits holds a stream; g.flight.mu is held.
func (g *gpuState) failFlight(err error) {
	f := &g.flight
	if f.err != nil {
		return // released at the first; a call joining later releases its own (fly)
	}
	f.err, f.failedAt = err, time.Now()
	for _, fc := range f.calls {
		if fc.ctx != nil {
			releaseOwnCounters(fc.ctx)
		}
	}
}

// settle waits until no ordered call is in flight (the host waits for the device),
// and returns the first failure of one.
func (g *gpuState) settle() error { return g.settleUntil(0, time.Time{}) }

// settleUntil waits until at most left ordered calls are in flight, or until (zero:
// no bound), polling without sleeping for the first drainSpin, then every
// drainPause. Once flightGrace has passed since a failure (its counters released,
// the calls' streams normally end at once) it returns: a stream held by something
// else (the caller's own work) must not hold the host too.
func (g *gpuState) settleUntil(left int, until time.Time) error {
	start := time.Now()
	for g.pollFlight() > left {
		if g.flight.pastGrace() || (!until.IsZero() && time.Now().After(until)) {
			break
		}
		if time.Since(start) < drainSpin {
			pause.Yield()
			continue
		}
		pause.For(drainPause)
	}
	return g.flight.failure()
}

// pastGrace reports whether a failure was found more than flightGrace ago.
func (f *flight) pastGrace() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err != nil && time.Since(f.failedAt) > flightGrace
}

// flightGrace is how long settling waits for calls in flight to end after a failure.
const flightGrace = time.Second

// releaseOwnCounters lets every stream wait on this rank's counters of ctx through
// (every word of every counter): after a failure, nothing must stay blocked on the
// device. Once a context: the device compares the words as signed differences
// (cuStreamWaitValue64's GEQ), which a third 2^62 would turn negative again.
func releaseOwnCounters(ctx *planContext) {
	if !ctx.released.CompareAndSwap(false, true) {
		return
	}
	for k := range ctx.expected {
		for b := range maxSlices {
			w := ctx.counter(ctx.rank, uint64(k), ctx.rank).at(b)
			w.store(w.load() + 1<<62)
		}
	}
}

// Synchronize waits until every stream-ordered call made so far has ended on the
// device, and returns the first failure one of them met (a *RankError wrapping
// ErrRankFailed or ErrTimeout, or the device's error), or ErrBroken when an earlier
// call broke the executor. Without ordered calls it returns at once.
func (x *Executor) Synchronize() error {
	x.lockInTurn()
	defer x.release()
	return x.synchronize()
}

// StartSynchronize is Synchronize in the order of the operations made so far, from a
// caller that must not wait (an event loop): its turn is taken here, and what
// remains (the wait) is rest, for another goroutine, exactly once.
func (x *Executor) StartSynchronize() (rest func() error) { return x.later(x.synchronize) }

// synchronize is Synchronize's wait; x.mu is held.
func (x *Executor) synchronize() error {
	if x.closed {
		return ErrClosed
	}
	if x.gpu != nil {
		if err := x.gpu.settle(); err != nil {
			return err
		}
	}
	if x.broken != nil {
		return fmt.Errorf("%w: %v", ErrBroken, x.broken)
	}
	return nil
}
