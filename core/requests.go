package core

import (
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// request is one operation in flight: dispatched to UCX and not yet completed.
type request struct {
	id       uint64
	op       opKind
	ep       *endpoint      // nil for worker-level operations
	ucp      unsafe.Pointer // the UCP request while UCX runs it; nil for an immediate end
	canceled bool           // ucp_request_cancel was already called
	slot     uint8          // inline completion slot + 1 of a waiting submitter, or 0
	// override replaces UCX's status when the request was cancelled on the
	// application's behalf: the endpoint's error, so a receive pending when the peer
	// dies fails with ConnectionReset rather than Canceled.
	override ucxx.Status
	// internal requests belong to the engine (handshake, close); their completion
	// drives an endpoint's state instead of reaching the application.
	internal internalStep
	multi    *multiOp       // the multi-buffer message this request is part of, or stands for
	stream   *multiQueue    // stepMultiDiscard: the stream whose message it drops
	data     unsafe.Pointer // stepAMData: the block the message is fetched into
	arrival  *amArrival     // stepAMData: the message's place in its endpoint's mailbox
	// expect is the length a receive into memory the engine allocated must deliver
	// (a multi-buffer frame, a rendezvous active message): a peer that sends fewer or
	// more bytes than it announced fails the message, so no byte it did not write
	// reaches the application.
	expect uint64
	// sent is a send's length, which its completion reports (UCX's send callback
	// carries none).
	sent uint64
	// word is what a control send sends.
	word controlWord
	rma  *rmaOp          // stepRMAPart: the transfer request this part belongs to
	sem  *localSemaphore // stepSemWait: the semaphore waited on (expect: the value)
	// cuda: the request moves CUDA memory (markCUDA), counted in requestTable.cuda.
	cuda bool
}

// internalStep says what an engine-owned request was for.
type internalStep uint8

const (
	notInternal internalStep = iota
	stepHandshakeSend
	stepHandshakeRecv
	stepClose
	stepMultiPart      // a header or frame of a multi-buffer send, or a frame of a receive
	stepMultiHeader    // a header of a multi-buffer receive
	stepMultiWhole     // stands for a whole multi-buffer operation (no UCX request), for Cancel
	stepMultiDiscard   // consumes and drops one message of a rejected multi-buffer message
	stepAMWait         // an application's am_recv waiting for a message (no UCX request)
	stepAMData         // fetching a rendezvous active message
	stepControlSend    // a control word to the peer (control.go)
	stepControlRecv    // the control receive every ready endpoint keeps posted
	stepDropUnexpected // receives a held message into nothing (unexpected.go)
	stepRMAPart        // one put or get of an application's transfer request (rma.go)
	stepSemWait        // an application's semaphore wait (no UCX request)
	stepWorkerFlush    // the warm-up's flush of the worker (warmup.go: settleDiscards)
)

// requestTable maps request ids to requests in flight. It belongs to the progress
// thread. Requests are recycled through a free list, and Go maps reuse their space
// after deletes, so steady-state traffic allocates nothing here.
type requestTable struct {
	byID map[uint64]*request
	free []*request
	// cuda counts requests in flight that move CUDA memory. UCX's CUDA transports
	// end a copy with no event to wake the progress thread: while such requests
	// are in flight it keeps spinning (progress.go, cudaSpinFor).
	cuda int
	// thread trips when another thread uses the table (threadowner.go).
	thread threadOwner
}

func newRequestTable() requestTable {
	return requestTable{byID: make(map[uint64]*request, 1024)}
}

func (t *requestTable) add(id uint64, op opKind, ep *endpoint) *request {
	t.thread.check("request table")
	var r *request
	if n := len(t.free); n > 0 {
		r = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		r = new(request)
	}
	*r = request{id: id, op: op, ep: ep}
	t.byID[id] = r
	if ep != nil {
		ep.inflight++
		if isSend(op) {
			ep.sends++
		}
	}
	return r
}

func (t *requestTable) get(id uint64) *request {
	t.thread.check("request table")
	return t.byID[id]
}

// markCUDA records that r, in the table, moves memory of UCS memory type memType:
// CUDA memory is counted until r is removed.
func (t *requestTable) markCUDA(r *request, memType int) {
	t.thread.check("request table")
	if memType == ucxx.MemoryCUDA && !r.cuda {
		r.cuda = true
		t.cuda++
	}
}

// remove takes a completed request out of the table; the caller recycles it.
func (t *requestTable) remove(id uint64) *request {
	t.thread.check("request table")
	r, ok := t.byID[id]
	if !ok {
		return nil
	}
	delete(t.byID, id)
	if r.cuda {
		t.cuda--
	}
	if r.ep != nil {
		r.ep.inflight--
		if isSend(r.op) {
			r.ep.sends--
		}
	}
	return r
}

// isSend reports whether requests of kind op send on their endpoint.
func isSend(op opKind) bool { return op == opTagSend || op == opAMSend || op == opRMA || op == opFlush }

// track records the UCP request of an operation UCX is still running; one that ended
// at once (any other status) already has its completion event, and nothing to track.
func (r *request) track(req unsafe.Pointer, st ucxx.Status) {
	if st == ucxx.StatusInProgress {
		r.ucp = req
	}
}

func (t *requestTable) recycle(r *request) {
	t.thread.check("request table")
	*r = request{}
	t.free = append(t.free, r)
}

func (t *requestTable) len() int {
	t.thread.check("request table")
	return len(t.byID)
}
