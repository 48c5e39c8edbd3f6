// Package core is ucxx-go's progress engine: one UCP worker driven by one goroutine
// locked to its OS thread, which makes every ucp_* call on that worker. Application
// threads never touch UCX: they queue submissions into the delayed-submission pool and
// read completions from a notifier.Queue.
//
// An Engine knows nothing of Python. Request ids it returns are reported back in the
// queue's completions; endpoint and listener events use the Event* id spaces.
package core

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/notifier"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// ProgressMode selects how the progress thread waits for work.
type ProgressMode int

const (
	// Blocking arms the worker and sleeps in epoll on its event fd and the wake
	// eventfd: an idle engine costs no CPU. The default.
	Blocking ProgressMode = iota
	// Polling spins on ucp_worker_progress: lowest latency, one core kept busy.
	Polling
	// Loop has no progress thread: the thread that calls New owns the worker, makes
	// every ucp_* call inline in its own calls and in Progress, which it calls when
	// PollFD is readable (an event loop's reader). For processes with fewer cores than
	// busy threads, where a hand-off to a progress thread costs a context switch (see
	// loop.go and docs/progress-modes.md).
	Loop
)

// Options configure an Engine. The zero value is usable: blocking progress, delayed
// submission on, UCX's configuration from the environment over UCXDefaults
// (LoopUCXDefaults in Loop mode).
type Options struct {
	UCXOptions          map[string]string // UCX settings without the UCX_ prefix, e.g. {"TLS": "tcp"}; they win over the environment and UCXDefaults (LoopUCXDefaults)
	Mode                ProgressMode
	NoDelayedSubmission bool // dispatch each submission before the call returns
	QueueCapacity       int  // completion ring entries; default 65536
	// SpinBeforeSleep is how long a blocking-mode progress thread keeps polling after
	// its last work before it arms the worker and sleeps, so a reply arriving within
	// it costs no wake-up. The spin yields the CPU between polls (sched_yield): a
	// thread sharing the CPU, the application's or the peer's, still runs. 0: off.
	// (Why: benchmarks/design-notes.md.)
	SpinBeforeSleep time.Duration
	// QuietAfter: a progress thread that has done no work for this long sleeps in a
	// blocking system call rather than the raw one it uses otherwise, so that the Go
	// runtime stops interrupting an idle process's wait with preemption signals; its
	// next wake-up pays for taking a P back. 0: always the raw wait. (Why:
	// benchmarks/design-notes.md.)
	QuietAfter time.Duration
	// CUDADevice is the device a multi-buffer receive allocates CUDA frames on until
	// the application has submitted a CUDA buffer (then: that buffer's device).
	CUDADevice int
	// NoGPUAffinity keeps the progress thread off the CPUs near the GPU it drives
	// (by default it is pinned to them when it first makes a CUDA context current).
	NoGPUAffinity bool
	// InlineWait is how long TagSendInline and TagRecvInline wait for their operation
	// to end before leaving its completion to the queue (see inline.go). 0: no wait.
	InlineWait time.Duration
	// KeepaliveTimeout is how long an endpoint with peer error handling may hear
	// nothing from its peer before it fails with StatusTimedOut (keepalive.go); a
	// keepalive goes out every third of it. Default DefaultKeepaliveTimeout; negative:
	// off.
	KeepaliveTimeout time.Duration
	// MaxUnexpectedBytes bounds, per endpoint, the messages it sent that no receive
	// (or am_recv) was posted for (unexpected.go, am.go); an endpoint over it fails
	// with StatusExceedsLimit. Its peer's sends are paced to stay under half of it
	// (flowcontrol.go). Messages that name no endpoint share one such bound. Default
	// DefaultMaxUnexpectedBytes.
	MaxUnexpectedBytes int64
	// CaptureUCXLog routes UCX's log into ucxx's buffer (ucxx.CaptureLog) instead of
	// stdout, and has each record set the queue's log word and wake its consumer,
	// which takes them with ucxx.TakeLog. For one engine per process.
	CaptureUCXLog bool
	// Limits bound what a peer may announce in a multi-buffer message.
	Limits Limits
	// MaxOutstandingBytes bounds the bytes of multi-buffer messages being received at
	// once; a message waits for room. Default 16 GiB.
	MaxOutstandingBytes int64
	// MaxEndpointOutstandingBytes bounds, per endpoint, the bytes of its multi-buffer
	// messages being received at once, so that one peer can hold at most this part of
	// MaxOutstandingBytes; a message larger than it is rejected (ExceedsLimit), one
	// that does not fit yet waits. Default half of MaxOutstandingBytes.
	MaxEndpointOutstandingBytes int64
	// WarmUp, a local IP address (e.g. "127.0.0.1"), has the engine warm up through
	// it as soon as it has started, in the background (see Engine.WarmUp). "": no
	// warm-up.
	WarmUp string
	// OneSided turns on one-sided transfers: UCX's remote memory access in the
	// engine's context (ucxx.FeatureRMA), PackRegion, UnpackKey, Put, Get, PutMany,
	// NewSemaphore and Signal, which fail with ErrOneSidedOff without it. Off by
	// default because UCX serves the puts and gets of a context with RMA that go by its
	// software emulation (over TCP, for one) at any address the peer names, checked
	// against no key: with it on, every peer with an endpoint to this engine can read
	// and write any of the process's memory (README, "What UCX itself trusts", which
	// also says what stays open without it). Both ends of a one-sided transfer need it.
	OneSided bool
}

