package executor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ucxx-go/ucxx-go/core/internal/pause"
	"github.com/ucxx-go/ucxx-go/core/plan"
	"github.com/ucxx-go/ucxx-go/core/reduce"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Buffer is one of a call's buffers: an address in this process and a size.
type Buffer struct {
	Addr  uintptr
	Bytes uint64
}

// Call is one execution of a plan, MSCCL++'s Executor::execute: the send and
// receive buffers (aliasing as the plan's in-place convention says, or not at all),
// the element type of reductions and their operator.
type Call struct {
	Plan       *plan.Plan
	Send, Recv Buffer
	DType      reduce.DType
	// Op is every reduction's operator; 0 keeps each op's own reduce_op (MSCCL++
	// 0.9 ignores reduce_op and always sums).
	Op reduce.Op
	// Describe is the caller's description of the call (the collective, its root),
	// mixed into the fingerprint the ranks compare.
	Describe uint64
	// Memory is where both buffers are: host memory, or device memory of one GPU.
	Memory Memory
	// Streams hold work that writes the device buffers: the call waits for what
	// they hold when it is made before it reads them (0s are skipped).
	Streams []uintptr
	// Blocks are this rank's blocks for a plan with per-call blocks (alltoallv):
	// block j of the send and receive buffers, in bytes. Every rank's send length
	// to j must equal j's receive length from it (the ranks check all pairs).
	Blocks *Blocks
	// Patience is how long Start may wait, here on the caller's goroutine, for the
	// other ranks to announce the call before it hands back the remainder: ranks that
	// arrive a little apart then run the call without a hop to another thread.
	// Execute ignores it.
	Patience time.Duration
	// Sliced asks that a device call run its GPU lanes as sliced programs
	// (slices.go): granted where the plan allows it at the call's sizes.
	Sliced bool
	// ProgramWaits asks that a device call too large to run whole as programs, and
	// not sliced, record only its signals and waits into its lanes' programs: a wait
	// then spins in a kernel and sees its signal within µs, where a stream's wait
	// sees it tens of µs late, while the copies stay on the copy engines and the
	// reductions are kernels queued between the programs (program.go).
	ProgramWaits bool
	// Ordered asks that a device call be stream-ordered (ordered.go), as NCCL's are:
	// queued after the work its Streams hold and before the work they get next,
	// returning once queued. Its failures on the device come back from a later call
	// or Synchronize. Ignored for host memory, for buffers without a stream and on
	// the per-thread default stream (the call returns once done).
	Ordered bool
}

// bufferAddr is an address in the call's buffers: the send buffer's, or the
// receive buffer's when the send buffer is empty (0 when both are).
func (c *Call) bufferAddr() uintptr {
	if c.Send.Bytes == 0 {
		return c.Recv.Addr
	}
	return c.Send.Addr
}

// Blocks are a rank's per-call blocks: offsets and lengths, one per rank, in bytes.
type Blocks struct {
	SendOffsets, SendLengths, RecvOffsets, RecvLengths []uint64
}

// Slot statuses.
const (
	slotOK     = 0
	slotFailed = 1 // the rank's call failed its own checks
)

// Execute runs c's plan with the other ranks, which make the same call; it returns
// once this rank's part is done (its lanes ended; what peers write into its buffers
// has landed, as the plan's waits say), or, for a stream-ordered call (c.Ordered),
// once it is queued on the device (ordered.go).
//
// Before any byte moves every rank announces the call (a fingerprint of the plan,
// sizes, type, operator and description) and checks everyone's: calls that differ,
// or a rank whose call failed its own checks, fail every rank with ErrMismatch and
// leave the executor usable.
//
// Errors: ErrClosed; ErrBroken after an earlier failure part-way; core/plan's
// errors (ErrMessageSize, ErrBuffers) for a call the plan does not fit; ErrMismatch;
// a *RankError wrapping ErrRankFailed (a rank died) or ErrTimeout; ErrUnsupported
// (ranks on several hosts, packet or multicast ops, GPU memory).
func (x *Executor) Execute(c Call) error {
	x.lockInTurn()
	defer x.release()
	return x.execute(c)
}

