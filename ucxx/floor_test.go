package ucxx

import (
	"runtime"
	"testing"
	"time"
	"unsafe"
)

// The floor of UCX through this package's cgo layer, without core's engine: an 8-byte
// tag ping-pong between two workers, each with its own context as two processes would
// have, progressed by one goroutine locked to its OS thread in a polling loop. What the
// engine adds on top (submission hand-off, progress thread wake-ups, completion queue)
// is core's BenchmarkSubmitDispatch minus this; what cgo adds is this minus
// ucx_perftest's tag_lat round trip (benchmarks/ucx_floor.py).

const (
	pingTag = 1 // client -> server
	pongTag = 2 // server -> client
	// pingPongTimeout bounds one round trip, so a lost message fails the benchmark
	// instead of hanging it.
	pingPongTimeout = 5 * time.Second
	// deadlineEvery is how many polls pass between clock reads: a clock read per poll
	// would be a visible part of a round trip of a few microseconds.
	deadlineEvery = 1024
)

// pingPongPeer is one side: its worker, its endpoint to the other side, and an 8-byte
// C buffer it sends from and receives into (C memory: UCX holds it across calls).
type pingPongPeer struct {
	worker *Worker
	ep     *Endpoint
	buf    unsafe.Pointer
}

// pingPong is two peers sharing the calling thread's event buffer: UCX's callbacks run
// on the thread that progresses a worker, and both workers are progressed here, so every
// event of either lands in the one buffer attached to it (the client worker's).
type pingPong struct {
	client, server pingPongPeer
	nextID         uint64
	done           map[uint64]bool // request ids completed and not yet waited for
}

// newPingPong connects two workers by address. It locks the calling goroutine to its
// OS thread until the benchmark's cleanups have run: the event buffer is that
// thread's.
func newPingPong(b *testing.B) *pingPong {
	b.Helper()
	runtime.LockOSThread()
	b.Cleanup(runtime.UnlockOSThread) // first registered, so it runs last
	p := &pingPong{done: make(map[uint64]bool)}
	newPeer := func() pingPongPeer {
		w := newContextWorker(b, nil)
		buf := CMalloc(8)
		if buf == nil {
			b.Fatal("CMalloc(8) failed")
		}
		b.Cleanup(func() { CFree(buf) })
		return pingPongPeer{worker: w, buf: buf}
	}
	// The client first: cleanups run in reverse, so its worker, whose event buffer
	// both use, is destroyed after the server's, whose teardown may still call back.
	p.client = newPeer()
	p.client.worker.AttachEvents()
	p.server = newPeer()

	connect := func(from, to *pingPongPeer, handle uint64) {
		addr, err := to.worker.Address()
		if err != nil {
			b.Fatal(err)
		}
		if from.ep, err = from.worker.ConnectAddress(addr, handle); err != nil {
			b.Fatal(err)
		}
	}
	connect(&p.client, &p.server, 1)
	connect(&p.server, &p.client, 2)
	b.Cleanup(func() { p.close(b) }) // last registered: before any worker goes
	return p
}

// poll progresses both workers once and records the completions they produced.
func (p *pingPong) poll(b *testing.B) {
	p.client.worker.Progress()
	p.server.worker.Progress()
	p.drain(b)
}

// drain records the buffered events: completions by id (their requests freed). It
// fails on anything else, since nothing else is expected while the pair is up.
func (p *pingPong) drain(b *testing.B) {
	for _, ev := range p.client.worker.Events() {
		if ev.Kind != EventCompletion {
			b.Fatalf("unexpected event %+v", ev)
		}
		FreeRequest(ev.Ptr)
		if ev.Status != StatusOK {
			b.Fatalf("request %d: %v", ev.ID, ev.Status)
		}
		p.done[ev.ID] = true
	}
	p.client.worker.ResetEvents()
}