// DefaultMaxOutstandingBytes is the default Options.MaxOutstandingBytes.
const DefaultMaxOutstandingBytes = 16 << 30

// Event id spaces: completions whose ID has one of these bits set are events, the
// rest of the ID naming the endpoint or listener.
const (
	// EventEndpointError: the endpoint failed (Status says why) or its peer went away.
	EventEndpointError uint64 = 1 << 63
	// EventListenerAccept: a connection to the listener completed its handshake;
	// Length is the new endpoint's handle (Status is 0).
	EventListenerAccept uint64 = 1 << 62
	eventMask                  = EventEndpointError | EventListenerAccept
)

// Engine is a UCP context and worker with their progress thread.
type Engine struct {
	// progressThread: worker, requests, endpoints and pending completions, shared by
	// the components below (thread.go).
	progressThread

	opts             Options
	queue            *notifier.Queue
	pool             pool
	inlineWorkerRecv inlineBudget // receives on no endpoint (ep 0)

	nextHandle atomic.Uint64 // endpoint and listener handles, from 1
	closing    atomic.Bool
	done       chan struct{} // closed when the progress thread has exited
	// freeQueueOnce: FreeQueue's release, once (a late one may race the first's goroutine).
	freeQueueOnce sync.Once

	// Components, owned by the progress thread.
	cuda  cudaGate       // CUDA contexts and stream-gated submissions (cuda.go)
	multi multiBuffers   // multi-buffer messages (multi*.go)
	am    activeMessages // active messages (am.go)
	rma   oneSided       // one-sided transfers and semaphores (rma.go)
	ka    keepalive      // keepalive schedule (keepalive.go)
	warm  warmUp         // protocol selection ahead of the first connection (warmup.go)

	// Owned by the progress thread.
	ctx            *ucxx.Context
	listeners      map[uint64]*listener
	address        []byte       // the worker's address, once a hello needed it (direct.go)
	networkAddress []byte       // the same of its network transports only (Worker.NetworkAddress)
	conns          sockets      // connection sockets (direct.go): not the thread's, it locks
	dialing        dialing      // connections being made (dialing.go)
	events         []ucxx.Event // scratch copy of the worker's events
	spare          []submission
	probed         map[uint64]unsafe.Pointer // handle -> message TagProbe removed
	epfd           int
	worked         bool      // the last pass did work: spin before sleeping (progress.go)
	lastWork       time.Time // when a pass last did work: long quiet sleeps block (progress.go)
	stopping       bool
	stopDone       chan error
	stopBy         time.Time

	// Loop mode (loop.go): the owner's thread id, the timer that wakes it for the next
	// deadline and when that is, and whether the engine stopped.
	owner    atomic.Int32
	timer    *time.Timer
	timerAt  time.Time
	loopDone bool
	// inProgress: the owner is in Progress, whose caller drains the queue when it
	// returns: completions pushed meanwhile need no wake-up (loop mode).
	inProgress bool
	timerMu    sync.Mutex // guards timerOff against the timer's callback
	timerOff   bool       // the wake eventfd is closed: the timer must not kick it

	// unpaced: tests set it before any connection, to send as a flooding peer would,
	// ignoring its peers' flow control (flowcontrol.go).
	unpaced bool
	// namedChunk: tests set it before any connection to name this flow-control chunk
	// (its base-2 logarithm) in the handshakes instead of the engine's own, as a peer
	// that lies would (0: the engine's own).
	namedChunk uint8
}