// execute is Execute's call; x.mu is held.
func (x *Executor) execute(c Call) error {
	st, err := x.begin(c, nil)
	if err != nil || st == nil {
		return err
	}
	if st.ctx != nil {
		return x.runUnannounced(st)
	}
	return x.finish(st)
}

// Start makes a call as Execute does, but without blocking where the other ranks
// are not there yet: when every rank has announced the call by the time this one
// has, it runs it here and returns (nil, its error); otherwise it returns rest, the
// remainder (waiting for the ranks, then running), for the caller to run elsewhere
// (a goroutine): so a caller on an event loop runs calls whose ranks are all
// present without a thread hop, and never waits here for a late rank. The call
// holds the executor until rest returns, or holds its place in the order of the
// executor's operations (turns.go) until rest runs: rest must be called exactly once,
// and before the caller's goroutine makes a blocking operation on the executor
// (which would wait for it). It waits
// here up to c.Patience for the other ranks' announcements, and never for the
// device: a device call that would wait on the host for its caller's streams or for
// the ordered calls in flight is handed over whole, as rest.
func (x *Executor) Start(c Call) (rest func() error, err error) {
	// A call still running elsewhere holds the executor, or one made earlier waits for
	// it: never wait for them here, nor overtake them.
	if x.turns.busy() || !x.mu.TryLock() {
		return deferCall(x, c)
	}
	held := true // x.mu, until let go here or handed to rest
	defer x.releaseOnPanic(&held)
	if x.closed || x.broken != nil || x.board == nil || !x.caughtUp(x.seq+1) {
		held = false
		x.mu.Unlock()
		return deferCall(x, c)
	}
	pc := &patienceClock{d: max(c.Patience, 0)} // one patience for everything waited for here
	st, err := x.begin(c, pc)
	switch {
	case errors.Is(err, errDeviceFirst):
		held = false
		x.mu.Unlock()
		return deferCall(x, c)
	case err != nil || st == nil:
	case st.ctx != nil:
		rest, err = x.startUnannounced(st, pc)
	case !x.announcedWithin(st.seq, pc):
		rest = func() error {
			defer x.release()
			return x.finish(st)
		}
	default:
		err = x.finish(st)
	}
	held = false
	if rest == nil {
		x.mu.Unlock()
	}
	return rest, err
}

// patienceClock is how long Start may still wait on its caller's thread: one
// patience (Call.Patience) for everything it waits for there, counted from its first
// wait, so that a call that waits for nothing reads no clock. nil: no caller's
// thread to spare (Execute, a goroutine), wait as long as it takes.
type patienceClock struct {
	d  time.Duration
	at time.Time // when the patience ends; zero until the first wait
}

// until returns when the patience ends, starting its clock at the first call.
func (p *patienceClock) until() time.Time {
	if p.at.IsZero() {
		p.at = time.Now().Add(p.d)
	}
	return p.at
}

// errDeviceFirst: a call Start began would wait for the device on its caller's
// thread (its caller's streams still busy, or the ordered calls in flight to settle);
// nothing was announced, and Start hands the whole call over (deferCall).
var errDeviceFirst = errors.New("executor: the call waits for the device first")

// deferCall returns c's whole run for another goroutine (HandOff first), in the turn
// it takes now (turns.go).
func deferCall(x *Executor, c Call) (rest func() error, err error) {
	if err := HandOff(&c); err != nil {
		return nil, err
	}
	return x.later(func() error { return x.execute(c) }), nil
}

// HandOff readies c to be run from another thread than the caller's: the per-thread
// default stream (ucxx.StreamPerThread) names the calling thread's own, so a device
// call on it waits for that stream here, on the host, and leaves it out of
// c.Streams. Call it on the caller's thread before handing a call to a goroutine.
func HandOff(c *Call) error {
	if c.Memory != MemoryCUDA || !slices.Contains(c.Streams, ucxx.StreamPerThread) {
		return nil
	}
	if err := awaitPerThreadStream(*c); err != nil {
		return err
	}
	c.Streams = slices.DeleteFunc(slices.Clone(c.Streams), func(s uintptr) bool { return s == ucxx.StreamPerThread })
	return nil
}

