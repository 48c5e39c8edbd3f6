package core

import (
	"sync/atomic"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/notifier"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// progressThread is what the progress thread's components share: the worker every
// ucp_* call goes to, the requests in flight, the endpoints, and the completions
// waiting for the queue. The Engine embeds it; each component holds a pointer to it
// and owns the rest of its state. Everything here belongs to the progress thread,
// except nextID and the endpoint table's application-thread side.
type progressThread struct {
	worker   *ucxx.Worker
	requests requestTable
	eps      endpointTable
	pending  []notifier.Completion // completions not yet in the ring (completions.go)
	nextID   atomic.Uint64         // request ids, from 1; any thread
	// unexpected holds the messages no receive was posted for (unexpected.go).
	unexpected unexpectedStore
	// inline hands completions straight back to submitting calls that still wait
	// (inline.go); shared with application threads.
	inline inlineSlots
	// routes holds the sinks of requests submitted through one (sink.go), by id.
	routes map[uint64]*Sink
	// heldChanged: endpoints whose held messages changed since settleHeld last ran;
	// stalledAt: where each send flow control holds back is, by request id (flowcontrol.go).
	heldChanged []*endpoint
	stalledAt   map[uint64]stalledPlace
}

// multiBuffers is the multi-buffer component: the receive streams, admission of
// messages, and receives waiting for application-allocated frames (multi*.go,
// admission.go, frames.go).
type multiBuffers struct {
	*progressThread
	cuda      *cudaGate
	limits    Limits
	admission admission
	multiRecv map[multiKey]*multiQueue
	awaiting  map[uint64]*multiOp // need-frames id -> receive waiting for its frames
	// reported: blocks of receives dropped at shutdown while waiting for their frames,
	// which a need-frames completion reported and the application may still read:
	// freed with the queue (Engine.FreeQueue), once it has stopped reading.
	reported []unsafe.Pointer
}

// oneSided is the one-sided component: registered memory, remote keys, transfers and
// semaphores (regions.go, remotekeys.go, rma.go, semaphores.go).
type oneSided struct {
	*progressThread
	ctx     *ucxx.Context // set once the progress thread made it
	regions map[uint64]*region
	index   regionIndex // the regions by address, for register's cache lookup
	remotes map[uint64]*remoteKey
	sems    map[uint64]*localSemaphore
	waits   []*request // semaphore waits pending (stepSemWait)
	// counters makes semaphores' counter pages; retiring holds released semaphores
	// whose page waits for the streams that waited on it (semaphorestreams.go);
	// quarantine holds the pages released since (counterquarantine.go), freed after
	// the worker.
	counters   counterPages
	retiring   []*localSemaphore
	quarantine *quarantinedPages
}

// close releases everything before the worker and context go (shutdown).
func (o *oneSided) close() {
	o.endWaitsIf(func(*request) bool { return true }, ucxx.StatusCanceled)
	for _, r := range o.remotes {
		if r.ep.inflight > 0 {
			// A stop that gave up: a put, get or signal on its endpoint may still use
			// the key inside UCX. It is left undestroyed: the worker's destruction
			// ends those requests, and the key's memory goes with the worker's pool
			// (or leaks), never freed under a request.
			continue
		}
		o.destroyKey(r)
	}
	for _, s := range o.sems {
		o.freeSemaphore(s, ucxx.StatusCanceled)
	}
	// A page some stream still waits behind other work for stays pinned: freeing it
	// under a device that reads it would be worse than keeping a page per such stream.
	o.sweepRetiring()
	for _, s := range o.retiring {
		s.abandon()
	}
	o.retiring = nil
	o.unmapAll()
}

// activeMessages is the active-message component: sends, and each endpoint's
// mailbox of messages and waiting am_recvs (am.go).
type activeMessages struct {
	*progressThread
}