// New creates the context and worker on a new progress thread and starts it.
//
// Errors: the *ucxx.Error of context or worker creation (an unknown UCX option, say),
// or a system error creating the queue or eventfds.
func New(opts Options) (*Engine, error) {
	if opts.QueueCapacity == 0 {
		opts.QueueCapacity = 1 << 16
	}
	if opts.MaxOutstandingBytes <= 0 {
		opts.MaxOutstandingBytes = DefaultMaxOutstandingBytes
	}
	if opts.MaxEndpointOutstandingBytes <= 0 {
		opts.MaxEndpointOutstandingBytes = max(opts.MaxOutstandingBytes/2, 1)
	}
	opts.MaxEndpointOutstandingBytes = min(opts.MaxEndpointOutstandingBytes, opts.MaxOutstandingBytes)
	opts.Limits = opts.Limits.withDefaults()

	q, err := notifier.New(opts.QueueCapacity)
	if err != nil {
		return nil, err
	}
	wakeFD, err := notifier.NewEventFD()
	if err != nil {
		q.Free()
		return nil, err
	}
	e := &Engine{
		opts:      opts,
		queue:     q,
		pool:      pool{wakeFD: wakeFD},
		done:      make(chan struct{}),
		listeners: make(map[uint64]*listener),
		probed:    make(map[uint64]unsafe.Pointer),
		epfd:      -1,
		dialing:   dialing{epfd: -1},
	}
	e.requests = newRequestTable()
	e.routes = make(map[uint64]*Sink)
	if opts.MaxUnexpectedBytes <= 0 {
		opts.MaxUnexpectedBytes = DefaultMaxUnexpectedBytes
	}
	e.unexpected.max = opts.MaxUnexpectedBytes
	e.eps = newEndpointTable()
	e.inline.init()
	e.cuda = cudaGate{post: e.post, defaultDevice: opts.CUDADevice, noAffinity: opts.NoGPUAffinity}
	e.multi = multiBuffers{
		progressThread: &e.progressThread,
		cuda:           &e.cuda,
		limits:         opts.Limits,
		admission:      newAdmission(opts.MaxOutstandingBytes, opts.MaxEndpointOutstandingBytes),
		multiRecv:      make(map[multiKey]*multiQueue),
		awaiting:       make(map[uint64]*multiOp),
	}
	e.am = activeMessages{progressThread: &e.progressThread}
	if opts.KeepaliveTimeout == 0 {
		opts.KeepaliveTimeout = DefaultKeepaliveTimeout
	}
	quarantine := newQuarantinedPages(cudaCounterPages{}, quarantineAge(opts.KeepaliveTimeout))
	e.rma = oneSided{
		progressThread: &e.progressThread,
		regions:        make(map[uint64]*region),
		remotes:        make(map[uint64]*remoteKey),
		sems:           make(map[uint64]*localSemaphore),
		counters:       quarantine,
		quarantine:     quarantine,
	}
	if opts.KeepaliveTimeout > 0 {
		e.ka = keepalive{timeout: opts.KeepaliveTimeout, interval: opts.KeepaliveTimeout / 3}
	}
	if opts.CaptureUCXLog {
		ucxx.CaptureLog() // before the context: its own messages are captured too
		ucxx.NotifyLog(q.LogFlag(), q.FD())
	}
	if opts.Mode == Loop {
		if err := e.startLoop(); err != nil {
			e.closeWake()
			e.FreeQueue()
			return nil, err
		}
		return e, nil
	}
	reserveP()
	started := make(chan error, 1)
	go e.run(started)
	if err := <-started; err != nil {
		<-e.done
		e.closeWake()
		e.FreeQueue()
		return nil, err
	}
	return e, nil
}