// callStart is a call announced on the board, waiting for the rest.
type callStart struct {
	c        Call
	l        *plan.Layout
	localErr error
	h, seq   uint64
	dev      devBuffers
	scope    *waitScope
	// slices is how many blocks the call's device programs run on (0: unsliced;
	// slices.go), part of the fingerprint.
	slices uint8
	// ctx is the plan's context when the call runs unannounced (unannounced.go).
	ctx *planContext
	// The scope and its abort flag live here: one callStart per executor serves
	// every call (calls are serialized), so a call allocates none.
	scopeState   waitScope
	abortedState atomic.Bool
}

// beginHook, set by tests only, runs as a call begins (x.mu held): where a test
// makes a call panic.
var beginHook func()

// begin readies a call and announces it; x.mu is held. A nil callStart with a nil
// error cannot happen; an error here is the call's outcome, but for errDeviceFirst
// (pc not nil: on the caller's thread, which waits for the device within its
// patience at most; the call would wait longer; nothing was announced).
func (x *Executor) begin(c Call, pc *patienceClock) (*callStart, error) {
	if x.closed {
		return nil, ErrClosed
	}
	if x.broken == nil && x.gpu != nil {
		x.broken = x.gpu.flight.failure() // a stream-ordered call failed on the device
	}
	if x.broken != nil {
		return nil, fmt.Errorf("%w: %v", ErrBroken, x.broken)
	}
	if x.board == nil {
		if err := x.setUp(); err != nil {
			x.broken = err
			return nil, err
		}
	}
	if c.Memory == MemoryCUDA && c.Send.Bytes == 0 && c.Recv.Bytes == 0 {
		c.Memory = MemoryHost // nothing to move: no device needed (every rank decides alike)
	}
	if beginHook != nil {
		beginHook()
	}
	st := &x.call
	*st = callStart{c: c}
	st.l, st.localErr = x.check(c)
	if st.localErr == nil && c.Memory == MemoryCUDA {
		st.dev, st.localErr = x.deviceCall(c, pc)
		if errors.Is(st.localErr, errDeviceFirst) {
			return nil, errDeviceFirst
		}
	}
	if st.localErr == nil {
		st.slices = x.slicesFor(c, st.l)
		st.h = x.fingerprint(c, st.slices)
		if c.Memory == MemoryHost && x.unannounced(c.Plan) {
			st.ctx = x.readyContext(c.Plan, worldScratch(st.l, x.w.Size(), true))
		}
	}
	x.seq++
	st.seq = x.seq
	st.scopeState = waitScope{deadline: time.Now().Add(x.opts.Timeout), timeout: x.opts.Timeout, spin: x.opts.Spin,
		aborted: &st.abortedState, alive: x.alive}
	st.scope = &st.scopeState
	if err := x.publish(st, c); err != nil {
		x.broken = err
		return nil, err
	}
	return st, nil
}

// finish waits for every rank's announcement, compares them and runs the call; x.mu
// is held.
func (x *Executor) finish(st *callStart) error {
	c, l := st.c, st.l
	me, n := x.w.Rank(), x.w.Size()
	peers, err := x.collect(st.seq, st.scope)
	if err != nil {
		x.broken = err
		return err
	}
	if err := x.matchCalls(st, peers); err != nil {
		x.forgetUnannounced(st.seq)
		return err
	}
	ctx, err := x.context(c.Plan, worldScratch(l, n, c.Memory == MemoryHost && x.unannounced(c.Plan)), c.Memory)
	if err != nil {
		x.broken = err
		return err
	}
	ctx.execs++
	run := &x.run
	*run = callRun{x: x, ctx: ctx, l: l, me: me, c: c, peers: peers, scope: st.scope, flag: ctx.execs}
	if c.Memory == MemoryCUDA {
		if run.cuda, err = x.gpu.openPeers(c.Plan, me, peers); err != nil {
			x.broken = err
			return err
		}
		run.cuda.hostWaits = len(c.Plan.Ranks[me].Lanes) > deviceWaitLanes
		for q := range peers { // any rank on this GPU, connected or not, takes turns on it
			if q != me && peers[q].device == st.dev.device {
				run.cuda.hostWaits = true
			}
		}
		size := max(c.Send.Bytes, c.Recv.Bytes)
		run.cuda.programs = devicePrograms && size <= programMaxBytes
		switch {
		case st.slices > 0:
			run.cuda.programs, run.cuda.slices = true, int(st.slices)
		case !run.cuda.programs && devicePrograms && (c.ProgramWaits || size >= programWaitsMinBytes):
			run.cuda.programs, run.cuda.waitsOnly = true, true
		}
	}
	if c.Memory == MemoryCUDA {
		return x.runDevice(run)
	}
	if err := run.lanes(); err != nil {
		x.broken = err
		return err
	}
	return nil
}

