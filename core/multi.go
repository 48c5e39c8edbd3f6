package core

import (
	"encoding/binary"
	"errors"
	"sync"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Multi-buffer messages (send_multi / recv_multi): one application call and one
// completion for any number of frames.
//
// On the wire a message is its headers and then its frames, each a tag message of its
// own, all on the endpoint's tag with MultiTagBit set (multiheader.go has the header
// layout). Plain sends never set that bit, so a plain send and a multi-buffer message
// on the same user tag can never match each other's receives.
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
// the stream stays in step), and a weighted semaphore bounds the bytes being received
// at once on the worker (a message waits for room; one that can never fit fails).

// MultiTagBit marks the tags of multi-buffer traffic. Endpoint tags and tags mixed
// from user tags keep it clear.
const MultiTagBit uint64 = 1 << 63

// Frame describes one buffer of a multi-buffer send: four little-endian u64 words
// (address, size, memory type: MemHost or MemCUDA, and for a CUDA frame the stream
// whose queued work must be done before it is sent, 0 for none: see cuda.go), as the
// descriptor array a caller passes to SendMulti holds them.
type Frame struct {
	Addr    uint64
	Size    uint64
	MemType uint64
	Stream  uint64
}

// FrameDescriptorSize is the size of one Frame in a descriptor array.
const FrameDescriptorSize = 32

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
	headersFed int
	gotHeader  bool // part of the message arrived: cancelling now would break the stream
	abandoned  bool // cancelled after gotHeader: the message is received, then dropped
	block      unsafe.Pointer
	blockSize  uint64
	reserved   int64     // bytes held against the outstanding-bytes bounds (admission.go)
	cudaFrames []uintptr // device allocations of the CUDA frames, until handed over
	// deferCUDA: the application allocates the CUDA frames (frames.go); awaiting: the
	// header is in and the engine waits for those allocations; userFrames: they came.
	deferCUDA, awaiting, userFrames bool
	needID                          uint64 // the completion that asks for them
	queue                           *multiQueue
}

var multiOps = sync.Pool{New: func() any { return new(multiOp) }}

func getMultiOp() *multiOp { return multiOps.Get().(*multiOp) }