// Queue is the completion queue the application reads.
func (e *Engine) Queue() *notifier.Queue { return e.queue }

// DelayedSubmission reports whether submissions are batched by the progress thread.
func (e *Engine) DelayedSubmission() bool { return !e.opts.NoDelayedSubmission }

// Mode reports the progress mode.
func (e *Engine) Mode() ProgressMode { return e.opts.Mode }

func (e *Engine) submit(s submission) error {
	if e.closing.Load() {
		return ErrEngineClosed
	}
	if e.loopOwner() {
		e.ownerSubmit(s)
		return nil
	}
	if e.opts.NoDelayedSubmission && s.op != opCall {
		s.posted = make(chan bool)
		if !e.pool.push(s) {
			return ErrEngineClosed
		}
		select {
		case <-s.posted:
		case <-e.done:
		}
		return nil
	}
	if !e.pool.push(s) {
		return ErrEngineClosed // the stop began after the check above, and has ended
	}
	return nil
}

// onThreadPoll is how long onThread polls for its call to have run before it blocks.
const onThreadPoll = 200 * time.Microsecond

// onThread runs f on the progress thread and waits for it: for setup and teardown
// calls that must touch UCX (listeners, queries), never for data transfers.
func (e *Engine) onThread(f func()) error {
	if e.loopOwner() {
		if e.closing.Load() {
			return ErrEngineClosed
		}
		e.ownerRun(f)
		return nil
	}
	ran := make(chan struct{})
	var done atomic.Bool
	if err := e.submit(submission{op: opCall, call: func() { f(); done.Store(true); close(ran) }}); err != nil {
		return err
	}
	// Wait by polling first: a goroutine parked on the channel takes the runtime
	// longer to wake (~100 us on a VM) than most calls take.
	for deadline := time.Now().Add(onThreadPoll); !done.Load() && time.Now().Before(deadline); {
		yieldCPU()
	}
	select {
	case <-ran:
		return nil
	case <-e.done:
		select {
		case <-ran:
			return nil
		default:
			return ErrEngineClosed
		}
	}
}

func (t *progressThread) newID() uint64 { return t.nextID.Add(1) }

// TagSend queues a send of size bytes at addr with tag on endpoint ep and returns the
// request id its completion will carry. The memory must stay valid until then. A CUDA
// buffer (memType ucxx.MemoryCUDA) is sent once the work queued on stream before the
// call is done (0: no wait; see cuda.go).
//
// Errors: ErrEngineClosed, ErrEndpointClosed, or the endpoint's failure as *ucxx.Error;
// for a CUDA buffer, also ErrNotCUDA, ucxx.ErrNoCUDA or a *ucxx.CUDAError recording
// the stream's event.
func (e *Engine) TagSend(ep uint64, addr uintptr, size uint64, tag uint64, memType int, stream uintptr) (uint64, error) {
	t, err := e.tagSend(ep, addr, size, tag, memType, stream, false, nil)
	return t.ID, err
}

// TagSendInline is TagSend, waiting up to Options.InlineWait for the send to end
// (an eager send usually does): then the Ticket is Done and no completion is queued.
//
// Errors: as TagSend.
func (e *Engine) TagSendInline(ep uint64, addr uintptr, size uint64, tag uint64, memType int, stream uintptr) (Ticket, error) {
	return e.tagSend(ep, addr, size, tag, memType, stream, true, nil)
}

func (e *Engine) tagSend(ep uint64, addr uintptr, size uint64, tag uint64, memType int, stream uintptr, inline bool, sink *Sink) (Ticket, error) {
	live, err := e.eps.live(ep)
	if err != nil {
		return Ticket{}, err
	}
	s := submission{op: opTagSend, id: e.newID(), ep: ep, addr: addr, size: size, tag: tag, memType: memType, sink: sink}
	if err := s.addCUDA(stream); err != nil {
		return Ticket{}, err
	}
	return e.submitTransfer(s, live.sendBudget(inline))
}