// runDevice runs a device call's lanes: after the ordered calls still in flight, and
// for an ordered call with a stream to order on, without waiting for them to end
// (ordered.go); x.mu is held.
func (x *Executor) runDevice(run *callRun) error {
	g, c := x.gpu, &run.c
	if err := g.flight.failure(); err != nil {
		// An ordered call failed while this one waited for its caller's stream (the
		// host's wait in awaitCaller ends once the failure released the counters):
		// its lanes would pass every wait on released counters.
		x.broken = err
		return fmt.Errorf("%w: %v", ErrBroken, err)
	}
	err := g.cctx.Use(func() (err error) { // x.callerStreams: deviceCall's
		if err = g.orderAfter(run.ctx.gpu.streams, x.callerStreams); err != nil || !c.Ordered || len(x.callerStreams) == 0 {
			return err
		}
		run.flight, err = g.takeFlight(len(c.Plan.Ranks[run.me].Lanes))
		return err
	})
	if err == nil {
		err = run.lanes()
	}
	if err == nil && run.flight == nil {
		if ferr := g.flight.failure(); ferr != nil { // its lanes may have passed released waits
			err = fmt.Errorf("%w: %v", ErrBroken, ferr)
		}
	}
	if fc := run.flight; fc != nil {
		run.flight = nil
		ferr := g.cctx.Use(func() error {
			return g.fly(fc, run.ctx, x.callerStreams)
		})
		if err == nil {
			err = ferr
		}
	}
	if err != nil {
		x.broken = err
	}
	return err
}

// matchCalls compares the ranks' announcements of st's call (collect's peers) with
// this rank's: ErrMismatch for a rank whose call differs or failed its own checks,
// and this rank's own check's error first.
func (x *Executor) matchCalls(st *callStart, peers []peerCall) error {
	if st.localErr != nil {
		return st.localErr
	}
	c, me := st.c, x.w.Rank()
	for r := range peers {
		if r == me {
			continue
		}
		if err := callMismatch(st, r, peers[r].status, peers[r].fingerprint, peers[r].in.Bytes, peers[r].out.Bytes); err != nil {
			return err
		}
	}
	if c.Blocks != nil {
		peers[me].blocks, peers[me].in, peers[me].out = c.Blocks, c.Send, c.Recv
		return matchBlocks(peers)
	}
	return nil
}

// callMismatch compares what rank r announced of st's call (its status and
// fingerprint; its buffer sizes name the difference) with this rank's call:
// ErrMismatch if the call failed the rank's own checks or differs.
func callMismatch(st *callStart, r int, status, fingerprint, inBytes, outBytes uint64) error {
	if status != slotOK {
		return fmt.Errorf("executor: rank %d's call failed its own checks: %w", r, ErrMismatch)
	}
	if fingerprint != st.h {
		return fmt.Errorf("executor: rank %d called with %d and %d bytes, this rank with %d and %d, or another plan, type, operator or root: %w",
			r, inBytes, outBytes, st.c.Send.Bytes, st.c.Recv.Bytes, ErrMismatch)
	}
	return nil
}

