package collective

import (
	"errors"
	"fmt"
	"time"

	"github.com/ucxx-go/ucxx-go/core/builtin"
	"github.com/ucxx-go/ucxx-go/core/executor"
	"github.com/ucxx-go/ucxx-go/core/plan"
	"github.com/ucxx-go/ucxx-go/core/reduce"
)

// The collectives: each checks its buffers, asks the registry for a plan and runs it
// with the executor. Every rank makes the same call (same collective, element
// count, type, operator, root); the executor compares them before any byte moves.
//
// Buffers follow NCCL's conventions. Out of place the two buffers do not overlap; in
// place: allreduce, broadcast, reduce and alltoall pass one buffer as both; allgather
// passes its send buffer at recv + rank·sendBytes; reducescatter its receive buffer
// at send + rank·recvBytes.

// Collective names, as plans spell them.
const (
	AllReduce     = "allreduce"
	AllGather     = "allgather"
	ReduceScatter = "reducescatter"
	Broadcast     = "broadcast"
	Reduce        = "reduce"
	AllToAll      = "alltoall"
	AllToAllV     = "alltoallv"
)

// Registry is the communicator's plan registry (shared by its collectives).
func (c *Communicator) Registry() *Registry { return &c.registry }

// Collective runs collective kind with call's buffers (Send and Recv as above),
// element type (DType), reduction operator (Op; ignored by collectives that do not
// reduce), memory kind and streams; root for broadcast and reduce. call.Plan is
// chosen here.
//
// Errors: ErrClosed; plan.ErrBuffers for buffers that break the conventions or
// sizes that do not fit each other; executor.ErrUnsupported (an unknown collective,
// type or operator); the executor's (ErrMismatch, ErrRankFailed, ErrTimeout...).
func (c *Communicator) Collective(kind string, root int, call executor.Call) error {
	return runHere(c.StartCollective(kind, root, call))
}

// StartCollective makes the call Collective makes, as executor.Start does: when
// every rank is there it runs the call here and returns (nil, its error), else rest,
// the remainder, which the caller must run exactly once (on another goroutine, say).
func (c *Communicator) StartCollective(kind string, root int, call executor.Call) (rest func() error, err error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	send, recv, t, op := call.Send, call.Recv, call.DType, call.Op
	if err := reduce.Check(t, max(op, reduce.Sum)); err != nil {
		return nil, fmt.Errorf("collective: %s: %w", kind, err)
	}
	e := t.Size()
	inPlace, err := c.conventions(kind, root, send, recv, e)
	if err != nil {
		return nil, err
	}
	if c.size == 1 {
		if inPlace || send.Bytes == 0 {
			return nil, nil
		}
		return startOneRankCopy(call)
	}
	req := c.request(kind, root, send.Bytes, recv.Bytes, inPlace, e, call.Memory)
	call.Describe = describe(kind, root)
	if p := c.registry.userPlan(req); p != nil {
		call.Plan = p
		return c.x.Start(call)
	}
	ch, form := c.planFor(req, send.Bytes)
	if form != wholeRun {
		return c.startAllReduceUneven(ch, form, call, e)
	}
	if call.Plan, err = c.registry.builtin(kind, ch.name, c.size, ch.o); err != nil {
		return nil, err
	}
	call.Sliced = ch.sliced
	call.ProgramWaits = ch.programWaits
	return c.x.Start(call)
}

// startOneRankCopy starts a one-rank communicator's out-of-place call, a copy of its
// send buffer into its receive buffer: queued on the caller's streams where the call
// is stream-ordered (orderedCopy); else once they are done, here within the call's
// patience, or in rest. (A function of its own: the closure would put StartCollective's
// call on the heap for every call.)
func startOneRankCopy(call executor.Call) (rest func() error, err error) {
	send, recv := call.Send, call.Recv
	n := min(send.Bytes, recv.Bytes)
	if queued, err := orderedCopy(call, recv.Addr, send.Addr, n); queued || err != nil {
		return nil, err
	}
	copyOut := func(st *staging, err error) error {
		if err != nil {
			return err
		}
		defer st.close()
		return st.copy(recv.Addr, send.Addr, n)
	}
	st, err := stagingWithin(call.Memory, send.Addr, call.Streams, max(call.Patience, 0))
	if errors.Is(err, errStreamsBusy) { // the wait for the streams goes elsewhere
		return func() error { return copyOut(stagingFor(call.Memory, send.Addr, call.Streams)) }, nil
	}
	return nil, copyOut(st, err)
}