// TagRecv queues a receive into size bytes at addr of the next message matching tag
// under mask. ep ties the receive to an endpoint (0 for none): it fails when that
// endpoint fails or closes. A CUDA buffer is written once the work queued on stream
// before the call is done, as for TagSend.
//
// Errors: as TagSend.
func (e *Engine) TagRecv(ep uint64, addr uintptr, size uint64, tag, mask uint64, memType int, stream uintptr) (uint64, error) {
	t, err := e.tagRecv(ep, addr, size, tag, mask, memType, stream, false, nil)
	return t.ID, err
}

// TagRecvInline is TagRecv, waiting up to Options.InlineWait for the receive to end
// (it does when the message is already there): then the Ticket is Done, its Length
// the message's, and no completion is queued.
func (e *Engine) TagRecvInline(ep uint64, addr uintptr, size uint64, tag, mask uint64, memType int, stream uintptr) (Ticket, error) {
	return e.tagRecv(ep, addr, size, tag, mask, memType, stream, true, nil)
}

func (e *Engine) tagRecv(ep uint64, addr uintptr, size uint64, tag, mask uint64, memType int, stream uintptr, inline bool, sink *Sink) (Ticket, error) {
	// No liveness check here: a receive on an endpoint its peer broke may still take a
	// message that arrived before, and only the progress thread can see that.
	if e.closing.Load() {
		return Ticket{}, ErrEngineClosed
	}
	s := submission{op: opTagRecv, id: e.newID(), ep: ep, addr: addr, size: size, tag: tag, mask: mask, memType: memType, sink: sink}
	if err := s.addCUDA(stream); err != nil {
		return Ticket{}, err
	}
	var budget *inlineBudget
	if inline {
		budget = &e.inlineWorkerRecv
		budget = e.eps.recvBudget(ep, budget)
	}
	return e.submitTransfer(s, budget)
}

// Cancel asks for request id to be cancelled. It completes with StatusCanceled, or
// normally if it finished first; either way exactly one completion is reported.
func (e *Engine) Cancel(id uint64) error { return e.submit(submission{op: opCancel, id: id}) }

// EndpointOptions configure an endpoint when it is created. The zero value is what
// Connect, Listen and ConnectAddress use: peer error handling on.
type EndpointOptions struct {
	// NoErrorHandling creates the endpoint without error handling
	// (UCP_ERR_HANDLING_MODE_NONE), as UCXX's endpoint_error_handling=False. UCX may
	// then carry the data over shared memory (posix, sysv, cma) between processes on
	// one host, which peer error handling rules out. The cost: a peer that closes or
	// dies is not detected. No EventEndpointError is reported; receives on the
	// endpoint wait until they are cancelled or the endpoint is closed or aborted
	// (both still end on time, and always force-close in UCX), and a rendezvous send
	// the peer never receives stays in flight even after the close, since UCX tracks
	// no request of such an endpoint. Both sides of a connection should use the same
	// setting.
	NoErrorHandling bool
	// Via says how a connection through a listener is made (direct.go): UCX's
	// connection manager, or worker addresses exchanged over a socket of the
	// engine's own. Both sides must make it the same way.
	Via ConnectVia
	// OwnTag gives an endpoint made from a worker address (ConnectAddressWith) a
	// receive tag of its own, as a connected endpoint has (EndpointInfo.RecvTag,
	// tags.go): messages whose tags carry its id are its own, held for it and
	// charged to it (unexpected.go). The peer has to be told the tag. Without it
	// such an endpoint's tags are 0.
	OwnTag bool
}

// errHandling is the UCX error handling mode the options ask for.
func (o EndpointOptions) errHandling() ucxx.ErrHandling {
	if o.NoErrorHandling {
		return ucxx.ErrHandlingNone
	}
	return ucxx.ErrHandlingPeer
}

// Connect queues a connection to a listener at ip:port and returns the request id.
// Its completion's Length is the new endpoint's handle once the connection and the
// tag handshake succeed, or it fails (StatusTimedOut after timeout). The endpoint has
// peer error handling; see ConnectWith.
func (e *Engine) Connect(ip string, port int, timeout time.Duration) (uint64, error) {
	return e.ConnectWith(ip, port, timeout, EndpointOptions{})
}