// check is the call's own checks: the plan fits the world, the sizes, the buffers.
func (x *Executor) check(c Call) (*plan.Layout, error) {
	p := c.Plan
	if p == nil {
		return nil, fmt.Errorf("executor: no plan: %w", ErrMismatch)
	}
	n := x.w.Size()
	if len(p.Ranks) != n {
		return nil, fmt.Errorf("executor: a %d-rank plan on %d ranks: %w", len(p.Ranks), n, plan.ErrBuffers)
	}
	if p.VariableBlocks != (c.Blocks != nil) {
		return nil, fmt.Errorf("executor: plan %q with per-call blocks %t, call with blocks %t: %w", p.Name, p.VariableBlocks, c.Blocks != nil, plan.ErrBuffers)
	}
	if p.VariableBlocks {
		if err := c.Blocks.Check(n, c.Send.Bytes, c.Recv.Bytes, c.DType.Size()); err != nil {
			return nil, err
		}
		// The ops' spans come from the blocks; the layout gives the lanes' shape.
		return x.layout(p, uint64(n)*p.BufferAlignment, uint64(n)*p.BufferAlignment)
	}
	if c.Memory == MemoryCUDA && p.UsesPackets() {
		return nil, fmt.Errorf("executor: LL packet plans on device memory (their readers spin in kernels, which ranks sharing a GPU cannot run side by side): %w", ErrUnsupported)
	}
	if c.DType.Size() == 0 {
		return nil, fmt.Errorf("executor: element type %d: %w", c.DType, ErrUnsupported)
	}
	if c.Op != 0 {
		if _, ok := reduce.ParseOp(c.Op.String()); !ok {
			return nil, fmt.Errorf("executor: reduction %d: %w", c.Op, ErrUnsupported)
		}
	}
	if err := p.CheckBuffers(x.w.Rank(), plan.CallBuffers{SendAddr: uint64(c.Send.Addr), SendBytes: c.Send.Bytes,
		RecvAddr: uint64(c.Recv.Addr), RecvBytes: c.Recv.Bytes}); err != nil {
		return nil, err
	}
	return x.layout(p, c.Send.Bytes, c.Recv.Bytes)
}

// layouts caches layouts per plan and sizes.
type layoutKey struct {
	p       *plan.Plan
	in, out uint64
}

const maxLayouts = 256

func (x *Executor) layout(p *plan.Plan, in, out uint64) (*plan.Layout, error) {
	k := layoutKey{p, in, out}
	if l := x.layouts[k]; l != nil {
		return l, nil
	}
	l, err := p.Layout(x.w.Rank(), in, out)
	if err != nil {
		return nil, err
	}
	if x.layouts == nil || len(x.layouts) >= maxLayouts {
		x.layouts = make(map[layoutKey]*plan.Layout)
	}
	x.layouts[k] = l
	return l, nil
}

func (x *Executor) fingerprint(c Call, slices uint8) uint64 {
	h := fnv.New64a()
	in, out := c.Send.Bytes, c.Recv.Bytes
	if c.Blocks != nil {
		in, out = 0, 0 // per rank; the block tables are compared pair by pair
	}
	// Fixed-width fields, no formatting: this runs on every call.
	var b [36]byte
	binary.LittleEndian.PutUint64(b[0:], x.planHash(c.Plan))
	binary.LittleEndian.PutUint64(b[8:], in)
	binary.LittleEndian.PutUint64(b[16:], out)
	binary.LittleEndian.PutUint64(b[24:], c.Describe)
	b[32], b[33], b[34], b[35] = byte(c.DType), byte(c.Op), byte(c.Memory), slices
	h.Write(b[:])
	return h.Sum64() | 1 // never 0
}

// peerCall is what a rank announced for a call.
type peerCall struct {
	fingerprint, status uint64
	in, out             Buffer
	memory              Memory
	// Device memory: the allocations' IPC handles and buffer ids, and the buffers'
	// offsets in them.
	inHandle, outHandle ucxx.IPCHandle
	inOffset, outOffset uint64
	inID, outID         uint64
	device              uint64
	blocks              *Blocks // a call with per-call blocks: the rank's
}

// devBuffers is what a device call announces of its buffers.
type devBuffers struct {
	inHandle, outHandle ucxx.IPCHandle
	inOffset, outOffset uint64
	inID, outID         uint64
	// device identifies the GPU (a hash of its PCI bus id), so ranks can tell who
	// shares theirs.
	device uint64
}