func (e *Engine) putMultiOp(op *multiOp) {
	keep := multiOp{raw: op.raw[:0], frames: op.frames[:0], sizes: op.sizes[:0], types: op.types[:0],
		lens: op.lens[:0], parts: op.parts[:0], headers: op.headers, headersCap: op.headersCap, dec: op.dec,
		cudaFrames: op.cudaFrames[:0]}
	keep.dec.Reset()
	*op = keep
	multiOps.Put(op)
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

// multiKey names the stream of multi-buffer receives of one endpoint and tag.
type multiKey struct{ ep, tag uint64 }

// multiQueue holds the receives of one stream, the first active. A stream the peer
// broke (a header we could not parse) is poisoned: its receives fail from then on, until
// the endpoint closes. A stream dropping a rejected message holds its receives back
// until every message to drop has a receive posted ahead of theirs.
type multiQueue struct {
	key             multiKey
	ops             []*multiOp
	active          bool // ops[0] has posted its header receive
	poisoned        ucxx.Status
	discardLeft     uint64 // messages still to drop, whose receives are not posted yet
	discardInFlight int
}

// maxDiscardsInFlight bounds the receives posted at once to drop a rejected message:
// a peer may announce up to 2^64 frames, and the drop must not cost memory in
// proportion.
const maxDiscardsInFlight = 64

// ErrBadDescriptors: SendMulti's descriptor array is malformed.
var ErrBadDescriptors = &ucxx.Error{Op: "SendMulti: frame descriptors", Status: ucxx.StatusInvalidParam}

// SendMulti queues a multi-buffer send of count frames described at desc (count
// Frames, FrameDescriptorSize bytes each, read during this call) and returns the
// request id of its one completion. The frames' memory must stay valid until then.
//
// Errors: ErrEngineClosed, ErrEndpointClosed, the endpoint's failure, ErrBadDescriptors.
func (e *Engine) SendMulti(ep uint64, desc uintptr, count int, tag uint64) (uint64, error) {
	if _, err := e.eps.live(ep); err != nil {
		return 0, err
	}
	if count < 0 || (count > 0 && desc == 0) {
		return 0, ErrBadDescriptors
	}
	op := getMultiOp()
	n := count * FrameDescriptorSize
	if cap(op.raw) < n {
		op.raw = make([]byte, n)
	}
	op.raw = op.raw[:n]
	ucxx.CopyFrom(op.raw, desc)
	var cb cudaBuffers
	for i := 0; i < count; i++ {
		w := op.raw[i*FrameDescriptorSize:]
		f := Frame{binary.LittleEndian.Uint64(w), binary.LittleEndian.Uint64(w[8:]), binary.LittleEndian.Uint64(w[16:]), binary.LittleEndian.Uint64(w[24:])}
		if f.MemType > uint64(MemCUDA) || (f.Addr == 0 && f.Size != 0) {
			cb.release()
			e.putMultiOp(op)
			return 0, ErrBadDescriptors
		}
		if f.MemType == uint64(MemCUDA) {
			if err := cb.add(uintptr(f.Addr), uintptr(f.Stream)); err != nil {
				cb.release()
				e.putMultiOp(op)
				return 0, err
			}
		}
		op.frames = append(op.frames, f)
	}
	// A local, not op.id, after submit: the progress thread may finish and recycle op
	// before this function returns (Go may read op.id after the call).
	id := e.newID()
	op.id = id
	return id, e.submitOrRelease(submission{op: opSendMulti, id: id, ep: ep, tag: tag, multi: op, cuda: cb})
}

// RecvMulti queues a multi-buffer receive on endpoint ep (0: on the worker, from any
// endpoint) and tag. Its completion's
// Length is the address of the message's block (see blockLayout); the receiver owns
// the block and frees it with free().
func (e *Engine) RecvMulti(ep uint64, tag uint64) (uint64, error) {
	id, _, err := e.recvMultiOp(ep, tag, false)
	return id, err
}

func (e *Engine) recvMultiOp(ep uint64, tag uint64, deferCUDA bool) (id, needID uint64, err error) {
	if ep != 0 {
		if _, err := e.eps.live(ep); err != nil {
			return 0, 0, err
		}
	}
	op := getMultiOp()
	op.recv = true
	id = e.newID()
	op.id = id
	if deferCUDA {
		op.deferCUDA, needID = true, e.newID()
		op.needID = needID
	}
	return id, needID, e.submit(submission{op: opRecvMulti, id: id, ep: ep, tag: tag, multi: op})
}

// usable reports whether receives may be posted for ep (nil: the worker itself).
func usable(ep *endpoint) bool { return ep == nil || ep.phase == phaseReady }

// ucsMemType maps a header's memory type to UCX's.
func ucsMemType(t uint64) int {
	if t == uint64(MemCUDA) {
		return 1 // UCS_MEMORY_TYPE_CUDA
	}
	return 0 // UCS_MEMORY_TYPE_HOST
}

func (e *Engine) beginMulti(s *submission) (*endpoint, bool) {
	op := s.multi
	var ep *endpoint
	// A receive with no endpoint runs on the worker, taking the message from whichever
	// endpoint sent it: what drains the messages of a peer that has gone away.
	if s.ep != 0 || !op.recv {
		if ep = e.readyEndpoint(s); ep == nil {
			e.putMultiOp(op)
			return nil, false
		}
	}
	op.ep, op.tag = ep, s.tag|MultiTagBit
	op.whole = e.requests.add(op.id, s.op, ep)
	op.whole.internal, op.whole.multi = stepMultiWhole, op
	return ep, true
}

func (e *Engine) sendMulti(s *submission) {
	ep, ok := e.beginMulti(s)
	if !ok {
		return
	}
	op := s.multi
	for _, f := range op.frames {
		op.sizes = append(op.sizes, f.Size)
		op.types = append(op.types, uint8(f.MemType))
	}
	nh := HeaderCount(len(op.frames))
	op.ensureHeaders(nh * MaxHeaderSize)
	op.lens = EncodeHeaders(unsafe.Slice((*byte)(op.headers), nh*MaxHeaderSize), op.sizes, op.types, op.lens[:0])
	op.remaining = len(op.lens) + len(op.frames)
	for i, n := range op.lens {
		r := e.part(op, opTagSend, stepMultiPart)
		addr := uintptr(op.headers) + uintptr(i*MaxHeaderSize)
		r.track(ep.u.TagSend(addr, uint64(n), op.tag, 0, r.id))
	}
	for _, f := range op.frames {
		r := e.part(op, opTagSend, stepMultiPart)
		r.track(ep.u.TagSend(uintptr(f.Addr), f.Size, op.tag, ucsMemType(f.MemType), r.id))
	}
}

// part registers one UCX request of a multi-buffer op.
func (e *Engine) part(op *multiOp, kind opKind, step internalStep) *request {
	r := e.requests.add(e.newID(), kind, op.ep)
	r.internal, r.multi = step, op
	op.parts = append(op.parts, r.id)
	return r
}

func (e *Engine) recvMulti(s *submission) {
	if _, ok := e.beginMulti(s); !ok {
		return
	}
	op := s.multi
	key := multiKey{s.ep, op.tag}
	q := e.multiRecv[key]
	if q == nil {
		q = &multiQueue{key: key}
		e.multiRecv[key] = q
	}
	op.queue = q
	q.ops = append(q.ops, op)
	if len(q.ops) == 1 {
		e.startRecvMulti(q)
	}
}

// startRecvMulti starts the first receive of a stream, failing those that cannot run.
func (e *Engine) startRecvMulti(q *multiQueue) {
	if q.active {
		return
	}
	if q.discardLeft > 0 {
		e.pumpDiscards(q)
		if q.discardLeft > 0 {
			return // the rest start once the last drop is posted
		}
	}
	for len(q.ops) > 0 {
		op := q.ops[0]
		st := q.poisoned
		if st == ucxx.StatusOK && !usable(op.ep) {
			st = endpointStatus(op.ep)
		}
		if st == ucxx.StatusOK {
			op.dec.Reset()
			op.dec.Limits = e.opts.Limits
			op.ensureHeaders(MaxHeaderSize)
			q.active = true
			e.postHeaderRecv(op)
			return
		}
		q.ops = q.ops[1:]
		op.status = st
		e.finishMulti(op)
	}
	if q.poisoned == ucxx.StatusOK && q.discardLeft == 0 && q.discardInFlight == 0 {
		delete(e.multiRecv, q.key)
	}
}

// nextReceive takes the stream's first receive off it once that receive has posted every
// receive of its message (or failed), and starts the next.
func (e *Engine) nextReceive(q *multiQueue) {
	q.ops[0] = nil
	q.ops = q.ops[1:]
	q.active = false
	e.startRecvMulti(q)
}

// pumpDiscards posts the drops of a rejected message, a window at a time.
func (e *Engine) pumpDiscards(q *multiQueue) {
	for q.discardLeft > 0 && q.discardInFlight < maxDiscardsInFlight {
		ep := e.eps.get(q.key.ep)
		if q.key.ep != 0 && !usable(ep) {
			q.discardLeft = 0
			return
		}
		q.discardLeft--
		q.discardInFlight++
		r := e.requests.add(e.newID(), opTagRecv, ep)
		r.internal, r.stream = stepMultiDiscard, q
		r.track(e.worker.TagRecv(0, 0, q.key.tag, ^uint64(0), 0, r.id))
	}
}

// onDiscard handles the end of one drop.
func (e *Engine) onDiscard(r *request) {
	q := r.stream
	q.discardInFlight--
	if q.discardLeft > 0 {
		e.startRecvMulti(q)
	} else if len(q.ops) == 0 && q.discardInFlight == 0 && q.poisoned == ucxx.StatusOK && !q.active {
		delete(e.multiRecv, q.key)
	}
}

// forgetStreams drops the multi-buffer streams of a closed endpoint.
func (e *Engine) forgetStreams(ep *endpoint) {
	for key := range e.multiRecv {
		if key.ep == ep.handle {
			delete(e.multiRecv, key)
		}
	}
}

func (e *Engine) postHeaderRecv(op *multiOp) {
	r := e.part(op, opTagRecv, stepMultiHeader)
	op.remaining++
	r.track(e.worker.TagRecv(uintptr(op.headers), MaxHeaderSize, op.tag, ^uint64(0), 0, r.id))
}

// onMultiHeader handles a received header.
func (e *Engine) onMultiHeader(r *request, st ucxx.Status, length uint64) {
	op := r.multi
	op.remaining--
	q := op.queue
	if st != ucxx.StatusOK {
		if st == ucxx.StatusMessageTruncated {
			// A "header" longer than any header: the peer is not speaking our format,
			// and where its message ends is unknown.
			q.poisoned = ucxx.StatusIOError
			st = ucxx.StatusIOError
		}
		op.status = st
		e.finishMulti(op)
		e.nextReceive(q)
		return
	}
	op.gotHeader = true
	op.headersFed++
	done, err := op.dec.Feed(unsafe.Slice((*byte)(op.headers), length))
	if err != nil {
		e.rejectMessage(op, err)
		return
	}
	if !done {
		e.postHeaderRecv(op)
		return
	}
	switch ok, st := e.admission.admit(op); {
	case st != ucxx.StatusOK:
		e.rejectWhole(op, st)
	case ok:
		e.receiveFrames(op)
	}
}

// rejectMessage fails a message whose headers broke a limit or the format. Its
// remaining headers and frames are consumed and dropped when the header said how many
// there are; otherwise the stream is poisoned.
func (e *Engine) rejectMessage(op *multiOp, err error) {
	q := op.queue
	op.status = ucxx.StatusIOError
	if errors.Is(err, ErrLimit) {
		// The header was well formed, so it says how many messages are left to drop,
		// however many: headers not yet received, then every frame.
		op.status = ucxx.StatusExceedsLimit
		total := op.dec.Total()
		if total == 0 {
			total = binary.LittleEndian.Uint64(unsafe.Slice((*byte)(op.headers), HeaderFixedSize)[8:])
		}
		if total <= e.discardCap() {
			q.discardLeft += headersLeft(total, op.headersFed) + total
		} else {
			// Too many to drop in reasonable time: a peer announcing this many frames
			// is broken or hostile, and the stream fails fast instead.
			q.poisoned = op.status
		}
	} else {
		q.poisoned = op.status
	}
	e.finishMulti(op)
	e.nextReceive(q)
}

// discardCap is the most frames a rejected message may announce and still be dropped
// (rather than poisoning its stream): the frame limit, at least minDiscardCap. Beyond
// it, dropping would silently swallow the peer's following messages (a header
// announcing 1.5 million frames would eat as many later messages), so the stream
// breaks at once and every receive on it fails.
func (e *Engine) discardCap() uint64 {
	return max(e.opts.Limits.MaxFrames, minDiscardCap)
}

// minDiscardCap keeps small frame limits from poisoning a stream for a modest excess.
const minDiscardCap = 4096

// headersLeft is how many headers of a message of total frames are still to come after
// fed of them, computed without converting total to int (it may be near 2^64).
func headersLeft(total uint64, fed int) uint64 {
	n := (total + FramesPerHeader - 1) / FramesPerHeader
	if n == 0 {
		n = 1
	}
	if n < uint64(fed) {
		return 0
	}
	return n - uint64(fed)
}

// rejectWhole fails a fully described message and drops its frames.
func (e *Engine) rejectWhole(op *multiOp, st ucxx.Status) {
	q := op.queue
	op.status = st
	q.discardLeft += uint64(len(op.dec.Sizes))
	e.finishMulti(op)
	e.nextReceive(q)
}

// receiveFrames allocates the message's block and posts every frame receive.
func (e *Engine) receiveFrames(op *multiOp) {
	q := op.queue
	if !usable(op.ep) {
		op.status = endpointStatus(op.ep)
		e.finishMulti(op)
		e.nextReceive(q)
		return
	}
	_, size := blockLayout(op.dec.Sizes, op.dec.Types)
	op.block, op.blockSize = ucxx.CMalloc(size), size
	if op.block == nil {
		e.rejectWhole(op, ucxx.StatusNoMemory)
		return
	}
	if op.deferCUDA && hasCUDA(op.dec.Types) {
		e.askForFrames(op, size) // frames.go: the application allocates them
		return
	}
	// CUDA frames first: if one cannot be allocated, nothing is posted yet.
	for i, t := range op.dec.Types {
		if t == MemHost {
			continue
		}
		ptr, err := e.allocCUDA(op.dec.Sizes[i])
		if err != nil {
			e.freeCUDAFrames(op)
			ucxx.CFree(op.block)
			op.block = nil
			e.rejectWhole(op, ucxx.StatusNoMemory)
			return
		}
		op.cudaFrames = append(op.cudaFrames, ptr)
	}
	e.postFrames(op, size)
}

// postFrames writes the block's record and posts every frame receive, in frame order
// (frames share one tag: UCX matches them in the order they are posted), into the
// block and op.cudaFrames; then the stream's next message may start.
func (e *Engine) postFrames(op *multiOp, size uint64) {
	q := op.queue
	rec := newBlockRecord(op.block, len(op.dec.Sizes), size)
	off := alignUp(recordSize(len(op.dec.Sizes)))
	cuda := op.cudaFrames
	for i, sz := range op.dec.Sizes {
		addr, memType := uintptr(op.block)+uintptr(off), ucxx.MemoryHost
		if op.dec.Types[i] == MemHost {
			rec.setFrame(i, off, sz, uint64(MemHost))
			off = alignUp(off + sz)
		} else {
			addr, cuda, memType = cuda[0], cuda[1:], ucxx.MemoryCUDA
			kind := cudaFrameType(e.cuda.current - 1)
			if op.userFrames {
				kind = uint64(MemCUDA) | FrameUserFlag
			}
			rec.setFrame(i, uint64(addr), sz, kind)
		}
		r := e.part(op, opTagRecv, stepMultiPart)
		r.expect = sz
		op.remaining++
		r.track(e.worker.TagRecv(addr, sz, op.tag, ^uint64(0), memType, r.id))
	}
	e.nextReceive(q)
	if op.remaining == 0 {
		e.finishMulti(op)
	}
}

// onMultiPart handles the end of one header or frame of a send, or frame of a receive.
// A received frame must be exactly as long as its header announced: a shorter one
// would leave bytes the peer never wrote in the block (UCX reports a longer one as
// truncated itself). Either fails the message; the stream stays in step, since each
// frame is a tag message of its own.
func (e *Engine) onMultiPart(r *request, st ucxx.Status, length uint64) {
	op := r.multi
	op.remaining--
	if op.recv && st == ucxx.StatusOK && length != r.expect {
		st = ucxx.StatusMessageTruncated
	}
	if st != ucxx.StatusOK && op.status == ucxx.StatusOK {
		op.status = st
	}
	if op.remaining == 0 {
		e.finishMulti(op)
	}
}

// finishMulti reports a multi-buffer op's one completion and recycles it.
func (e *Engine) finishMulti(op *multiOp) {
	// Only once op is done: receiving their frames may finish them, which admits again.
	defer e.receiveAll(e.admission.release(op))
	st := op.status
	if op.abandoned && st == ucxx.StatusOK {
		st = ucxx.StatusCanceled
	}
	var value uint64
	if op.block != nil {
		if st == ucxx.StatusOK {
			value = uint64(uintptr(op.block)) // the application frees it, and the CUDA frames, now
			op.cudaFrames = op.cudaFrames[:0]
		} else {
			ucxx.CFree(op.block)
			if !op.userFrames {
				e.freeCUDAFrames(op)
			}
		}
		op.block = nil
	}
	e.completeNow(op.id, st, value)
	if w := e.requests.remove(op.id); w != nil {
		if w.ep != nil {
			e.maybeFree(w.ep)
		}
		e.requests.recycle(w)
	}
	e.putMultiOp(op)
}

// cancelMulti cancels a multi-buffer op as a whole, never half of it: a send that was
// posted is delivered (its frames are on their way and the receiver expects them); a
// receive that has seen none of its message is cancelled; one that has is received
// and dropped, so the stream stays in step.
func (e *Engine) cancelMulti(op *multiOp) {
	if !op.recv {
		return
	}
	q := op.queue
	if op.awaiting {
		e.dropAwaiting(op, ucxx.StatusCanceled)
		return
	}
	if op.gotHeader {
		op.abandoned = true
		return
	}
	if q.active && len(q.ops) > 0 && q.ops[0] == op {
		// Its header receive is posted: cancelling it completes the op as Canceled.
		for _, id := range op.parts {
			if r := e.requests.get(id); r != nil && !r.canceled {
				r.canceled = true
				e.worker.Cancel(r.ucp)
			}
		}
		return
	}
	// Nothing of it is posted (queued, or held back behind a drop): take it out.
	for i, o := range q.ops {
		if o == op {
			q.ops = append(q.ops[:i], q.ops[i+1:]...)
			break
		}
	}
	op.status = ucxx.StatusCanceled
	e.finishMulti(op)
	if len(q.ops) == 0 {
		e.startRecvMulti(q) // forgets the stream if nothing else holds it
	}
}

// receiveAll receives the frames of admitted messages.
func (e *Engine) receiveAll(admitted []*multiOp) {
	for _, op := range admitted {
		e.receiveFrames(op)
	}
}

// failWaiting fails the messages of an endpoint that wait for room: they have no UCX
// request that closing the endpoint would cancel.
func (e *Engine) failWaiting(ep *endpoint, st ucxx.Status) {
	for _, op := range e.admission.removeEndpoint(ep) {
		op.status = st
		q := op.queue
		e.finishMulti(op)
		e.nextReceive(q)
	}
}