// ConnectWith is Connect with endpoint options. The listener's side should have been
// made with the same options (ListenWith). A connection through a listener needs tcp
// in UCX_TLS whatever the options (UCX's connection manager connects from an enabled
// network device; with UCX_TLS=sm,self the connect fails with StatusUnreachable).
// Without error handling a failed connection is still reported with UCX's status,
// through the tag handshake's operations, and the timeout remains the backstop.
//
// Errors: *ucxx.Error with StatusInvalidParam for a port out of range,
// ErrEngineClosed.
func (e *Engine) ConnectWith(ip string, port int, timeout time.Duration, opts EndpointOptions) (uint64, error) {
	if port <= 0 || port > 65535 {
		return 0, &ucxx.Error{Op: "Connect", Status: ucxx.StatusInvalidParam}
	}
	id := e.newID()
	return id, e.submit(submission{op: opConnect, id: id, text: ip, port: port, timeout: int64(timeout), epOpts: opts})
}

// CloseEndpoint queues a graceful close: pending receives are cancelled, sends are
// flushed, and the completion comes within timeout whatever the peer does.
func (e *Engine) CloseEndpoint(ep uint64, timeout time.Duration) (uint64, error) {
	id := e.newID()
	return id, e.submit(submission{op: opCloseEndpoint, id: id, ep: ep, timeout: int64(timeout)})
}

// ReleaseEndpoint closes an endpoint the application dropped, gracefully and in the
// background, as CloseEndpoint with the given timeout: what was sent is still
// delivered (sends in flight are flushed first), pending receives are cancelled. It
// reports no completion of its own.
func (e *Engine) ReleaseEndpoint(ep uint64, timeout time.Duration) error {
	return e.submit(submission{op: opCloseEndpoint, ep: ep, timeout: int64(timeout)})
}

// AbortEndpoint closes an endpoint at once: everything in flight on it fails with
// StatusCanceled. It reports no completion of its own.
func (e *Engine) AbortEndpoint(ep uint64) error {
	return e.submit(submission{op: opAbortEndpoint, ep: ep})
}

// EndpointStatus is the status that ended endpoint h as the progress thread last
// set it, without waiting for it: StatusOK while it is usable (the peer has not gone
// away and it was not closed), StatusCanceled once closed, aborted or unknown, else
// the failure (the same as its EventEndpointError completion reports). Application
// threads may call it at any time.
func (e *Engine) EndpointStatus(h uint64) ucxx.Status { return e.eps.status(h) }

// EndpointInfo describes a connected endpoint: the tag its messages are sent with, the
// tag it receives on, and the local and remote socket addresses. An endpoint its peer
// broke before the application asked (all of a connection can end before the
// connecting coroutine resumes) still has its tags, for receives that drain what the
// peer sent; its addresses and UCX handle are gone.
//
// A published endpoint's description is read without waiting for the progress thread
// (a connection's first call: the connecting coroutine and the listener's callback
// make it as they resume).
//
// Errors: ErrEndpointClosed for an unknown handle or one the application closed.
func (e *Engine) EndpointInfo(h uint64) (info EndpointInfo, err error) {
	if e.closing.Load() {
		return EndpointInfo{}, ErrEngineClosed
	}
	if info, ok := e.eps.publishedInfo(h); ok {
		return info, nil
	}
	if cerr := e.onThread(func() {
		if ep := e.eps.get(h); ep != nil {
			info = ep.describe()
			return
		}
		d, dead := e.eps.deadInfo(h)
		if !dead {
			err = ErrEndpointClosed
			return
		}
		info = EndpointInfo{SendTag: d.sendTag, RecvTag: d.recvTag}
	}); cerr != nil {
		return EndpointInfo{}, cerr
	}
	return info, err
}

// EndpointInfo is what EndpointInfo reports.
type EndpointInfo struct {
	SendTag, RecvTag uint64
	Local, Remote    string
	UCPHandle        uintptr // UCX's ucp_ep_h, as a number (ucxx.Endpoint.Handle)
}

// WorkerHandle is UCX's ucp_worker_h of the engine's worker, as a number
// (ucxx.Worker.Handle).
func (e *Engine) WorkerHandle() uintptr { return e.worker.Handle() }