// deviceCall readies the CUDA side for a call on device memory and returns the
// IPC handles of its buffers. pc (not nil: on the caller's thread): errDeviceFirst
// instead of waiting on the host past its patience for the ordered calls in flight
// or for the caller's streams.
func (x *Executor) deviceCall(c Call, pc *patienceClock) (devBuffers, error) {
	var d devBuffers
	addr := c.bufferAddr()
	dev := 0
	if addr != 0 {
		var err error
		if dev, err = deviceOf(addr); err != nil {
			return d, err
		}
	} else if x.gpu != nil {
		dev = x.gpu.dev
	}
	g, err := x.useGPU(dev)
	if err != nil {
		return d, err
	}
	fenced := g.isFenced(c.Plan)
	x.callerStreams = OrderedStreams(&c, x.callerStreams) // for runDevice too
	flies := c.Ordered && len(x.callerStreams) > 0        // this call is put in flight
	if pc != nil {
		// Waits for the ordered calls in flight, here (an unfenced plan), in takeFlight
		// (64 in flight) or in the lanes' drain (a call not itself in flight, whose
		// lanes start after them: orderAfter): on the caller's thread, within its
		// patience.
		left := -1
		if inFlight := g.flight.pending(); inFlight > 0 && (!fenced || !flies) {
			left = 0
		} else if inFlight >= maxInFlight {
			left = maxInFlight - 1
		}
		if left >= 0 {
			if err := g.settleUntil(left, pc.until()); err != nil {
				return d, err
			}
			if g.flight.pending() > left {
				return d, errDeviceFirst
			}
		}
	}
	if !fenced {
		// A peer may reach this rank's buffers once the call is announced: its
		// ordered calls must have ended on the device, as its caller's work (below).
		if err := g.settle(); err != nil {
			return d, err
		}
	}
	if err := g.awaitCaller(c.Streams, fenced && (fencedCallerWait || c.Ordered), pc); err != nil {
		return d, err
	}
	if d.inHandle, d.inOffset, d.inID, err = g.deviceBuffers(c.Send); err != nil {
		return d, err
	}
	if c.Recv.Addr == c.Send.Addr && c.Recv.Bytes > 0 && c.Send.Bytes > 0 {
		// In place: the same allocation, handle and offset (no second driver query).
		d.outHandle, d.outOffset, d.outID = d.inHandle, d.inOffset, d.inID
	} else {
		d.outHandle, d.outOffset, d.outID, err = g.deviceBuffers(c.Recv)
	}
	d.device = g.busHash
	return d, err
}

// caughtUp reports, without waiting, whether every rank has read the slot call seq
// reuses.
func (x *Executor) caughtUp(seq uint64) bool {
	if seq <= boardSlots {
		return true
	}
	for r := range x.w.Size() {
		if r != x.w.Rank() && x.board.started(r).load() < seq-boardSlots {
			return false
		}
	}
	return true
}

// announced reports, without waiting, whether every rank has announced call seq.
func (x *Executor) announced(seq uint64) bool {
	off := slotOff(seq)
	for r := range x.w.Size() {
		if r != x.w.Rank() && x.board.segs[r].word(off).load() < seq {
			return false
		}
	}
	return true
}

// announcedWithin polls announced(seq) within pc's patience.
func (x *Executor) announcedWithin(seq uint64, pc *patienceClock) bool {
	if x.announced(seq) {
		return true
	}
	if pc.d <= 0 {
		return false
	}
	deadline := pc.until()
	for i := 1; ; i++ {
		if x.announced(seq) {
			return true
		}
		if i&63 == 0 {
			if time.Now().After(deadline) {
				return false
			}
			pause.Yield()
		}
	}
}

