package core

// Running one input of FuzzMultiReceivePath (fuzz_receive_test.go) on the engines: the
// endpoint pair, the client's steps, and the checks on what the server's receives got
// and on what the input left behind.

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/notifier"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// fzEngines are the engines inputs run on, made once per process, and the endpoint
// pair the last input left clean, which the next input on the same server reuses
// (connecting a pair costs about 20 ms of CPU, most of an input's time).
type fzEngines struct {
	client  *Engine
	servers [2]*Engine // fzRoomy, fzTightOpts
	lh      [2]uint64  // their listeners
	port    [2]int
	cudaOK  bool
	pair    *fzPair
}

// fzPair is a connected endpoint pair and the requests it has in flight when idle
// (its keepalive), on each side.
type fzPair struct {
	server       int // index in fzEngines.servers
	cep, sep     uint64
	cBase, sBase int
}

var fzCounter atomic.Uint32 // fresh low tag bits per input

// fzInbox reads an engine's queue for one input, keeping every completion per id.
type fzInbox struct {
	t   *testing.T
	q   *notifier.Queue
	got map[uint64][]notifier.Completion
	buf [256]notifier.Completion
}

func newFzInbox(t *testing.T, e *Engine) *fzInbox {
	return &fzInbox{t: t, q: e.Queue(), got: make(map[uint64][]notifier.Completion)}
}

// poll takes what the queue holds, waiting up to d for something.
func (b *fzInbox) poll(d time.Duration) {
	n := b.q.Pop(b.buf[:])
	if n == 0 && d > 0 {
		b.q.Wait(d)
		n = b.q.Pop(b.buf[:])
	}
	for _, c := range b.buf[:n] {
		b.got[c.ID] = append(b.got[c.ID], c)
	}
}

// done reports whether id has completed, and its first completion.
func (b *fzInbox) done(id uint64) (notifier.Completion, bool) {
	b.poll(0)
	cs := b.got[id]
	if len(cs) == 0 {
		return notifier.Completion{}, false
	}
	return cs[0], true
}

// wait returns id's first completion, failing the test after timeout.
func (b *fzInbox) wait(id uint64, timeout time.Duration, what string) notifier.Completion {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if c, ok := b.done(id); ok {
			return c
		}
		left := time.Until(deadline)
		if left <= 0 {
			b.t.Fatalf("%s: no completion for %#x within %v", what, id, timeout)
		}
		b.poll(min(left, 20*time.Millisecond))
	}
}

// fzRecvState is one RecvMulti of an input.
type fzRecvState struct {
	id        uint64
	stream    int
	cancelled bool // Cancel was called before it was seen to complete
	stuck     bool // its Cancel was lost (the known bug, see fzOne): it ends at the close
}

// fzRun is one input.
type fzRun struct {
	t              *testing.T
	plan           *fzPlan
	fe             *fzEngines
	client, server *Engine
	pair           *fzPair
	cb, sb         *fzInbox
	tags           [2]uint64 // the streams' tags (MultiTagBit clear)
	honestTag      uint64
	barrierTag     uint64
	recvs          []fzRecvState
	sends          []uint64
	barrierBuf     []byte
	closed         bool        // by close: nothing to abandon
	endStatus      ucxx.Status // besides Canceled, what a receive pending at the close may end with
	lostCancel     string      // a Cancel that did not end its receive at once (BUG, see fzOne)
}