// request is what the registry chooses a plan of kind by, for a call whose buffers
// hold sendBytes and recvBytes: MSCCL++'s message size (allgather's the receive
// buffer's, the others' the send buffer's), and for host memory the cores a rank has.
func (c *Communicator) request(kind string, root int, sendBytes, recvBytes uint64, inPlace bool, e uint64, mem executor.Memory) Request {
	req := Request{Collective: kind, Bytes: sendBytes, InPlace: inPlace, Ranks: c.size, Root: root, ElementBytes: e, Memory: mem}
	if kind == AllGather {
		req.Bytes = recvBytes
	}
	if mem == executor.MemoryHost {
		req.CoresPerRank = c.coresPerRank()
	}
	return req
}

// runForm is how a built-in plan covers a call's message.
type runForm uint8

const (
	// wholeRun: the plan runs over the whole message.
	wholeRun runForm = iota
	// paddedRun: a small allreduce the plan's chunks do not divide, copied into a
	// buffer padded to whole all-pairs units and run there in place.
	paddedRun
	// headAndTail: a large such allreduce: the plan over its largest whole part, the
	// rest as paddedRun.
	headAndTail
)

// planFor is the built-in a call whose send buffer holds sendBytes takes, and how:
// builtinChoice; where its pieces do not divide the message, the deepest pipeline of
// half, a quarter ... of its pieces that does, then neither pipelining nor extra
// lanes; and the padded forms for an allreduce the plan still does not divide.
// StartCollective runs what it says; BuiltinChoice reports it.
func (c *Communicator) planFor(req Request, sendBytes uint64) (choice, runForm) {
	ch := builtinChoice(req)
	if divides(req.Collective, ch, c.size, sendBytes, req.ElementBytes) {
		return ch, wholeRun
	}
	for ch.o.Chunks > 1 {
		ch.o.Chunks /= 2
		if divides(req.Collective, ch, c.size, sendBytes, req.ElementBytes) {
			return ch, wholeRun
		}
	}
	ch.o.Chunks, ch.o.Lanes = 1, 1
	switch {
	case req.Collective != AllReduce || divides(req.Collective, ch, c.size, sendBytes, req.ElementBytes):
		return ch, wholeRun
	case sendBytes > allPairsMaxBytes:
		return ch, headAndTail
	}
	return ch, paddedRun
}

// BuiltinChoice names the built-in plan a collective call of kind on this
// communicator takes when no registered plan fits it (Collective's choice): the
// algorithm ("direct", "allpairs", "ring", "chain", "tree", "pairwise") and its
// options, and uneven: "" when the plan runs over the whole message; for an
// allreduce whose element count its chunks do not divide, "padded" (the message
// copied into a buffer padded to whole all-pairs units and run there: the algorithm
// named is then "allpairs") or "tail" (the plan over the largest whole part, the rest
// so padded). With one rank nothing moves between ranks: "copy" out of place, "none"
// in place. bytes is the send buffer's size (allgather: the receive buffer's, as
// MSCCL++ selects); elementBytes the element size; mem where the buffers are. It
// answers what StartCollective runs, so that benchmarks and tools need no copy of
// the registry's thresholds.
//
// Errors: ErrClosed; executor.ErrUnsupported for an unknown collective.
func (c *Communicator) BuiltinChoice(kind string, bytes uint64, inPlace bool, mem executor.Memory, elementBytes uint64, root int) (name string, o builtin.Options, uneven string, err error) {
	if err := c.open(); err != nil {
		return "", o, "", err
	}
	if _, ok := builtin.Lookup(kind, builtinChoice(Request{Collective: kind}).name); !ok {
		return "", o, "", fmt.Errorf("collective: no built-in %q: %w", kind, executor.ErrUnsupported)
	}
	if c.size == 1 {
		if inPlace {
			return "none", o, "", nil
		}
		return "copy", o, "", nil
	}
	send := bytes
	if kind == AllGather {
		send = bytes / uint64(c.size)
	}
	req := c.request(kind, root, send, bytes, inPlace, max(elementBytes, 1), mem)
	switch ch, form := c.planFor(req, send); form {
	case paddedRun:
		return "allpairs", builtin.Options{InPlace: true}, "padded", nil
	case headAndTail:
		return ch.name, ch.o, "tail", nil
	default:
		return ch.name, ch.o, "", nil
	}
}

// divides reports whether a message of bytes divides into the plan's input chunks,
// whole elements each.
func divides(kind string, ch choice, n int, bytes, e uint64) bool {
	a, ok := builtin.Lookup(kind, ch.name)
	if !ok {
		return false
	}
	in, _ := a.Chunks(n, ch.o)
	return bytes%(uint64(in)*e) == 0
}