// publish writes this rank's slot for st's call c (after waiting, if need be, for
// the ranks to have read the slot it reuses).
func (x *Executor) publish(st *callStart, c Call) error {
	seq, h, failed, dev, scope := st.seq, st.h, st.localErr != nil, st.dev, st.scope
	b, me, n := x.board, x.w.Rank(), x.w.Size()
	if seq > boardSlots {
		for r := range n {
			if r == me {
				continue
			}
			if err := scope.until(b.started(r), func(v uint64) bool { return v >= seq-boardSlots }, r,
				func() string {
					return fmt.Sprintf("call %d: waiting for the rank to read call %d", seq, seq-boardSlots)
				}); err != nil {
				return err
			}
		}
	}
	off := slotOff(seq)
	own := b.self
	status := uint64(slotOK)
	if failed {
		status = slotFailed
	}
	*own.u64(off + slotFingerprint) = h
	*own.u64(off + slotStatus) = status
	*own.u64(off + slotInAddr) = uint64(c.Send.Addr)
	*own.u64(off + slotInBytes) = c.Send.Bytes
	*own.u64(off + slotOutAddr) = uint64(c.Recv.Addr)
	*own.u64(off + slotOutBytes) = c.Recv.Bytes
	*own.u64(off + slotMemory) = uint64(c.Memory)
	copy(own.mem[off+slotInHandle:off+slotInHandle+ucxx.IPCHandleBytes], dev.inHandle[:])
	copy(own.mem[off+slotOutHandle:off+slotOutHandle+ucxx.IPCHandleBytes], dev.outHandle[:])
	*own.u64(off + slotInOffset) = dev.inOffset
	*own.u64(off + slotOutOffset) = dev.outOffset
	*own.u64(off + slotInID) = dev.inID
	*own.u64(off + slotOutID) = dev.outID
	*own.u64(off + slotDevice) = dev.device
	*own.u64(off + slotBlocks) = 0
	*own.u64(off + slotPlan) = 0
	if st.ctx != nil {
		*own.u64(off + slotPlan) = st.ctx.hash | 1
	}
	if c.Blocks != nil && !failed {
		*own.u64(off + slotBlocks) = 1
		t := tableOff(seq, n)
		for i, v := range [][]uint64{c.Blocks.SendOffsets, c.Blocks.SendLengths, c.Blocks.RecvOffsets, c.Blocks.RecvLengths} {
			for j := range n {
				*own.u64(t + uint64((i*n+j)*8)) = v[j]
			}
		}
	}
	own.word(off).store(seq)
	return nil
}

// collect waits for every other rank's slot for call seq and reads it into
// x.peerCalls, which it returns: valid until the next call's collect.
func (x *Executor) collect(seq uint64, scope *waitScope) ([]peerCall, error) {
	b, me, n := x.board, x.w.Rank(), x.w.Size()
	off := slotOff(seq)
	if len(x.peerCalls) != n {
		x.peerCalls = make([]peerCall, n)
	}
	peers := x.peerCalls
	clear(peers)
	for r := range n {
		if r == me {
			continue
		}
		s := b.segs[r]
		if err := scope.until(s.word(off), func(v uint64) bool { return v >= seq }, r,
			func() string { return fmt.Sprintf("call %d: waiting for the rank to make it", seq) }); err != nil {
			return nil, err
		}
		peers[r] = peerCall{fingerprint: *s.u64(off + slotFingerprint), status: *s.u64(off + slotStatus),
			in:     Buffer{Addr: uintptr(*s.u64(off + slotInAddr)), Bytes: *s.u64(off + slotInBytes)},
			out:    Buffer{Addr: uintptr(*s.u64(off + slotOutAddr)), Bytes: *s.u64(off + slotOutBytes)},
			memory: Memory(*s.u64(off + slotMemory)), inOffset: *s.u64(off + slotInOffset), outOffset: *s.u64(off + slotOutOffset),
			inID: *s.u64(off + slotInID), outID: *s.u64(off + slotOutID), device: *s.u64(off + slotDevice)}
		copy(peers[r].inHandle[:], s.mem[off+slotInHandle:])
		copy(peers[r].outHandle[:], s.mem[off+slotOutHandle:])
		if *s.u64(off + slotBlocks) == 1 {
			t := tableOff(seq, n)
			bl := &Blocks{}
			for i, v := range []*[]uint64{&bl.SendOffsets, &bl.SendLengths, &bl.RecvOffsets, &bl.RecvLengths} {
				*v = make([]uint64, n)
				for j := range n {
					(*v)[j] = *s.u64(t + uint64((i*n+j)*8))
				}
			}
			peers[r].blocks = bl
		}
	}
	b.started(me).store(seq)
	return peers, nil
}

// callRun is one call's run of this rank's lanes.
type callRun struct {
	x     *Executor
	ctx   *planContext
	l     *plan.Layout
	me    int
	c     Call
	peers []peerCall
	scope *waitScope
	flag  uint64
	// cuda is a device call's view of the peers' buffers (nil for host memory).
	cuda *cudaCall
	// flight: the call is stream-ordered; its lanes record their ends into it
	// instead of draining (ordered.go).
	flight *flightCall

	errOnce sync.Once
	err     error
	// syncTimerArmed: a lane blocked on a barrier or semaphore armed the context's
	// timer for the call's deadline (lanesync.go).
	syncTimerArmed atomic.Bool
}