// connect takes the pair the last input left on this server, or connects one, closing
// a pair left on the other server first; then it picks the input's fresh tags.
func (r *fzRun) connect(idx int) {
	t, fe := r.t, r.fe
	t.Helper()
	if fe.pair != nil && fe.pair.server != idx {
		old := &fzRun{t: t, plan: r.plan, client: fe.client, server: fe.servers[fe.pair.server], pair: fe.pair,
			cb: r.cb, sb: newFzInbox(t, fe.servers[fe.pair.server])}
		fe.pair = nil
		old.close()
	}
	if fe.pair == nil {
		id, err := r.client.Connect("127.0.0.1", fe.port[idx], 5*time.Second)
		if err != nil {
			t.Fatalf("Connect: %v", err)
		}
		c := r.cb.wait(id, 10*time.Second, "connect")
		if c.Status != 0 {
			t.Fatalf("Connect: %v", ucxx.Status(c.Status))
		}
		p := &fzPair{server: idx, cep: c.Length}
		p.sep = r.sb.wait(EventListenerAccept|fe.lh[idx], 10*time.Second, "accept").Length
		p.cBase, p.sBase = fzInFlight(t, r.client), fzInFlight(t, r.server)
		fe.pair = p
	}
	r.pair = fe.pair
	fe.pair = nil // until the input leaves it clean
	base := endpointInfo(t, r.client, r.pair.cep).SendTag
	if rt := endpointInfo(t, r.server, r.pair.sep).RecvTag; rt != base {
		t.Fatalf("client sends with tag %#x, server receives on %#x", base, rt)
	}
	low := uint64(fzCounter.Add(1)) << 2 & 0xffffffff
	r.tags = [2]uint64{base | low, base | low | 1}
	r.honestTag, r.barrierTag = base|low|2, base|low|3
}

func fzInFlight(t *testing.T, e *Engine) int {
	s, err := e.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return s.InFlight
}

// tagSend sends msg on tag without waiting: a rendezvous message the server never
// receives completes only when the endpoint closes.
func (r *fzRun) tagSend(msg []byte, tag uint64) {
	id, err := r.client.TagSend(r.pair.cep, addr(msg), uint64(len(msg)), tag, 0, 0)
	if err != nil {
		r.t.Fatalf("TagSend: %v", err)
	}
	r.sends = append(r.sends, id)
}

// barrier exchanges a plain message on the barrier tag: once it is in, everything the
// client sent before has arrived at the server.
func (r *fzRun) barrier() {
	t := r.t
	msg := []byte("barrier")
	rid, err := r.server.TagRecv(r.pair.sep, addr(r.barrierBuf), uint64(len(r.barrierBuf)), r.barrierTag, ^uint64(0), 0, 0)
	if err != nil {
		t.Fatalf("TagRecv: %v", err)
	}
	sid, err := r.client.TagSend(r.pair.cep, addr(msg), uint64(len(msg)), r.barrierTag, 0, 0)
	if err != nil {
		t.Fatalf("TagSend: %v", err)
	}
	if c := r.cb.wait(sid, 5*time.Second, "barrier send"); c.Status != 0 {
		t.Fatalf("barrier send: %v", ucxx.Status(c.Status))
	}
	c := r.sb.wait(rid, 5*time.Second, "barrier receive")
	if c.Status != 0 || c.Length != uint64(len(msg)) || string(r.barrierBuf[:len(msg)]) != string(msg) {
		t.Fatalf("barrier receive: %v, %d bytes", ucxx.Status(c.Status), c.Length)
	}
	runtime.KeepAlive(msg)
	settle(t, r.server)
}

// play runs the plan's steps.
func (r *fzRun) play() {
	t := r.t
	for _, s := range r.plan.steps {
		switch s.kind {
		case fzDoSend:
			r.tagSend(s.msg, r.tags[s.stream]|MultiTagBit)
		case fzDoPlain:
			r.tagSend(s.msg, r.tags[s.stream])
		case fzDoRecv:
			id, err := r.server.RecvMulti(r.pair.sep, r.tags[s.stream])
			if err != nil {
				t.Fatalf("RecvMulti: %v", err)
			}
			r.recvs = append(r.recvs, fzRecvState{id: id, stream: s.stream})
		case fzDoCancel:
			rv := &r.recvs[s.recv]
			_, completed := r.sb.done(rv.id)
			if err := r.server.Cancel(rv.id); err != nil {
				t.Fatalf("Cancel: %v", err)
			}
			if !completed {
				rv.cancelled = true
				r.cancelled(s.recv)
			}
		case fzDoBarrier:
			r.barrier()
		case fzDoRecvCancel:
			release := holdProgress(t, r.server)
			id, err := r.server.RecvMulti(r.pair.sep, r.tags[s.stream])
			if err != nil {
				t.Fatalf("RecvMulti: %v", err)
			}
			if err := r.server.Cancel(id); err != nil {
				t.Fatalf("Cancel: %v", err)
			}
			release()
			r.recvs = append(r.recvs, fzRecvState{id: id, stream: s.stream, cancelled: true})
			r.cancelled(len(r.recvs) - 1)
		}
	}
}

