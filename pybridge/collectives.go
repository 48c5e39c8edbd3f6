package pybridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/core/collective"
	"github.com/ucxx-go/ucxx-go/core/executor"
	"github.com/ucxx-go/ucxx-go/core/plan"
	"github.com/ucxx-go/ucxx-go/core/reduce"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Execution plans and collective calls for Python's ExecutionPlan and
// Communicator. A call is one crossing: it starts the collective, waits up to spinUs
// for it to end and returns 0 when it did (its error raised), or a ticket that
// CommWait (run off the event loop) waits for.

// The prefix of a collective failure Python sees: ErrorPrefixCollective, the kind,
// a space, the rank involved (-1: none), ErrorPrefixEnd. Python's copy is generated.
const ErrorPrefixCollective = "[collective "

// The kinds of collective failures (Python's exception classes, _communicator.py).
const (
	CollectiveMismatch    = "mismatch"
	CollectiveRankFailed  = "rank_failed"
	CollectiveTimeout     = "timeout"
	CollectiveBroken      = "broken"
	CollectiveUnsupported = "unsupported"
	CollectivePlan        = "plan"
)

// collectiveError prefixes a collective's failure with its kind and rank.
func collectiveError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, collective.ErrClosed) || errors.Is(err, executor.ErrClosed) {
		return fmt.Errorf("%s%v", ErrorPrefixClosed, err)
	}
	kind := ""
	switch {
	case errors.Is(err, executor.ErrBroken):
		kind = CollectiveBroken
	case errors.Is(err, executor.ErrMismatch), errors.Is(err, collective.ErrBarrierOutOfStep):
		kind = CollectiveMismatch
	case errors.Is(err, executor.ErrRankFailed), errors.Is(err, executor.ErrPeerProtocol):
		kind = CollectiveRankFailed
	case errors.Is(err, executor.ErrTimeout), errors.Is(err, collective.ErrTimeout):
		kind = CollectiveTimeout
	case errors.Is(err, executor.ErrUnsupported), errors.Is(err, reduce.ErrUnsupported):
		kind = CollectiveUnsupported
	case isPlanError(err):
		kind = CollectivePlan
	default:
		return bridgeError(err)
	}
	rank := -1
	var re *executor.RankError
	if errors.As(err, &re) {
		rank = re.Rank
	}
	return fmt.Errorf("%s%s %d%s%v", ErrorPrefixCollective, kind, rank, ErrorPrefixEnd, err)
}

func isPlanError(err error) bool {
	var pe *plan.PlanError
	return errors.As(err, &pe) || errors.Is(err, plan.ErrMessageSize) || errors.Is(err, plan.ErrBuffers)
}

// collectiveGuard is guard for functions whose errors are collective failures.
func collectiveGuard(err *error) {
	if r := recover(); r != nil {
		*err = statusError(ucxx.StatusIOError, fmt.Sprintf("ucxx-go internal error: %v", r))
		return
	}
	*err = collectiveError(*err)
}

var plans struct {
	sync.Mutex
	next uint64
	byID map[uint64]*plan.Plan
}

func planOf(h uint64) (*plan.Plan, error) {
	plans.Lock()
	defer plans.Unlock()
	if p := plans.byID[h]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("execution plan %d was freed: %w", h, ucxx.ErrClosed)
}

// PlanParse reads an MSCCL++ execution plan (JSON, n bytes at addr) and returns its
// handle.
func PlanParse(addr uintptr, n int) (h uint64, err error) {
	defer collectiveGuard(&err)
	if n < 0 || n > 64<<20 {
		return 0, fmt.Errorf("a %d-byte plan: %w", n, plan.ErrLimit)
	}
	data := make([]byte, n)
	if n > 0 {
		copy(data, unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&addr))), n))
	}
	p, err := plan.Parse(data)
	if err != nil {
		return 0, err
	}
	return addPlan(p), nil
}

func addPlan(p *plan.Plan) uint64 {
	plans.Lock()
	defer plans.Unlock()
	if plans.byID == nil {
		plans.byID = make(map[uint64]*plan.Plan)
	}
	plans.next++
	plans.byID[plans.next] = p
	return plans.next
}

// PlanInfo describes plan h as JSON: name, collective, protocol, inplace, ranks,
// min_message_size, max_message_size, buffer_alignment, and per rank its
// input/output/scratch chunk counts and lane count.
func PlanInfo(h uint64) (info string, err error) {
	defer collectiveGuard(&err)
	p, err := planOf(h)
	if err != nil {
		return "", err
	}
	type rankInfo struct {
		Input   int `json:"input_chunks"`
		Output  int `json:"output_chunks"`
		Scratch int `json:"scratch_chunks"`
		Lanes   int `json:"lanes"`
	}
	ranks := make([]rankInfo, len(p.Ranks))
	for i, r := range p.Ranks {
		ranks[i] = rankInfo{r.InputChunks, r.OutputChunks, r.ScratchChunks, len(r.Lanes)}
	}
	b, err := json.Marshal(map[string]any{"name": p.Name, "collective": p.Collective, "protocol": p.Protocol,
		"inplace": p.InPlace, "ranks": ranks, "min_message_size": p.MinMessageBytes,
		"max_message_size": p.MaxMessageBytes, "buffer_alignment": p.BufferAlignment})
	return string(b), err
}

