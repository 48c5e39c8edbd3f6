package core

import (
	crand "crypto/rand"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// endpointTable is the engine's endpoints, by handle, by receive tag, by deadline,
// and, for application threads, the ready ones. It belongs to the progress thread,
// except live and budgets, which application threads call.
type endpointTable struct {
	byHandle  map[uint64]*endpoint // every endpoint UCX has not finished closing
	byRecvTag map[uint64]*endpoint // ready endpoints by receive tag (active messages)
	timed     []*endpoint          // endpoints with a handshake or close deadline
	// ucxClosing counts endpoints whose UCX close is in flight: a forced close ends
	// in some pass of ucp_worker_progress with no event to wake the thread for it.
	ucxClosing int
	// byTagID: every endpoint by the id in its receive tag (tags.go) and in its
	// control tag (direct.go), and the last maxRetiredTagIDs ids of removed ones
	// (retired, oldest first), so that messages still arriving for a closed endpoint
	// are known as its own (unexpected.go).
	byTagID map[uint32]*endpoint
	retired []uint32

	// mu guards published, and dead's changes (the progress thread, its only writer,
	// reads it without).
	mu        sync.RWMutex
	published map[uint64]*endpoint // endpoints the application was given, until closed
	// dead remembers endpoints their peer broke, after UCX closed them, until the
	// application closes or aborts them: a receive may still drain what the peer sent
	// before it went away (UCXX's semantics), and work submitted on one fails with the
	// status it broke with (live), not as closed.
	dead map[uint64]deadEndpoint

	// tagIDs draws the endpoint ids of new tags (newRecvTag).
	tagIDs *rand.Rand

	// thread trips when another thread uses the progress thread's side (threadowner.go).
	thread threadOwner
}

func newEndpointTable() endpointTable {
	return endpointTable{
		byHandle:  make(map[uint64]*endpoint),
		byRecvTag: make(map[uint64]*endpoint),
		dead:      make(map[uint64]deadEndpoint),
		byTagID:   make(map[uint32]*endpoint),
		published: make(map[uint64]*endpoint),
		tagIDs:    rand.New(rand.NewChaCha8(tagSeed())),
	}
}

// add registers a new endpoint.
func (t *endpointTable) add(ep *endpoint) {
	t.thread.check("endpoint table")
	t.byHandle[ep.handle] = ep
	if id := tagEndpointID(ep.recvTag); id != 0 {
		t.byTagID[id] = ep
	}
}

// dropTagID takes back ep's receive tag before anyone learnt it: ep keeps none.
func (t *endpointTable) dropTagID(ep *endpoint) {
	t.thread.check("endpoint table")
	if id := tagEndpointID(ep.recvTag); id != 0 && t.byTagID[id] == ep {
		delete(t.byTagID, id)
	}
	ep.recvTag = 0
}

// addControlTag registers ep's control tag's id as its own (direct.go), so control
// words that arrive unasked are held as its messages (unexpected.go).
func (t *endpointTable) addControlTag(ep *endpoint) {
	t.thread.check("endpoint table")
	t.byTagID[tagEndpointID(ep.ctlTag)] = ep
}

// newRecvTag returns a receive tag whose endpoint id no endpoint in the table has.
func (t *endpointTable) newRecvTag() uint64 {
	t.thread.check("endpoint table")
	for {
		if id := t.tagIDs.Uint32() & tagEndpointIDMask; id != 0 && t.byTagID[id] == nil {
			return uint64(id) << UserTagBits
		}
	}
}

// tagSeed seeds an engine's tag ids from the kernel. Not from math/rand's global
// source: Go seeds that from the process's AT_RANDOM bytes, which a child forked
// before the extension loaded shares with its parent, so a parent and child that
// both start Go after the fork drew the same ids, and a connection between them
// failed as connected to itself (dialing.go), in about one try of four.
func tagSeed() (seed [32]byte) {
	if _, err := crand.Read(seed[:]); err != nil { // not on Linux: getrandom
		binary.LittleEndian.PutUint64(seed[:], uint64(time.Now().UnixNano()))
		binary.LittleEndian.PutUint64(seed[8:], uint64(os.Getpid()))
	}
	return seed
}

// owner returns the endpoint whose receive tag the message tag carries, or nil.
func (t *endpointTable) owner(tag uint64) *endpoint {
	t.thread.check("endpoint table")
	if id := tagEndpointID(tag); id != 0 {
		return t.byTagID[id]
	}
	return nil
}

// get returns the endpoint with handle h, or nil.
func (t *endpointTable) get(h uint64) *endpoint {
	t.thread.check("endpoint table")
	return t.byHandle[h]
}

// byTag returns the ready endpoint whose receive tag is tag, or nil.
func (t *endpointTable) byTag(tag uint64) *endpoint {
	t.thread.check("endpoint table")
	return t.byRecvTag[tag]
}

// len is how many endpoints UCX has not finished closing.
func (t *endpointTable) len() int {
	t.thread.check("endpoint table")
	return len(t.byHandle)
}

// publish makes a ready endpoint visible to application threads (and, with
// byTag, to its active messages), with its description fixed (EndpointInfo).
func (t *endpointTable) publish(ep *endpoint, withTag bool) {
	t.thread.check("endpoint table")
	if withTag {
		t.byRecvTag[ep.recvTag] = ep
	}
	ep.info = ep.describe()
	t.mu.Lock()
	t.published[ep.handle] = ep
	t.mu.Unlock()
}

// untag stops routing active messages to ep.
func (t *endpointTable) untag(ep *endpoint) {
	t.thread.check("endpoint table")
	if t.byRecvTag[ep.recvTag] == ep {
		delete(t.byRecvTag, ep.recvTag)
	}
}

// remove forgets an endpoint UCX has closed (or never opened), remembering it as dead
// when its peer broke a connection the application was given.
func (t *endpointTable) remove(ep *endpoint) {
	t.thread.check("endpoint table")
	delete(t.byHandle, ep.handle)
	t.retire(ep, ep.recvTag)
	t.retire(ep, ep.ctlTag)
	t.mu.Lock()
	delete(t.published, ep.handle)
	if st := ucxx.Status(ep.failed.Load()); ep.known && st != ucxx.StatusCanceled && st != ucxx.StatusOK {
		t.dead[ep.handle] = deadEndpoint{status: st, sendTag: ep.sendTag, recvTag: ep.recvTag}
	}
	t.mu.Unlock()
}

// retire keeps tag's endpoint id known as ep's for a while after ep goes (the last
// maxRetiredTagIDs), so messages still arriving for it are dropped as a closed
// endpoint's rather than held as nobody's or matched by a new endpoint's id.
func (t *endpointTable) retire(ep *endpoint, tag uint64) {
	id := tagEndpointID(tag)
	if id == 0 || t.byTagID[id] != ep {
		return
	}
	t.retired = append(t.retired, id)
	if len(t.retired) > maxRetiredTagIDs {
		old := t.retired[0]
		t.retired = t.retired[1:]
		if o := t.byTagID[old]; o != nil && o.phase == phaseClosed {
			delete(t.byTagID, old)
		}
	}
}

// deadEndpoint is what the table remembers of an endpoint its peer broke: why, and
// its tags, which the application may still ask for (EndpointInfo) to receive what
// the peer sent before it went away.
type deadEndpoint struct {
	status           ucxx.Status
	sendTag, recvTag uint64
}

// maxRetiredTagIDs bounds the closed endpoints byTagID remembers.
const maxRetiredTagIDs = 1024

// deadStatus is the status a dead endpoint's peer broke it with.
func (t *endpointTable) deadStatus(h uint64) (ucxx.Status, bool) {
	d, ok := t.deadInfo(h)
	return d.status, ok
}

// deadInfo is what is remembered of the dead endpoint h.
func (t *endpointTable) deadInfo(h uint64) (deadEndpoint, bool) {
	t.thread.check("endpoint table")
	d, ok := t.dead[h]
	return d, ok
}

// forget drops what is remembered of a dead endpoint the application closed.
func (t *endpointTable) forget(h uint64) {
	t.thread.check("endpoint table")
	t.mu.Lock()
	delete(t.dead, h)
	t.mu.Unlock()
}

// schedule sets ep's deadline and watches it.
func (t *endpointTable) schedule(ep *endpoint, deadline time.Time) {
	t.thread.check("endpoint table")
	ep.deadline = deadline
	t.timed = append(t.timed, ep)
}

// expire calls check for every watched endpoint, keeping those it returns true for.
func (t *endpointTable) expire(check func(*endpoint) bool) {
	t.thread.check("endpoint table")
	keep := t.timed[:0]
	for _, ep := range t.timed {
		if check(ep) {
			keep = append(keep, ep)
		}
	}
	clear(t.timed[len(keep):])
	t.timed = keep
}

// nextDeadline is the earliest watched deadline, or the zero time.
func (t *endpointTable) nextDeadline() time.Time {
	t.thread.check("endpoint table")
	var d time.Time
	for _, ep := range t.timed {
		if d.IsZero() || ep.deadline.Before(d) {
			d = ep.deadline
		}
	}
	return d
}

// live returns the published endpoint h if application work may still be queued on
// it. Application threads.
func (t *endpointTable) live(h uint64) (*endpoint, error) {
	t.mu.RLock()
	ep := t.published[h]
	if ep == nil {
		d, dead := t.dead[h]
		t.mu.RUnlock()
		if dead { // its peer broke it and UCX has closed it since
			return nil, &ucxx.Error{Op: "Endpoint", Status: d.status}
		}
		return nil, ErrEndpointClosed
	}
	t.mu.RUnlock()
	switch st := ucxx.Status(ep.failed.Load()); st {
	case ucxx.StatusOK:
		return ep, nil
	case ucxx.StatusCanceled: // closed or aborted by the application
		return nil, ErrEndpointClosed
	default: // broken: say how
		return nil, &ucxx.Error{Op: "Endpoint", Status: st}
	}
}

// publishedInfo is the description of the published endpoint h; false when h is not
// published. Application threads.
func (t *endpointTable) publishedInfo(h uint64) (EndpointInfo, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if ep := t.published[h]; ep != nil {
		return ep.info, true
	}
	return EndpointInfo{}, false
}

// status is the status that ended the published endpoint h: StatusOK while it is
// usable, why its peer broke it, StatusCanceled once the application closed it or
// it never was. Application threads.
func (t *endpointTable) status(h uint64) ucxx.Status {
	t.mu.RLock()
	ep := t.published[h]
	if ep == nil {
		d, dead := t.dead[h]
		t.mu.RUnlock()
		if dead {
			return d.status
		}
		return ucxx.StatusCanceled
	}
	t.mu.RUnlock()
	return ucxx.Status(ep.failed.Load())
}

// recvBudget is the inline-wait budget of receives on endpoint h, or fallback when h
// is not published. Application threads.
func (t *endpointTable) recvBudget(h uint64, fallback *inlineBudget) *inlineBudget {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if ep := t.published[h]; ep != nil {
		return &ep.inlineRecv
	}
	return fallback
}