// cancelled waits for receive i, just cancelled, to end: Cancel ends a receive at
// once, whatever part of its message came (multirecv.go, cancelMulti). One that does
// not end within a second fails the input, unless it shows the known lost Cancel (see
// fzOne); then it is noted as stuck and the input goes on: it ends at the close.
func (r *fzRun) cancelled(i int) {
	rv := &r.recvs[i]
	if rv.stuck {
		return
	}
	deadline := time.Now().Add(time.Second)
	for {
		if _, ok := r.sb.done(rv.id); ok {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		r.sb.poll(20 * time.Millisecond)
	}
	// The lost Cancel: the request is marked cancelled (so later Cancels are ignored),
	// yet its receive has its header and goes on for its frames as if never cancelled.
	var lost bool
	if err := r.server.onThread(func() {
		w := r.server.requests.get(rv.id)
		lost = w != nil && w.canceled && w.internal == stepMultiWhole && w.multi != nil &&
			w.multi.id == rv.id && w.multi.gotHeader
	}); err != nil {
		r.t.Fatal(err)
	}
	if !lost {
		r.t.Fatalf("receive %d did not end within 1 s of its Cancel (%v)", i, r.plan)
	}
	rv.stuck = true
	if r.lostCancel == "" {
		r.lostCancel = fmt.Sprintf("receive %d did not end within 1 s of its Cancel (%v)", i, r.plan)
	}
}

// awaitExpected waits until each stream's receives that were never cancelled have
// completed as many times as the model says they must: every outcome of the stream
// (all of them, if it is poisoned) less one per cancelled receive, which may have
// consumed one. An outcome that needs room the other stream may hold for good (an
// admitted message whose frames never come) may wait, and so may those after it.
func (r *fzRun) awaitExpected(models [2]fzModel) {
	t := r.t
	opts := r.server.opts
	bound := uint64(min(opts.MaxEndpointOutstandingBytes, opts.MaxOutstandingBytes))
	var want [2]int
	for s := range models {
		avail := len(models[s].outs)
		if models[s].poison != ucxx.StatusOK {
			avail = len(r.recvs) + len(models[s].outs) // as many as there are receives
		}
		for k, o := range models[s].outs {
			if o.foot > 0 && o.foot+models[1-s].held > bound {
				avail = min(avail, k)
				break
			}
		}
		nc, cancelled := 0, 0
		for _, rv := range r.recvs {
			if rv.stream == s {
				if rv.cancelled {
					cancelled++
				} else {
					nc++
				}
			}
		}
		want[s] = min(nc, max(avail-cancelled, 0))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var got [2]int
		for _, rv := range r.recvs {
			if _, ok := r.sb.done(rv.id); ok && !rv.cancelled {
				got[rv.stream]++
			}
		}
		if got[0] >= want[0] && got[1] >= want[1] {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 5 s, receives completed per stream: %v; want at least %v (%v; model %s)",
				got, want, r.plan, fzModelString(models))
		}
		r.sb.poll(20 * time.Millisecond)
	}
}