// startAllReduceUneven starts an allreduce whose element count the plan's chunks do
// not divide, as StartCollective starts others. A small message is padded whole (two
// small copies around one run, which may run here); a large one runs elsewhere
// (allReduceUneven).
func (c *Communicator) startAllReduceUneven(ch choice, form runForm, call executor.Call, e uint64) (rest func() error, err error) {
	call.Ordered = false // the staging copies around the run wait on the host
	if form == headAndTail {
		if err := executor.HandOff(&call); err != nil { // the rest runs on a goroutine
			return nil, err
		}
		// Its two calls' places among this rank's calls are taken now, as it is made.
		head, tail := c.x.TakeTurn(), c.x.TakeTurn()
		return func() error { return c.allReduceUneven(ch, call, e, head, tail) }, nil
	}
	tail, finish, err := c.paddedTail(call, 0, e, max(call.Patience, 0))
	if errors.Is(err, errStreamsBusy) {
		// The staging copy would wait for the caller's streams here: the whole call
		// goes elsewhere, in the place it takes now.
		turn := c.x.TakeTurn()
		return func() error {
			defer turn.Pass()
			return c.paddedRun(call, 0, e, turn)
		}, nil
	}
	if err != nil {
		return nil, err
	}
	more, err := c.x.Start(tail)
	if more == nil {
		return nil, finish(err)
	}
	return func() error { return finish(more()) }, nil
}

// paddedRun runs the allreduce of call's bytes from main on as a padded tail
// (paddedTail, waiting for the caller's streams as long as it takes) in turn t.
func (c *Communicator) paddedRun(call executor.Call, main, e uint64, t executor.Turn) error {
	tail, finish, err := c.paddedTail(call, main, e, -1)
	if err != nil {
		return err
	}
	return finish(t.Execute(tail))
}

// allReduceUneven runs a large allreduce whose element count the plan's chunks do
// not divide: the largest prefix that divides by the plan, then the rest (fewer
// elements than the plan has chunks) padded to one all-pairs unit in a buffer of its
// own, in the turns taken when the call was made (each used or passed once).
func (c *Communicator) allReduceUneven(ch choice, call executor.Call, e uint64, headTurn, tailTurn executor.Turn) error {
	// A turn left unused would hold every later operation of this rank forever: each
	// is given up unless used, whatever way this returns (a panic included), the head
	// first (the tail's turn waits for it: deferred calls run last first).
	defer tailTurn.Pass()
	defer headTurn.Pass()
	a, _ := builtin.Lookup(AllReduce, ch.name)
	in, _ := a.Chunks(c.size, ch.o)
	unit := uint64(in) * e
	main := call.Send.Bytes / unit * unit
	if main > 0 {
		p, err := c.registry.builtin(AllReduce, ch.name, c.size, ch.o)
		if err != nil {
			return err
		}
		head := call
		head.Plan = p
		head.Send.Bytes, head.Recv.Bytes = main, main
		if err := headTurn.Execute(head); err != nil {
			return err
		}
	}
	return c.paddedRun(call, main, e, tailTurn)
}

// paddedTail readies the allreduce of call's bytes from main on: copied into a buffer
// padded to whole all-pairs units, run in place there. finish takes the run's
// outcome, copies the result back when it succeeded and frees the buffer; it must be
// called exactly once. The copy waits for the caller's streams within patience
// (stagingWithin: negative, as long as it takes; errStreamsBusy past it).
func (c *Communicator) paddedTail(call executor.Call, main, e uint64, patience time.Duration) (tail executor.Call, finish func(error) error, err error) {
	rest := call.Send.Bytes - main
	st, err := stagingWithin(call.Memory, call.Send.Addr, call.Streams, patience)
	if err != nil {
		return tail, nil, err
	}
	pad := builtin.Options{InPlace: true}
	pa, _ := builtin.Lookup(AllReduce, "allpairs")
	pin, _ := pa.Chunks(c.size, pad)
	padUnit := uint64(pin) * e
	padded := (rest + padUnit - 1) / padUnit * padUnit
	p, err := c.registry.builtin(AllReduce, "allpairs", c.size, pad)
	if err != nil {
		st.close()
		return tail, nil, err
	}
	t, err := st.alloc(padded)
	if err != nil {
		st.close()
		return tail, nil, err
	}
	finish = func(err error) error {
		if err == nil {
			err = st.copy(call.Recv.Addr+uintptr(main), t, rest)
		}
		st.free(t)
		st.close()
		return err
	}
	if err := st.copy(t, call.Send.Addr+uintptr(main), rest); err != nil {
		return tail, nil, finish(err)
	}
	tail = call
	tail.Plan = p
	tail.Send = executor.Buffer{Addr: t, Bytes: padded}
	tail.Recv = tail.Send
	tail.Describe ^= rest // the true size, which padding hides, in the fingerprint
	return tail, finish, nil
}