// PlanFree forgets plan h (a communicator may keep its context until closed).
func PlanFree(h uint64) (ok bool, err error) {
	defer collectiveGuard(&err)
	plans.Lock()
	defer plans.Unlock()
	if plans.byID[h] == nil {
		return false, fmt.Errorf("PlanFree: plan %d: %w", h, ucxx.ErrClosed)
	}
	delete(plans.byID, h)
	return true, nil
}

// tickets are collective calls still running after their crossing returned.
var tickets struct {
	sync.Mutex
	next int64
	byID map[int64]chan error
}

// startFinish starts a collective: one that ran where it started (every rank was
// there within the patience the call carries, spinUs) gives 0 and its error with no
// thread hop; else its remainder runs on a goroutine, waited for here for what is
// left of spinUs, then through a ticket for CommWait.
func startFinish(spinUs int, start func() (func() error, error)) (int64, error) {
	t0 := time.Now()
	rest, err := start()
	if rest == nil {
		return 0, err
	}
	left := time.Duration(spinUs)*time.Microsecond - time.Since(t0)
	return finish(int(max(left, 0)/time.Microsecond), rest)
}

// finish runs f and waits up to spinUs for it: 0 and f's error when it ended, else a
// ticket for CommWait.
func finish(spinUs int, f func() error) (int64, error) {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- statusError(ucxx.StatusIOError, fmt.Sprintf("ucxx-go internal error: %v", r))
			}
		}()
		done <- f()
	}()
	if spinUs > 0 {
		t := time.NewTimer(time.Duration(spinUs) * time.Microsecond)
		select {
		case err := <-done:
			t.Stop()
			return 0, err
		case <-t.C:
		}
	}
	tickets.Lock()
	defer tickets.Unlock()
	if tickets.byID == nil {
		tickets.byID = make(map[int64]chan error)
	}
	tickets.next++
	tickets.byID[tickets.next] = done
	return tickets.next, nil
}

// CommWait waits for the collective call behind ticket to end and returns its
// outcome; each ticket is waited for once.
func CommWait(ticket int64) (ok bool, err error) {
	defer collectiveGuard(&err)
	tickets.Lock()
	done := tickets.byID[ticket]
	delete(tickets.byID, ticket)
	tickets.Unlock()
	if done == nil {
		return false, fmt.Errorf("CommWait: no call %d: %w", ticket, ucxx.StatusInvalidParam)
	}
	return true, <-done
}

// memoryOf returns the executor's memory kind of a call's buffers (UCS memory
// types): both host, or both device memory.
func memoryOf(send, recv int) (executor.Memory, error) {
	switch {
	case send == int(ucxx.MemoryHost) && recv == int(ucxx.MemoryHost):
		return executor.MemoryHost, nil
	case send == int(ucxx.MemoryCUDA) && recv == int(ucxx.MemoryCUDA):
		return executor.MemoryCUDA, nil
	}
	return 0, fmt.Errorf("send memory type %d, receive %d: both host or both device memory: %w", send, recv, executor.ErrUnsupported)
}

// callOn returns communicator h and the call its buffers make: send and recv of
// sendBytes and recvBytes (UCS memory types sendMem and recvMem, both host or both
// device; device buffers' streams, 0 for none), elements of dtype, operator op,
// stream-ordered or not, with spinUs µs of patience on the caller's thread.
func callOn(h uint64, send uintptr, sendBytes uint64, sendMem int, sendStream uint64, recv uintptr, recvBytes uint64, recvMem int, recvStream uint64, dtype, op int, ordered bool, spinUs int) (*collective.Communicator, executor.Call, error) {
	mem, err := memoryOf(sendMem, recvMem)
	if err != nil {
		return nil, executor.Call{}, err
	}
	c, err := comm(h)
	if err != nil {
		return nil, executor.Call{}, err
	}
	return c, executor.Call{Send: executor.Buffer{Addr: send, Bytes: sendBytes}, Recv: executor.Buffer{Addr: recv, Bytes: recvBytes},
		DType: reduce.DType(dtype), Op: reduce.Op(op), Memory: mem, Streams: []uintptr{uintptr(sendStream), uintptr(recvStream)},
		Ordered: ordered, Patience: time.Duration(spinUs) * time.Microsecond}, nil
}

// CommExecute runs plan planH on communicator h (MSCCL++'s execute): send and recv
// buffers of sendBytes and recvBytes (UCS memory types sendMem and recvMem; device
// buffers' streams sendStream and recvStream, 0 for none), reductions over dtype
// with op (0: the plan's); ordered: stream-ordered on device memory
// (executor.Call.Ordered: done once queued).
func CommExecute(h, planH uint64, send uintptr, sendBytes uint64, sendMem int, sendStream uint64, recv uintptr, recvBytes uint64, recvMem int, recvStream uint64, dtype, op int, ordered bool, spinUs int) (ticket int64, err error) {
	defer collectiveGuard(&err)
	c, call, err := callOn(h, send, sendBytes, sendMem, sendStream, recv, recvBytes, recvMem, recvStream, dtype, op, ordered, spinUs)
	if err != nil {
		return 0, err
	}
	if call.Plan, err = planOf(planH); err != nil {
		return 0, err
	}
	return startFinish(spinUs, func() (func() error, error) { return c.StartExecute(call) })
}

