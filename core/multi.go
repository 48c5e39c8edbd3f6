package core

import (
	"sync"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Multi-buffer messages (send_multi / recv_multi): one application call and one
// completion for any number of frames.
//
// On the wire a message is its headers and then its frames, all tag messages on the
// endpoint's tag with MultiTagBit set: small host frames ride in the header's message
// or gathered into one message, other frames one message each (multiheader.go has
// the wire and the header layout). Plain sends never set that bit, so a plain send and
// a multi-buffer message on the same user tag can never match each other's receives.
//
// The sender posts every header and frame of a message in one pass of the progress
// thread, so UCX's per-endpoint ordering keeps messages whole. The receiver learns
// frame count, sizes and types from the headers, allocates one block of C memory for
// the message, and posts all frame receives at once. Receives of the same endpoint and
// tag run one after another: the next message's header receive is posted only after
// the current message's frame receives, and UCX matches receives in posting order.
//
// Peer-announced sizes are untrusted: Limits bound frames, bytes per frame and bytes
// per message (a violation fails the message; its frames are consumed and dropped so
// the stream stays in step: multireject.go), and admission bounds the bytes being
// received at once, per worker and per endpoint (admission.go).

// MultiTagBit marks the tags of multi-buffer traffic. Endpoint tags and tags mixed
// from user tags keep it clear.
const MultiTagBit uint64 = 1 << 63

// multiOp is one multi-buffer send or receive in flight. Ops are recycled.
type multiOp struct {
	id    uint64 // the application's request id
	recv  bool
	ep    *endpoint
	tag   uint64 // with MultiTagBit
	whole *request

	// send
	raw    []byte // the caller's descriptors, copied in
	frames []Frame
	sizes  []uint64
	types  []uint8
	lens   []int

	headers    unsafe.Pointer // C memory for header buffers, headersCap bytes
	headersCap int

	parts     []uint64 // ids of this op's UCX requests (cancellation looks them up)
	remaining int      // parts not yet completed
	status    ucxx.Status

	// receive
	dec        MessageDecoder
	plan       messagePlan // once the headers are in: where each frame goes
	headersFed int
	gotHeader  bool // part of the message arrived: cancelling now would break the stream
	// cancelled: Cancel came while its header receive was posted (cancelMulti).
	cancelled bool
	// cancelledInPlace: Cancel came while its frames' receives were posted into the
	// application's memory (userFrames): it ends Canceled once they are in.
	cancelledInPlace bool
	// drainFrom: the broken endpoint whose remaining messages this receive takes, on
	// the worker (beginMulti), or 0. What that peer sent is all here already: a part
	// of its message that is not waiting now will never come (drainedDry).
	drainFrom uint64
	// framesPosted: its frame receives are posted; its stream counts it as receiving.
	framesPosted bool
	block        unsafe.Pointer
	reserved     int64 // bytes held against the outstanding-bytes bounds (admission.go)
	unproven     int64 // of those, held against the unproven allowances (admission.go)
	// While it waits for room (evidence.go): wire, the lengths of the tag messages that
	// carry its frames; claimed, how many of its stream's held messages it claimed as
	// those; holding, how many of those the store still holds; evidenceFrames, how
	// many of those are as long as announced; wrongFrame, one was not.
	wire           []uint64
	wrongFrame     bool
	claimed        int
	holding        int
	evidenceFrames int
	cudaFrames     []uintptr // the engine's device allocations of CUDA frames, until handed over
	hostFrames     []uintptr // the engine's C mallocs of host frames outside the block, until handed over
	// policy: the frames the application allocates (frames.go); awaiting: the header
	// is in and the engine waits for those allocations; userFrames: their addresses,
	// in frame order, once they came.
	policy     FramePolicy
	awaiting   bool
	userFrames []uintptr
	needID     uint64 // the completion that asks for them
	queue      *multiQueue
	// separate: the frames received (or sent) one tag message each, in frame order.
	separate []framePlace
}

// framePlace is where one frame of a multi-buffer op goes (or comes from).
type framePlace struct {
	addr    uintptr
	size    uint64
	memType uint8
}

var multiOps = sync.Pool{New: func() any { return new(multiOp) }}

func getMultiOp() *multiOp { return multiOps.Get().(*multiOp) }

func putMultiOp(op *multiOp) {
	keep := multiOp{raw: op.raw[:0], frames: op.frames[:0], sizes: op.sizes[:0], types: op.types[:0],
		lens: op.lens[:0], parts: op.parts[:0], headers: op.headers, headersCap: op.headersCap, dec: op.dec,
		plan:       messagePlan{frames: op.plan.frames[:0]},
		cudaFrames: op.cudaFrames[:0], hostFrames: op.hostFrames[:0], userFrames: op.userFrames[:0],
		separate: op.separate[:0], wire: op.wire[:0]}
	keep.dec.Reset()
	*op = keep
	multiOps.Put(op)
}

// freeEngineFrames frees the frames the engine allocated for a received message outside
// its block, which no application took.
func (op *multiOp) freeEngineFrames(cuda *cudaGate) {
	cuda.free(op.cudaFrames)
	for _, p := range op.hostFrames {
		_ = ReleaseHostFrame(p) // HostFrame lent it
	}
	op.cudaFrames, op.hostFrames = op.cudaFrames[:0], op.hostFrames[:0]
}

// ensureHeaders makes the op's C header memory at least n bytes.
func (op *multiOp) ensureHeaders(n int) {
	if op.headersCap >= n {
		return
	}
	if op.headers != nil {
		ucxx.CFree(op.headers)
	}
	op.headers = ucxx.CAlloc(n)
	op.headersCap = n
}

// beginMulti ties a multi-buffer op to its endpoint and registers it for Cancel. A
// receive with no endpoint runs on the worker, taking the message from whichever
// endpoint sent it; so does one on an endpoint its peer broke while a message it sent
// waits (drainable): what drains the messages of a peer that has gone away.
func (m *multiBuffers) beginMulti(s *submission) (*endpoint, bool) {
	op := s.multi
	var ep *endpoint
	if s.ep != 0 || !op.recv {
		if ep = m.eps.get(s.ep); !ep.takes(s) {
			st, drain := endpointStatus(ep), false
			if op.recv {
				st, drain = m.drainable(s.ep, ep, s.tag|MultiTagBit, ^uint64(0))
			}
			if !drain {
				m.completeNow(s.id, st, 0)
				putMultiOp(op)
				return nil, false
			}
			ep, op.drainFrom = nil, s.ep
		}
	}
	op.ep, op.tag = ep, s.tag|MultiTagBit
	op.whole = m.requests.add(op.id, s.op, ep)
	op.whole.internal, op.whole.multi, op.whole.slot = stepMultiWhole, op, s.slot
	return ep, true
}

// drainedDry reports whether op drains a broken endpoint (drainFrom) of which no
// message of op's tag is waiting any more, and the status op then fails with: the
// endpoint's. A receive posted for it would wait for good. What the peer sent may not
// all have been read yet (a pass reads a few fragments): the worker is progressed
// until it is idle, at most drainPasses times, before op is found dry.
func (m *multiBuffers) drainedDry(op *multiOp) (ucxx.Status, bool) {
	if op.drainFrom == 0 {
		return ucxx.StatusOK, false
	}
	for pass := 0; ; pass++ {
		if m.waiting(op.tag, ^uint64(0)) {
			return ucxx.StatusOK, false
		}
		if pass == drainPasses || !m.worker.Progress() {
			break
		}
	}
	if st, dead := m.eps.deadStatus(op.drainFrom); dead && st != ucxx.StatusOK {
		return st, true
	}
	return ucxx.StatusConnectionReset, true
}

// drainPasses bounds the worker passes drainedDry makes to read what a broken
// endpoint's peer sent before it went.
const drainPasses = 64

// endDry ends a receive drainedDry found dry partway through its message: the stream,
// whose peer is gone, fails every receive after it too.
func (m *multiBuffers) endDry(op *multiOp, st ucxx.Status) {
	q := op.queue
	q.poisoned = st
	op.status = st
	m.finishMulti(op)
	m.nextReceive(q)
}

// part registers one UCX request of a multi-buffer op.
func (m *multiBuffers) part(op *multiOp, kind opKind, step internalStep) *request {
	r := m.requests.add(m.newID(), kind, op.ep)
	r.internal, r.multi = step, op
	op.parts = append(op.parts, r.id)
	return r
}

// onMultiPart handles the end of one header or frame of a send, or frame of a receive.
// A received frame must be exactly as long as its header announced: a shorter one
// would leave bytes the peer never wrote in the block (UCX reports a longer one as
// truncated itself). Either fails the message; the stream stays in step, since each
// frame is a tag message of its own.
func (m *multiBuffers) onMultiPart(r *request, st ucxx.Status, length uint64) {
	op := r.multi
	op.remaining--
	if op.recv && st == ucxx.StatusOK && length != r.expect {
		st = ucxx.StatusMessageTruncated
	}
	if st != ucxx.StatusOK && op.status == ucxx.StatusOK {
		op.status = st
	}
	if op.remaining == 0 {
		m.finishMulti(op)
	}
}

// finishMulti reports a multi-buffer op's one completion and recycles it.
func (m *multiBuffers) finishMulti(op *multiOp) {
	if op.holding > 0 {
		m.unclaim(op) // it ends before receiving the frames it claimed
	}
	// Only once op is done: receiving their frames may finish them, which admits again.
	defer m.receiveAll(m.admission.release(op))
	st, q, block := op.status, op.queue, op.block
	if op.cancelledInPlace && st == ucxx.StatusOK {
		st = ucxx.StatusCanceled // the message goes with the cancelled caller's frames
	}
	orphan := op.recv && op.id == 0 // its request was answered (cancelMulti)
	if orphan && st == ucxx.StatusOK && (q == nil || m.multiRecv[q.key] != q) {
		st = ucxx.StatusCanceled // its stream is gone with its endpoint
	}
	var value uint64
	if op.block != nil {
		if st == ucxx.StatusOK {
			value = uint64(uintptr(op.block)) // the application frees it, and the frames outside it, now
			op.cudaFrames, op.hostFrames = op.cudaFrames[:0], op.hostFrames[:0]
		} else {
			ucxx.CFree(op.block)
			op.freeEngineFrames(m.cuda)
		}
		op.block = nil
	}
	if op.framesPosted {
		q.receiving--
	}
	if orphan {
		if st == ucxx.StatusOK {
			m.handOver(q, block)
		} else {
			m.forgetIfIdle(q)
		}
		putMultiOp(op)
		return
	}
	if w := op.whole; w == nil || w.slot == 0 || !m.inline.complete(w.slot, op.id, st, value) {
		m.completeNow(op.id, st, value) // else the submitting call, still waiting, took it
	}
	if w := m.requests.remove(op.id); w != nil {
		if w.ep != nil {
			m.maybeFree(w.ep)
		}
		m.requests.recycle(w)
	}
	recv := op.recv
	putMultiOp(op)
	if recv && q != nil {
		m.forgetIfIdle(q) // its last receive may just have completed
	}
}