// start submits one operation through op, which returns UCX's immediate result, and
// returns its id. The completion event is collected by drain, now for an operation
// that ended at once (its event is already buffered), or by a later poll.
func (p *pingPong) start(b *testing.B, what string, op func(id uint64) (unsafe.Pointer, Status)) uint64 {
	p.nextID++
	id := p.nextID
	if _, st := op(id); st != StatusOK && st != StatusInProgress {
		b.Fatalf("%s: %v", what, st)
	}
	p.drain(b)
	return id
}

// wait polls until request id has completed, failing after pingPongTimeout. The clock
// is first read after deadlineEvery polls, so a fast completion never reads it.
func (p *pingPong) wait(b *testing.B, id uint64) {
	var deadline time.Time
	for polls := 1; !p.done[id]; polls++ {
		if polls%deadlineEvery == 0 {
			if now := time.Now(); deadline.IsZero() {
				deadline = now.Add(pingPongTimeout)
			} else if now.After(deadline) {
				b.Fatalf("request %d not complete after %v", id, pingPongTimeout)
			}
		}
		p.poll(b)
	}
	delete(p.done, id)
}

func (p *pingPong) tagSend(b *testing.B, from *pingPongPeer, tag uint64) uint64 {
	return p.start(b, "TagSend", func(id uint64) (unsafe.Pointer, Status) {
		return from.ep.TagSend(uintptr(from.buf), 8, tag, MemoryUnknown, id)
	})
}

func (p *pingPong) tagRecv(b *testing.B, into *pingPongPeer, tag uint64) uint64 {
	return p.start(b, "TagRecv", func(id uint64) (unsafe.Pointer, Status) {
		return into.worker.TagRecv(uintptr(into.buf), 8, tag, ^uint64(0), MemoryUnknown, id)
	})
}

// roundTrip is one ping and its pong, every completion (the sends' too) awaited.
func (p *pingPong) roundTrip(b *testing.B) {
	serverRecv := p.tagRecv(b, &p.server, pingTag)
	clientRecv := p.tagRecv(b, &p.client, pongTag)
	ping := p.tagSend(b, &p.client, pingTag)
	p.wait(b, serverRecv)
	pong := p.tagSend(b, &p.server, pongTag)
	p.wait(b, clientRecv)
	p.wait(b, ping)
	p.wait(b, pong)
}

// close force-closes both endpoints and progresses until both closes completed,
// within pingPongTimeout. Statuses and endpoint-error events are expected here (the
// peer of a closed endpoint may report it) and ignored; requests are freed.
func (p *pingPong) close(b *testing.B) {
	open := make(map[uint64]bool)
	for _, peer := range []*pingPongPeer{&p.client, &p.server} {
		if peer.ep == nil {
			continue
		}
		p.nextID++
		peer.ep.Close(true, p.nextID)
		open[p.nextID] = true
	}
	deadline := time.Now().Add(pingPongTimeout)
	for len(open) > 0 {
		for _, ev := range p.client.worker.Events() {
			if ev.Kind == EventCompletion {
				FreeRequest(ev.Ptr)
				delete(open, ev.ID)
			}
		}
		p.client.worker.ResetEvents()
		if time.Now().After(deadline) {
			b.Errorf("endpoint close requests %v not complete after %v", open, pingPongTimeout)
			return
		}
		p.client.worker.Progress()
		p.server.worker.Progress()
	}
}

// BenchmarkTagPingPong: ns/op is one 8-byte round trip (ucx_perftest's tag_lat reports
// half of it). UCX chooses the transport, as it does for the engine: our endpoints ask
// for peer error handling, which this UCX's shared-memory transports cannot give, so
// it is TCP on lo (UCX_TLS=sm,self fails to connect; see benchmarks/ucx_floor.py).
func BenchmarkTagPingPong(b *testing.B) {
	p := newPingPong(b)
	p.roundTrip(b) // wire-up: the first messages establish the connection's lanes
	b.ReportAllocs()
	for b.Loop() {
		p.roundTrip(b)
	}
}