// CommCollective runs collective kind ("allreduce", "allgather", "reducescatter",
// "broadcast", "reduce", "alltoall") on communicator h with a plan from its
// registry; buffers, types, ordered and spinUs as CommExecute's, root for broadcast
// and reduce.
func CommCollective(h uint64, kind string, root int, send uintptr, sendBytes uint64, sendMem int, sendStream uint64, recv uintptr, recvBytes uint64, recvMem int, recvStream uint64, dtype, op int, ordered bool, spinUs int) (ticket int64, err error) {
	defer collectiveGuard(&err)
	c, call, err := callOn(h, send, sendBytes, sendMem, sendStream, recv, recvBytes, recvMem, recvStream, dtype, op, ordered, spinUs)
	if err != nil {
		return 0, err
	}
	return startFinish(spinUs, func() (func() error, error) { return c.StartCollective(kind, root, call) })
}

// CommSynchronize waits until every stream-ordered call of communicator h has ended
// on the device and returns the first failure one met (collective.Synchronize), as
// a collective call does: 0 when done within spinUs, else a ticket for CommWait.
func CommSynchronize(h uint64, spinUs int) (ticket int64, err error) {
	defer collectiveGuard(&err)
	c, err := comm(h)
	if err != nil {
		return 0, err
	}
	return startFinish(spinUs, c.StartSynchronize) // its place taken here, after the calls made so far
}

// CommBuiltinChoice returns, as JSON {"algorithm", "lanes", "chunks", "uneven"}, the built-in
// plan communicator h's collective kind takes for a message of nbytes (allgather: the
// receive buffer's) of elemBytes elements, in place or not, on device memory or host
// (collective.Communicator.BuiltinChoice): what the registry decides, for tools and
// benchmarks that must not copy its thresholds.
func CommBuiltinChoice(h uint64, kind string, nbytes uint64, inPlace, device bool, elemBytes, root int) (choice string, err error) {
	defer collectiveGuard(&err)
	c, err := comm(h)
	if err != nil {
		return "", err
	}
	mem := executor.MemoryHost
	if device {
		mem = executor.MemoryCUDA
	}
	name, o, uneven, err := c.BuiltinChoice(kind, nbytes, inPlace, mem, uint64(max(elemBytes, 1)), root)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(struct {
		Algorithm string `json:"algorithm"`
		Lanes     int    `json:"lanes"`
		Chunks    int    `json:"chunks"`
		Uneven    string `json:"uneven"`
	}{name, max(o.Lanes, 1), max(o.Chunks, 1), uneven})
	return string(b), err
}

// CommRegisterPlan adds plan planH to communicator h's registry: calls whose
// collective, rank count, in-place form and size fit it run it.
func CommRegisterPlan(h, planH uint64) (ok bool, err error) {
	defer collectiveGuard(&err)
	c, err := comm(h)
	if err != nil {
		return false, err
	}
	p, err := planOf(planH)
	if err != nil {
		return false, err
	}
	c.Registry().Register(p)
	return true, nil
}

// CommAllToAllV runs alltoallv on communicator h: buffers and ordered as CommCollective's, and
// the block table at tableAddr: 4·size little-endian u64 (the send offsets, send
// lengths, receive offsets and receive lengths of the size blocks, in bytes).
func CommAllToAllV(h uint64, send uintptr, sendBytes uint64, sendMem int, sendStream uint64, recv uintptr, recvBytes uint64, recvMem int, recvStream uint64, dtype int, tableAddr uintptr, tableWords int, ordered bool, spinUs int) (ticket int64, err error) {
	defer collectiveGuard(&err)
	c, call, err := callOn(h, send, sendBytes, sendMem, sendStream, recv, recvBytes, recvMem, recvStream, dtype, 0, ordered, spinUs)
	if err != nil {
		return 0, err
	}
	n := c.Size()
	if tableWords != 4*n || tableAddr == 0 {
		return 0, fmt.Errorf("CommAllToAllV: a table of %d words for %d ranks: %w", tableWords, n, plan.ErrBuffers)
	}
	words := unsafe.Slice((*uint64)(*(*unsafe.Pointer)(unsafe.Pointer(&tableAddr))), tableWords)
	b := &executor.Blocks{}
	for i, v := range []*[]uint64{&b.SendOffsets, &b.SendLengths, &b.RecvOffsets, &b.RecvLengths} {
		*v = append([]uint64(nil), words[i*n:(i+1)*n]...)
	}
	return startFinish(spinUs, func() (func() error, error) { return c.StartAllToAllV(call, b) })
}