// honest sends a well-formed message on a fresh tag of the same endpoint and requires
// it whole, if the room the hostile streams hold leaves it space.
func (r *fzRun) honest() {
	t := r.t
	frames := [][]byte{[]byte("honest"), {}, fzFill(40, 9, 9)}
	foot := int64(footprint([]uint64{6, 0, 40}))
	opts := r.server.opts
	var fits bool
	if err := r.server.onThread(func() {
		ep := r.server.eps.get(r.pair.sep)
		a := &r.server.multi.admission
		fits = ep != nil && ep.heldBytes+foot <= opts.MaxEndpointOutstandingBytes && a.worker.TryAcquire(foot)
		if fits {
			a.worker.Release(foot)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if !fits {
		return
	}
	rid, err := r.server.RecvMulti(r.pair.sep, r.honestTag)
	if err != nil {
		t.Fatalf("RecvMulti: %v", err)
	}
	sid := startSendFrames(t, r.client, r.pair.cep, r.honestTag, frames...)
	c := r.sb.wait(rid, 5*time.Second, fmt.Sprintf("honest message after %v", r.plan))
	if st := ucxx.Status(c.Status); st != ucxx.StatusOK {
		t.Fatalf("honest message after the hostile ones: %v (%v)", st, r.plan)
	}
	checkFrames(t, takeBlock(t, c.Length), frames, "honest message")
	if c := r.cb.wait(sid, 5*time.Second, "honest send"); c.Status != 0 {
		t.Fatalf("honest send: %v", ucxx.Status(c.Status))
	}
	runtime.KeepAlive(frames)
}

// cancelRest cancels every receive still pending and requires each receive to have
// completed exactly once, but those stuck (see cancelled), which end at the close.
func (r *fzRun) cancelRest() {
	t := r.t
	for i := range r.recvs {
		rv := &r.recvs[i]
		if _, ok := r.sb.done(rv.id); !ok {
			rv.cancelled = true
			if err := r.server.Cancel(rv.id); err != nil {
				t.Fatalf("Cancel: %v", err)
			}
		}
	}
	for i := range r.recvs {
		r.cancelled(i)
	}
	settle(t, r.server)
	r.sb.poll(0)
	for i, rv := range r.recvs {
		if n := len(r.sb.got[rv.id]); n != 1 && !rv.stuck {
			t.Fatalf("receive %d completed %d times: %+v (%v)", i, n, r.sb.got[rv.id], r.plan)
		}
	}
}

// anyStuck reports whether a receive waits for the close (see cancelled).
func (r *fzRun) anyStuck() bool {
	for _, rv := range r.recvs {
		if rv.stuck {
			return true
		}
	}
	return false
}

// checkOutcomes compares each stream's completions, in posting order, with its model.
// Those that were not cancelled must be the model's outcomes in order, then its poison,
// where an outcome may be left out only if it failed: a receive cancelled after its
// header came takes its message with it, and a failure of it is reported to nobody
// (at most one per cancelled receive). An OK receive must carry exactly the next OK
// message's frames. A Canceled completion must be of a cancelled receive; no failure
// carries a block.
func (r *fzRun) checkOutcomes(models [2]fzModel) {
	t := r.t
	for s := range models {
		m := models[s]
		pos, skipped, cancelled, partial := 0, 0, 0, m.partial
		for i, rv := range r.recvs {
			if rv.stream != s {
				continue
			}
			c := r.sb.got[rv.id][0]
			st := ucxx.Status(c.Status)
			where := func() string {
				return fmt.Sprintf("stream %d, receive %d: %v (%v; model %s)", s, i, st, r.plan, fzModelString(models))
			}
			if st != ucxx.StatusOK && c.Length != 0 {
				t.Fatalf("%s: a failed receive with a block %#x", where(), c.Length)
			}
			if st == ucxx.StatusCanceled || (st == r.endStatus && r.endStatus != ucxx.StatusOK && rv.cancelled) {
				if !rv.cancelled {
					t.Fatalf("%s: Canceled, but never cancelled", where())
				}
				cancelled++
				continue
			}
			// Find the first outcome at pos or after that matches, skipping failures only.
			for {
				if pos >= len(m.outs) {
					if rv.cancelled && partial != ucxx.StatusOK && st == partial {
						partial = ucxx.StatusOK // the close ended the incomplete message
						break
					}
					if m.poison == ucxx.StatusOK || st != m.poison {
						block := "no block"
						if st == ucxx.StatusOK {
							got := takeBlock(t, c.Length)
							block = fmt.Sprintf("%d frames", len(got))
						}
						t.Fatalf("%s (%s): more messages than the peer sent whole, or the wrong poison", where(), block)
					}
					break
				}
				o := m.outs[pos]
				if o.st == st {
					pos++
					if st == ucxx.StatusOK {
						checkFrames(t, takeBlock(t, c.Length), o.frames, where())
					}
					break
				}
				if o.st == ucxx.StatusOK {
					if st == ucxx.StatusOK {
						ucxx.CFreeAddr(uintptr(c.Length))
					}
					t.Fatalf("%s: the model's next message (outcome %d) is OK: a message lost, reordered or failed", where(), pos)
				}
				pos++
				skipped++
			}
		}
		if skipped > cancelled {
			t.Fatalf("stream %d: %d failed messages reported to nobody, but only %d receives cancelled (%v; model %s)",
				s, skipped, cancelled, r.plan, fzModelString(models))
		}
	}
}

// drain receives, through TagProbe and RecvProbed, every message of the input's tags
// that no receive took (the barrier made sure all have arrived).
func (r *fzRun) drain() {
	t := r.t
	for {
		res, err := r.server.TagProbe(r.tags[0], ^(MultiTagBit | 3), true)
		if err != nil {
			t.Fatalf("TagProbe: %v", err)
		}
		if !res.Found {
			return
		}
		buf := make([]byte, max(res.Length, 1))
		id, err := r.server.RecvProbed(res.Handle, addr(buf), uint64(len(buf)))
		if err != nil {
			t.Fatalf("RecvProbed: %v", err)
		}
		if c := r.sb.wait(id, 5*time.Second, "receiving a message left over"); c.Status != 0 || c.Length != res.Length {
			t.Fatalf("receiving a message left over: %v, %d bytes of %d", ucxx.Status(c.Status), c.Length, res.Length)
		}
		runtime.KeepAlive(buf)
	}
}

// leftovers decides whether the next input may reuse the pair: nothing of this input
// in flight on either side (the server's drops and frames that never came, the
// client's rendezvous sends nobody received), no room held and no message held for
// the endpoint, and no stream of the input's tags kept but a poisoned one, which
// lives as long as its endpoint. It returns how many of the input's streams are kept
// although idle.
func (r *fzRun) leftovers() (idleKept int) {
	t := r.t
	reusable := fzInFlight(t, r.client) == r.pair.cBase && fzInFlight(t, r.server) == r.pair.sBase
	if err := r.server.onThread(func() {
		ep := r.server.eps.get(r.pair.sep)
		m := &r.server.multi
		if ep == nil || ep.phase != phaseReady || ep.heldBytes != 0 || ep.unexpectedBytes != 0 ||
			len(m.admission.waiting) != 0 || len(m.awaiting) != 0 {
			reusable = false
		}
		for key, q := range m.multiRecv {
			if key.ep != r.pair.sep || key.tag&^(MultiTagBit|3) != r.tags[0] {
				continue
			}
			switch {
			case q.idle():
				idleKept++
			case q.poisoned != ucxx.StatusOK && len(q.ops) == 0 && !q.active && q.discardLeft == 0 &&
				q.discardInFlight == 0 && q.receiving == 0 && len(q.ready) == 0:
			default:
				reusable = false
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if reusable {
		r.fe.pair = r.pair
	}
	return idleKept
}

// closeWithPending closes the pair with the receives still pending: each must end
// once, with Canceled (or, when the peer aborted first, the endpoint's error) or its
// message.
func (r *fzRun) closeWithPending() {
	t := r.t
	for i := range r.recvs {
		if _, ok := r.sb.done(r.recvs[i].id); !ok {
			r.recvs[i].cancelled = true
		}
	}
	if r.plan.peerAborts {
		if err := r.client.AbortEndpoint(r.pair.cep); err != nil {
			t.Fatalf("AbortEndpoint: %v", err)
		}
		ev := r.sb.wait(EventEndpointError|r.pair.sep, 10*time.Second, "the server's endpoint error after the peer aborted")
		if r.endStatus = ucxx.Status(ev.Status); r.endStatus == ucxx.StatusOK {
			t.Fatalf("endpoint error event with status OK")
		}
	}
	r.close()
}

// abandon aborts the pair of an input that failed before handing the pair on or
// closing it, so that later inputs (the fuzzer's minimization among them) start from
// engines with no endpoint.
func (r *fzRun) abandon() {
	if r.closed || r.fe.pair == r.pair {
		return
	}
	r.server.AbortEndpoint(r.pair.sep)
	r.client.AbortEndpoint(r.pair.cep)
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		c, cerr := r.client.Stats()
		s, serr := r.server.Stats()
		if cerr != nil || serr != nil || c.Endpoints+s.Endpoints == 0 {
			return
		}
	}
}

// close closes the pair and requires both engines idle: no endpoint, nothing in
// flight, every send ended once, and on the server no stream kept, no message waiting
// for room and all room given back.
func (r *fzRun) close() {
	t := r.t
	r.closed = true
	if r.plan.graceful {
		id, err := r.server.CloseEndpoint(r.pair.sep, time.Second)
		if err != nil {
			t.Fatalf("CloseEndpoint: %v", err)
		}
		r.sb.wait(id, 5*time.Second, "close")
	} else {
		if err := r.server.AbortEndpoint(r.pair.sep); err != nil {
			t.Fatalf("AbortEndpoint: %v", err)
		}
		// The abort is queued to the server's progress thread: let it run before the
		// client's abort, whose reset could otherwise reach the server first and end
		// its pending receives with ConnectionReset rather than the close's Canceled
		// (both legitimate; the model expects the close's).
		if err := r.server.onThread(func() {}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.client.AbortEndpoint(r.pair.cep); err != nil {
		t.Fatalf("AbortEndpoint: %v", err)
	}
	for i, id := range r.sends {
		r.cb.wait(id, 5*time.Second, fmt.Sprintf("send %d after the close (%v)", i, r.plan))
		if n := len(r.cb.got[id]); n != 1 {
			t.Fatalf("send %d completed %d times (%v)", i, n, r.plan)
		}
	}
	for i, rv := range r.recvs {
		r.sb.wait(rv.id, 5*time.Second, fmt.Sprintf("receive %d after the close (%v)", i, r.plan))
	}
	waitIdle(t, r.client)
	waitIdle(t, r.server)
	r.sb.poll(0)
	for i, rv := range r.recvs {
		if n := len(r.sb.got[rv.id]); n != 1 {
			t.Fatalf("receive %d completed %d times: %+v (%v)", i, n, r.sb.got[rv.id], r.plan)
		}
	}
	opts := r.server.opts
	var streams, waiting, awaiting int
	var roomBack bool
	if err := r.server.onThread(func() {
		m := &r.server.multi
		streams, waiting, awaiting = len(m.multiRecv), len(m.admission.waiting), len(m.awaiting)
		if roomBack = m.admission.worker.TryAcquire(opts.MaxOutstandingBytes); roomBack {
			m.admission.worker.Release(opts.MaxOutstandingBytes)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if streams != 0 || waiting != 0 || awaiting != 0 || !roomBack {
		t.Fatalf("after the close: %d streams kept, %d messages waiting for room, %d awaiting frames, all room back: %t (%v)",
			streams, waiting, awaiting, roomBack, r.plan)
	}
}