// fail records the call's first failure and wakes every lane blocked on the rank's
// barriers and semaphores.
func (r *callRun) fail(err error) {
	r.errOnce.Do(func() {
		r.err = err
		r.scope.aborted.Store(true)
		for i := range r.ctx.barriers {
			r.ctx.barriers[i].wake()
		}
		for i := range r.ctx.sems {
			r.ctx.sems[i].wake()
		}
	})
}

// lanes runs every lane of this rank with the runner for the call's memory.
func (r *callRun) lanes() error {
	var run laneRunner = hostLanes{}
	if r.cuda != nil {
		run = gpuLanes{}
	}
	run.runLanes(r)
	r.endLaneSync()
	return r.err
}

// worldScratch is the most scratch any rank needs at this layout's sizes. Every rank
// sizes its context by it, so that all ranks replace a context that grew too small
// at the same call, whatever their own needs (a reduce's root needs scratch, its
// other ranks none). Untouched shared memory costs no memory.
//
// alternate: the call alternates scratch halves (it may run unannounced), which
// doubles what every rank needs.
func worldScratch(l *plan.Layout, n int, alternate bool) uint64 {
	need := l.ScratchBytes
	if alternate {
		need *= 2
	}
	for q := range n {
		b := l.BufferBytes(q, plan.BufferScratch)
		if l.Plan.DoubleScratch || alternate {
			b *= 2
		}
		need = max(need, b)
	}
	return need
}

// Check checks a rank's own blocks: n of each, whole elements of elem bytes, inside
// buffers of sendBytes and recvBytes.
//
// Errors: plan.ErrBuffers.
func (b *Blocks) Check(n int, sendBytes, recvBytes, elem uint64) error {
	if len(b.SendOffsets) != n || len(b.SendLengths) != n || len(b.RecvOffsets) != n || len(b.RecvLengths) != n {
		return fmt.Errorf("executor: block tables of %d, %d, %d and %d entries for %d ranks: %w",
			len(b.SendOffsets), len(b.SendLengths), len(b.RecvOffsets), len(b.RecvLengths), n, plan.ErrBuffers)
	}
	for j := range n {
		if !inside(b.SendOffsets[j], b.SendLengths[j], sendBytes) || !inside(b.RecvOffsets[j], b.RecvLengths[j], recvBytes) ||
			b.SendOffsets[j]%elem != 0 || b.SendLengths[j]%elem != 0 || b.RecvOffsets[j]%elem != 0 || b.RecvLengths[j]%elem != 0 {
			return fmt.Errorf("executor: block %d (send %d+%d of %d, receive %d+%d of %d) is not whole %d-byte elements inside its buffer: %w",
				j, b.SendOffsets[j], b.SendLengths[j], sendBytes, b.RecvOffsets[j], b.RecvLengths[j], recvBytes, elem, plan.ErrBuffers)
		}
	}
	return nil
}

func inside(off, length, size uint64) bool { return off <= size && length <= size-off }

// matchBlocks checks every pair of ranks: what i sends to j is as long as what j
// receives from i, and every rank's blocks lie inside its announced buffers (every
// rank checks every pair, so all fail alike).
func matchBlocks(peers []peerCall) error {
	n := len(peers)
	for i := range n {
		b := peers[i].blocks
		if b == nil || len(b.SendLengths) != n {
			return fmt.Errorf("executor: rank %d called without per-call blocks: %w", i, ErrMismatch)
		}
		for j := range n {
			if !inside(b.SendOffsets[j], b.SendLengths[j], peers[i].in.Bytes) || !inside(b.RecvOffsets[j], b.RecvLengths[j], peers[i].out.Bytes) {
				return fmt.Errorf("executor: rank %d's block %d lies outside its buffers: %w", i, j, ErrMismatch)
			}
		}
	}
	for i := range n {
		for j := range n {
			if s, r := peers[i].blocks.SendLengths[j], peers[j].blocks.RecvLengths[i]; s != r {
				return fmt.Errorf("executor: rank %d sends %d bytes to rank %d, which receives %d: %w", i, s, j, r, ErrMismatch)
			}
		}
	}
	return nil
}