// Listen starts a listener on ip:port (port 0: any free port) and returns its handle
// and port. Accepted connections are reported as EventListenerAccept completions.
// Accepted endpoints have peer error handling; see ListenWith.
func (e *Engine) Listen(ip string, port int) (handle uint64, boundPort int, err error) {
	return e.ListenWith(ip, port, EndpointOptions{})
}

// ListenWith is Listen with the options every endpoint it accepts is created with.
// Clients should connect with the same options (ConnectWith).
func (e *Engine) ListenWith(ip string, port int, opts EndpointOptions) (handle uint64, boundPort int, err error) {
	handle = e.nextHandle.Add(1)
	if cerr := e.onThread(func() { boundPort, err = e.listen(handle, ip, port, opts) }); cerr != nil {
		return 0, 0, cerr
	}
	return handle, boundPort, err
}

// CloseListener stops a listener; connections it already accepted stay open.
func (e *Engine) CloseListener(handle uint64) error {
	var err error
	if cerr := e.onThread(func() { err = e.closeListener(handle) }); cerr != nil {
		return cerr
	}
	return err
}

// WorkerAddress returns the worker's packed UCX address.
func (e *Engine) WorkerAddress() (addr []byte, err error) {
	if cerr := e.onThread(func() { addr, err = e.worker.Address() }); cerr != nil {
		return nil, cerr
	}
	return addr, err
}

// Stats are counters for tests and diagnosis.
type Stats struct {
	// InFlight counts the requests in flight, besides the control receive and
	// keepalives of each connection that is up (control.go).
	InFlight, Endpoints, Listeners int
	// UnexpectedBytes: the charge of the held unexpected messages, tag and active
	// (unexpected.go, am.go); StalledSends: sends flow control holds back
	// (flowcontrol.go).
	UnexpectedBytes int64
	StalledSends    int
}

// Stats returns the engine's counters, read on the progress thread.
func (e *Engine) Stats() (s Stats, err error) {
	err = e.onThread(func() {
		inFlight := 0
		for _, r := range e.requests.byID {
			if r.op != opControl || r.ep.phase >= phaseClosing {
				inFlight++
			}
		}
		held := e.unexpected.bytes()
		for _, ep := range e.eps.byHandle {
			held += ep.mailbox.charge
		}
		s = Stats{InFlight: inFlight, Endpoints: e.eps.len(), Listeners: len(e.listeners),
			UnexpectedBytes: held, StalledSends: len(e.stalledAt)}
	})
	return s, err
}

// ErrShutdownTimeout: Shutdown gave up waiting; the progress thread is left to finish.
var ErrShutdownTimeout = errors.New("core: shutdown did not finish in time")

// Shutdown stops accepting work, aborts every endpoint and listener, waits (up to
// timeout) for requests in flight to end, destroys the worker and context, and closes
// the queue so its consumer wakes with notifier.Closed. The queue's memory stays valid
// until FreeQueue.
func (e *Engine) Shutdown(timeout time.Duration) error {
	stopped := make(chan error, 1)
	if !e.closing.CompareAndSwap(false, true) {
		return ErrEngineClosed
	}
	if e.loopOwner() {
		return e.ownerShutdown(timeout)
	}
	if e.opts.Mode == Loop && e.ownerGone() {
		return e.orphanShutdown(timeout)
	}
	e.pool.push(submission{op: opCall, call: func() { e.beginStop(time.Now().Add(timeout), stopped) }})
	select {
	case err := <-stopped:
		<-e.done
		e.closeWake()
		return err
	case <-time.After(timeout + time.Second):
		go func() { <-e.done; e.closeWake() }()
		return ErrShutdownTimeout
	}
}

// FreeQueue releases the completion queue after Shutdown, once its consumer stopped,
// and with it what completions reported that the consumer might still have read (the
// blocks of receives dropped at shutdown while waiting for their frames). After a
// Shutdown that gave up (ErrShutdownTimeout) the progress thread may still push
// completions into the ring: they are released when that thread has exited.
func (e *Engine) FreeQueue() {
	if e.opts.CaptureUCXLog {
		ucxx.NotifyLog(nil, -1)
	}
	release := func() {
		e.freeQueueOnce.Do(func() {
			e.multi.freeReported()
			e.queue.Free()
		})
	}
	select {
	case <-e.done:
		release()
	default:
		go func() { <-e.done; release() }()
	}
}