// conventions checks a call's buffers and sizes against kind's conventions and
// says whether it is in place.
func (c *Communicator) conventions(kind string, root int, send, recv executor.Buffer, e uint64) (bool, error) {
	n, r := uint64(c.size), uint64(c.rank)
	bad := func(format string, args ...any) (bool, error) {
		return false, fmt.Errorf("collective: %s: %s: %w", kind, fmt.Sprintf(format, args...), plan.ErrBuffers)
	}
	if send.Bytes%e != 0 || recv.Bytes%e != 0 {
		return bad("%d and %d bytes are not whole %d-byte elements", send.Bytes, recv.Bytes, e)
	}
	var sendAt uint64 // where an in-place send buffer lies in recv
	switch kind {
	case AllReduce, Broadcast, Reduce, AllToAll:
		if send.Bytes != recv.Bytes {
			return bad("send %d bytes, receive %d", send.Bytes, recv.Bytes)
		}
		if kind == AllToAll && send.Bytes%(n*e) != 0 {
			return bad("%d bytes do not split into %d blocks of whole elements", send.Bytes, n)
		}
		if (kind == Broadcast || kind == Reduce) && (root < 0 || root >= c.size) {
			return bad("root %d of %d ranks", root, c.size)
		}
	case AllGather:
		if recv.Bytes != n*send.Bytes {
			return bad("send %d bytes, receive %d (want %d ranks' worth)", send.Bytes, recv.Bytes, n)
		}
		sendAt = r * send.Bytes
	case ReduceScatter:
		if send.Bytes != n*recv.Bytes {
			return bad("send %d bytes, receive %d (want 1/%d)", send.Bytes, recv.Bytes, n)
		}
		if recv.Addr == send.Addr+uintptr(r*recv.Bytes) && send.Bytes > 0 {
			return true, nil
		}
		if overlap(send, recv) {
			return bad("the receive buffer overlaps the send buffer other than at slot %d", r)
		}
		return false, nil
	default:
		return false, fmt.Errorf("collective: %q: %w", kind, executor.ErrUnsupported)
	}
	if send.Addr == recv.Addr+uintptr(sendAt) && send.Bytes > 0 {
		return true, nil
	}
	if overlap(send, recv) {
		return bad("the buffers overlap other than as the in-place form")
	}
	return false, nil
}

func overlap(a, b executor.Buffer) bool {
	return a.Bytes > 0 && b.Bytes > 0 && a.Addr < b.Addr+uintptr(b.Bytes) && b.Addr < a.Addr+uintptr(a.Bytes)
}

// AllToAllV is alltoallv: this rank sends block j of call.Send to rank j and
// receives rank j's block into block j of call.Recv, the blocks as blocks gives them
// (bytes, whole elements); every rank's send to j must be as long as j's receive
// from it. It runs the built-in alltoallv plan, whose blocks are placeholders filled
// by each call's tables (plan.Plan.VariableBlocks), unless a user's selector or plan
// takes it.
//
// Errors: as Collective's; executor.ErrMismatch when the ranks' blocks disagree.
func (c *Communicator) AllToAllV(call executor.Call, blocks *executor.Blocks) error {
	return runHere(c.StartAllToAllV(call, blocks))
}

// runHere finishes a started call on the caller's goroutine: runs its remainder,
// if it left one, else returns its outcome.
func runHere(rest func() error, err error) error {
	if rest != nil {
		return rest()
	}
	return err
}

// StartAllToAllV is AllToAllV as StartCollective is Collective.
func (c *Communicator) StartAllToAllV(call executor.Call, blocks *executor.Blocks) (rest func() error, err error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if err := reduce.Check(call.DType, reduce.Sum); err != nil {
		return nil, fmt.Errorf("collective: alltoallv: %w", err)
	}
	if err := blocks.Check(c.size, call.Send.Bytes, call.Recv.Bytes, call.DType.Size()); err != nil {
		return nil, err
	}
	if overlap(call.Send, call.Recv) {
		return nil, fmt.Errorf("collective: alltoallv: the buffers overlap (alltoallv is out of place): %w", plan.ErrBuffers)
	}
	if c.size == 1 {
		st, err := stagingFor(call.Memory, call.Send.Addr, call.Streams)
		if err != nil {
			return nil, err
		}
		defer st.close()
		return nil, st.copy(call.Recv.Addr+uintptr(blocks.RecvOffsets[0]), call.Send.Addr+uintptr(blocks.SendOffsets[0]), blocks.SendLengths[0])
	}
	call.Describe, call.Blocks = describe(AllToAllV, -1), blocks
	req := c.request(AllToAllV, 0, 0, 0, false, call.DType.Size(), call.Memory)
	if call.Plan = c.registry.userPlan(req); call.Plan == nil {
		if call.Plan, err = c.registry.alltoallv(c.size); err != nil {
			return nil, err
		}
	}
	return c.x.Start(call)
}
