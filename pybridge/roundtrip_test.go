package pybridge

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/core"
	"github.com/ucxx-go/ucxx-go/notifier"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// The bridge's functions driving one engine, as Python does: Start, a connection from
// the engine to its own listener, transfers of every kind, Stop. Completions are read
// from the engine's queue (Python reads the same ring in place), waiting with
// NotifierWait.

// startBridge starts the bridge's engine with limits (JSON) and stops it at cleanup.
// It returns Start's "ring_address ring_size eventfd queue_id", and sets bridgeRing.
func startBridge(t *testing.T, limits string) string {
	t.Helper()
	t.Setenv("UCX_NET_DEVICES", "lo")
	res, err := Start("", "blocking", true, limits, "", false)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	bridgeRing = words(t, res, 4)[3]
	ring := bridgeRing
	t.Cleanup(func() {
		if _, err := Stop(5000); err != nil {
			t.Errorf("Stop: %v", err)
		}
		FreeQueue(ring)
	})
	return res
}

// bridgeRing is the id of the queue of the engine startBridge started last: the name
// by which NotifierWait, ConsumeWake and FreeQueue take it.
var bridgeRing uint64

// fields splits a result of space-separated words into exactly n words.
func fields(t *testing.T, res string, n int) []string {
	t.Helper()
	f := strings.Fields(res)
	if len(f) != n {
		t.Fatalf("result %q: %d words, want %d", res, len(f), n)
	}
	return f
}

// words parses a result of space-separated unsigned integers.
func words(t *testing.T, res string, n int) []uint64 {
	t.Helper()
	out := make([]uint64, n)
	for i, w := range fields(t, res, n) {
		v, err := strconv.ParseUint(w, 10, 64)
		if err != nil {
			t.Fatalf("result %q: word %d: %v", res, i, err)
		}
		out[i] = v
	}
	return out
}

// bridgeQueue is the queue of the running engine, or of the one last stopped.
func bridgeQueue(t *testing.T) *notifier.Queue {
	t.Helper()
	e := queues.get(bridgeRing)
	if e == nil {
		t.Fatal("no engine")
	}
	return e.Queue()
}

// completions reads the bridge engine's queue with deadlines.
type completions struct {
	t   *testing.T
	got map[uint64]notifier.Completion
	buf [64]notifier.Completion
}

func newCompletions(t *testing.T) *completions {
	return &completions{t: t, got: make(map[uint64]notifier.Completion)}
}

// wait returns the completion of id, failing the test after 10 s.
func (c *completions) wait(id uint64) notifier.Completion {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if comp, ok := c.got[id]; ok {
			delete(c.got, id)
			return comp
		}
		n := bridgeQueue(c.t).Pop(c.buf[:])
		for _, comp := range c.buf[:n] {
			c.got[comp.ID] = comp
		}
		if n > 0 {
			continue
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no completion for request %#x within 10 s", id)
		}
		if _, err := NotifierWait(bridgeRing, 100); err != nil {
			c.t.Fatalf("NotifierWait: %v", err)
		}
	}
}

// ok waits for id and fails the test unless it succeeded; it returns the length.
func (c *completions) ok(id uint64, what string) uint64 {
	c.t.Helper()
	if id&InlineDone != 0 { // it ended within its call
		return id &^ InlineDone
	}
	comp := c.wait(id)
	if comp.Status != 0 {
		c.t.Fatalf("%s: completed with %v", what, ucxx.Status(comp.Status))
	}
	return comp.Length
}

// transfer resolves a TagSend or TagRecv result: the length of an operation that
// ended within the call, or of its completion.
func (c *completions) transfer(res uint64, what string) uint64 {
	c.t.Helper()
	if res&InlineDone != 0 {
		return res &^ InlineDone
	}
	return c.ok(res, what)
}

// bufAddr lends b to the engine for an operation that outlives the call, and keeps it
// referenced until the test binary exits: an address is no reference, so a buffer whose
// only user is a request in flight could be collected (and a small one that does not
// escape would live on the goroutine's stack, which moves). core's tests explain more.
func bufAddr(b []byte) uintptr {
	lentBufs.Lock()
	lentBufs.bufs = append(lentBufs.bufs, b)
	lentBufs.Unlock()
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))
}

var lentBufs struct {
	sync.Mutex
	bufs [][]byte
}

// bridgePair is a connection from the bridge's engine to its own listener.
type bridgePair struct {
	lh, port        uint64
	cep, sep        uint64
	cSend, cRecv    uint64 // the client endpoint's tags
	sSend, sRecv    uint64 // the server endpoint's tags
	cLocal, cRemote string
	sLocal, sRemote string
	c               *completions
}

func connectBridge(t *testing.T) *bridgePair {
	t.Helper()
	p := &bridgePair{c: newCompletions(t)}
	res, err := Listen("127.0.0.1", 0, true)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	w := words(t, res, 2)
	p.lh, p.port = w[0], w[1]
	if p.lh == 0 || p.port == 0 || p.port > 65535 {
		t.Fatalf("Listen = %q", res)
	}
	id, err := Connect("127.0.0.1", int(p.port), 5000, true)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	p.cep = p.c.ok(id, "Connect")
	acc := p.c.wait(core.EventListenerAccept | p.lh)
	if acc.Status != 0 || acc.Length == 0 {
		t.Fatalf("accept event: %+v", acc)
	}
	p.sep = acc.Length
	info := func(h uint64) (send, recv uint64, local, remote string) {
		res, err := EndpointInfo(h)
		if err != nil {
			t.Fatalf("EndpointInfo(%d): %v", h, err)
		}
		f := fields(t, res, 5)
		if w := words(t, f[4], 1); w[0] == 0 {
			t.Fatalf("EndpointInfo(%d): no ucp_ep_h in %q", h, res)
		}
		w := words(t, strings.Join(f[:2], " "), 2)
		return w[0], w[1], f[2], f[3]
	}
	p.cSend, p.cRecv, p.cLocal, p.cRemote = info(p.cep)
	p.sSend, p.sRecv, p.sLocal, p.sRemote = info(p.sep)
	return p
}

// TestBridgeRoundTrip: Start hands out the ring; a connection to our own listener
// reports its tags and addresses; tag messages go both ways, eager and rendezvous;
// Stats counts what exists; close, abort and Stop end it all, and afterwards the
// functions fail as closed while the queue can still be waited on until FreeQueue.
func TestBridgeRoundTrip(t *testing.T) {
	ring := words(t, startBridge(t, ""), 4)
	q := bridgeQueue(t)
	if ring[0] != uint64(q.Address()) || ring[1] != uint64(q.Size()) || ring[2] != uint64(q.FD()) {
		t.Fatalf("Start = %v; the queue is at %#x, %d bytes, eventfd %d", ring, q.Address(), q.Size(), q.FD())
	}
	capWord := make([]byte, 8)
	ucxx.CopyFrom(capWord, uintptr(ring[0])+notifier.CapacityOffset)
	if c := binary.LittleEndian.Uint64(capWord); c != uint64(q.Capacity()) {
		t.Fatalf("the ring's capacity word reads %d; the queue holds %d", c, q.Capacity())
	}
	if s, err := Settings(); err != nil || s != "blocking true" {
		t.Fatalf("Settings = %q, %v; want \"blocking true\"", s, err)
	}
	if _, err := Start("", "blocking", true, "", "", false); err == nil {
		t.Fatal("a second Start succeeded")
	} else {
		wantStatusError(t, err, ucxx.StatusAlreadyExists)
	}

	p := connectBridge(t)
	if p.cSend != p.sRecv || p.sSend != p.cRecv {
		t.Fatalf("tags not exchanged: client sends %#x receives %#x, server sends %#x receives %#x", p.cSend, p.cRecv, p.sSend, p.sRecv)
	}
	if p.sLocal != p.cRemote || p.cLocal != p.sRemote || !strings.HasSuffix(p.sLocal, fmt.Sprintf(":%d", p.port)) {
		t.Fatalf("addresses: client %s -> %s, server %s -> %s, listening on port %d", p.cLocal, p.cRemote, p.sLocal, p.sRemote, p.port)
	}
	if res, err := Stats(); err != nil || words(t, res, 5)[1] != 2 || words(t, res, 5)[2] != 1 {
		t.Fatalf("Stats = %q, %v; want 2 endpoints and 1 listener", res, err)
	}
	// Through UCX's connection manager on loopback a tcp lane; made from addresses (the
	// default), shared memory alone (our MM_ERROR_HANDLING=y).
	if res, err := EndpointTransports(p.cep); err != nil || !strings.Contains(res, "tcp:") && !strings.Contains(res, ":memory") {
		t.Fatalf("EndpointTransports = %q, %v; want a tcp or shared-memory lane", res, err)
	}

	for _, size := range []int{0, 8, 8192, 1 << 20} {
		for _, dir := range []struct {
			name          string
			from, to, tag uint64
		}{{"client to server", p.cep, p.sep, p.cSend}, {"server to client", p.sep, p.cep, p.sSend}} {
			what := fmt.Sprintf("%d bytes %s", size, dir.name)
			msg := bytes.Repeat([]byte{byte(size>>3) | 1}, size)
			buf := make([]byte, size+1)
			rres, err := TagRecv(dir.to, bufAddr(buf), uint64(len(buf)), dir.tag, ^uint64(0), 0, 0, 0) // posted first: no inline wait
			if err != nil {
				t.Fatalf("%s: TagRecv: %v", what, err)
			}
			sres, err := TagSend(dir.from, bufAddr(msg), uint64(size), dir.tag, 0, 0, 1)
			if err != nil {
				t.Fatalf("%s: TagSend: %v", what, err)
			}
			p.c.transfer(sres, what+": send") // its length: TestBridgeSendInlineLength
			if n := p.c.transfer(rres, what+": receive"); n != uint64(size) || !bytes.Equal(buf[:size], msg) {
				t.Fatalf("%s: received %d bytes, or different ones", what, n)
			}
			runtime.KeepAlive(msg)
			runtime.KeepAlive(buf)
		}
	}

	id, err := CloseEndpoint(p.cep, 2000)
	if err != nil {
		t.Fatal(err)
	}
	p.c.ok(id, "CloseEndpoint")
	if _, err := TagSend(p.cep, 0, 0, p.cSend, 0, 0, 1); err == nil {
		t.Fatal("TagSend on a closed endpoint succeeded")
	} else {
		wantClosedError(t, err)
	}
	if ev := p.c.wait(core.EventEndpointError | p.sep); ev.Status == 0 {
		t.Fatalf("the peer's close: error event with status 0")
	}
	if ok, err := AbortEndpoint(p.sep); !ok || err != nil {
		t.Fatalf("AbortEndpoint = %t, %v", ok, err)
	}
	if ok, err := CloseListener(p.lh); !ok || err != nil {
		t.Fatalf("CloseListener = %t, %v", ok, err)
	}
	if _, err := CloseListener(p.lh); err == nil {
		t.Fatal("a second CloseListener succeeded")
	} else {
		wantClosedError(t, err)
	}

	if ok, err := Stop(2000); !ok || err != nil {
		t.Fatalf("Stop = %t, %v", ok, err)
	}
	if _, err := Settings(); err == nil {
		t.Fatal("Settings after Stop succeeded")
	} else {
		wantClosedError(t, err)
	}
	if r, err := NotifierWait(bridgeRing, 1000); r != int(notifier.Closed) || err != nil {
		t.Fatalf("NotifierWait after Stop = %d, %v; want %d (closed)", r, err, notifier.Closed)
	}
	if ok, err := FreeQueue(bridgeRing); !ok || err != nil {
		t.Fatalf("FreeQueue = %t, %v", ok, err)
	}
	if r, err := NotifierWait(bridgeRing, 10); r != int(notifier.Closed) || err != nil {
		t.Fatalf("NotifierWait after FreeQueue = %d, %v; want %d (closed)", r, err, notifier.Closed)
	}
}

// TestBridgeInline: with a long inline wait, a receive of a message that is already
// there ends within the call, InlineDone|length, and nothing is queued for it; one
// that fails inline returns its status as the error. Without an inline wait every
// transfer returns a request id.
func TestBridgeInline(t *testing.T) {
	t.Run("wait", func(t *testing.T) {
		t.Setenv("UCXGO_INLINE_WAIT_US", "5000000")
		startBridge(t, "")
		p := connectBridge(t)
		send := func(msg []byte) {
			t.Helper()
			res, err := TagSend(p.cep, bufAddr(msg), uint64(len(msg)), p.cSend, 0, 0, 1)
			if err != nil {
				t.Fatalf("TagSend: %v", err)
			}
			p.c.transfer(res, "send")
			waitBridgeProbe(t, p.cSend)
		}
		msg := []byte("already here")
		send(msg)
		buf := make([]byte, 64)
		res, err := TagRecv(p.sep, bufAddr(buf), uint64(len(buf)), p.sRecv, ^uint64(0), 0, 0, 1)
		if err != nil {
			t.Fatalf("TagRecv: %v", err)
		}
		if res != InlineDone|uint64(len(msg)) || !bytes.Equal(buf[:len(msg)], msg) {
			t.Fatalf("TagRecv of a message already there = %#x, %q; want InlineDone|%d", res, buf[:len(msg)], len(msg))
		}

		long := bytes.Repeat([]byte{7}, 64)
		send(long)
		small := make([]byte, 16)
		_, err = TagRecv(p.sep, bufAddr(small), uint64(len(small)), p.sRecv, ^uint64(0), 0, 0, 1)
		wantStatusError(t, err, ucxx.StatusMessageTruncated)
		runtime.KeepAlive(msg)
		runtime.KeepAlive(long)
		runtime.KeepAlive(buf)
		runtime.KeepAlive(small)
	})

	t.Run("no wait", func(t *testing.T) {
		t.Setenv("UCXGO_INLINE_WAIT_US", "0")
		startBridge(t, "")
		p := connectBridge(t)
		msg := []byte("queued")
		buf := make([]byte, 64)
		for i := range 20 {
			sres, err := TagSend(p.cep, bufAddr(msg), uint64(len(msg)), p.cSend, 0, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			rres, err := TagRecv(p.sep, bufAddr(buf), uint64(len(buf)), p.sRecv, ^uint64(0), 0, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			if sres&InlineDone != 0 || rres&InlineDone != 0 {
				t.Fatalf("round %d: results %#x, %#x; without an inline wait both are request ids", i, sres, rres)
			}
			p.c.ok(sres, "send")
			if n := p.c.ok(rres, "receive"); n != uint64(len(msg)) {
				t.Fatalf("round %d: received %d bytes", i, n)
			}
		}
		runtime.KeepAlive(msg)
		runtime.KeepAlive(buf)
	})
}

// TestBridgeSendInlineLength: a send that ends within the call returns InlineDone|n,
// n its length, as TagSend's doc says, also when UCX finished it through its callback
// (a rendezvous send whose receive was already posted) rather than at once.
func TestBridgeSendInlineLength(t *testing.T) {
	t.Setenv("UCXGO_INLINE_WAIT_US", "5000000")
	startBridge(t, "")
	p := connectBridge(t)
	for _, size := range []int{8, 1 << 20} {
		msg := bytes.Repeat([]byte{9}, size)
		buf := make([]byte, size)
		// The receive posted without an inline wait (wait 0): the send's call finds it.
		rid, err := TagRecv(p.sep, bufAddr(buf), uint64(size), p.sRecv, ^uint64(0), 0, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		res, err := TagSend(p.cep, bufAddr(msg), uint64(size), p.cSend, 0, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if res != InlineDone|uint64(size) {
			t.Errorf("TagSend of %d bytes = %#x; want InlineDone|%d", size, res, size)
		}
		if n := p.c.ok(rid, "receive"); n != uint64(size) {
			t.Fatalf("received %d bytes of %d", n, size)
		}
		runtime.KeepAlive(msg)
		runtime.KeepAlive(buf)
	}
}

// waitBridgeProbe polls TagProbe until a message with tag has arrived.
func waitBridgeProbe(t *testing.T, tag uint64) (senderTag, length uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := TagProbe(tag, ^uint64(0), false)
		if err != nil {
			t.Fatalf("TagProbe: %v", err)
		}
		w := words(t, res, 4)
		if w[0] == 1 {
			if w[3] != 0 {
				t.Fatalf("TagProbe without remove = %q: a handle", res)
			}
			return w[1], w[2]
		}
		if w[0] != 0 || w[1] != 0 || w[2] != 0 || w[3] != 0 {
			t.Fatalf("TagProbe of nothing = %q; want \"0 0 0 0\"", res)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no message with tag %#x within 5 s", tag)
		}
		time.Sleep(time.Millisecond)
	}
}

// frameDescriptors writes SendMulti's descriptor array for host frames.
func frameDescriptors(frames [][]byte) []byte {
	desc := make([]byte, core.FrameDescriptorSize*len(frames))
	for i, f := range frames {
		w := desc[i*core.FrameDescriptorSize:]
		if len(f) > 0 {
			binary.LittleEndian.PutUint64(w, uint64(bufAddr(f)))
		}
		binary.LittleEndian.PutUint64(w[8:], uint64(len(f)))
	}
	return desc
}

// descAddr is the address of a descriptor array, 0 for none.
func descAddr(desc []byte) uintptr {
	if len(desc) == 0 {
		return 0
	}
	return bufAddr(desc)
}

// blockFrames reads the host frames out of a block and frees it, with the frames the
// engine allocated outside it.
func blockFrames(t *testing.T, block uint64) [][]byte {
	t.Helper()
	if block == 0 {
		t.Fatal("no block")
	}
	defer ucxx.CFreeAddr(uintptr(block))
	head := make([]byte, core.BlockHeaderSize)
	ucxx.CopyFrom(head, uintptr(block))
	n := binary.LittleEndian.Uint64(head)
	if n > 1<<16 {
		t.Fatalf("block of %d frames", n)
	}
	rec := make([]byte, core.BlockHeaderSize+core.BlockFrameRecordSize*n)
	ucxx.CopyFrom(rec, uintptr(block))
	frames := make([][]byte, n)
	for i := range frames {
		w := rec[core.BlockHeaderSize+core.BlockFrameRecordSize*i:]
		loc, mt := binary.LittleEndian.Uint64(w), binary.LittleEndian.Uint64(w[16:])
		size := binary.LittleEndian.Uint64(w[8:])
		switch mt {
		case uint64(core.MemHost): // an offset in the block
			loc += block
		case uint64(core.MemHost) | core.FrameOwnFlag: // a malloc of its own
		case uint64(core.MemHost) | core.FrameUserFlag: // the application's
		default:
			t.Fatalf("frame %d: memory type word %#x", i, mt)
		}
		frames[i] = make([]byte, size)
		ucxx.CopyFrom(frames[i], uintptr(loc))
		if mt&core.FrameOwnFlag != 0 {
			if err := core.ReleaseHostFrame(uintptr(loc)); err != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
		}
	}
	return frames
}

// sendMulti sends frames as one multi-buffer message and returns SendMulti's result:
// the request id, or InlineDone when it ended within the call.
func (p *bridgePair) sendMulti(t *testing.T, frames [][]byte) uint64 {
	t.Helper()
	desc := frameDescriptors(frames)
	id, err := SendMulti(p.cep, descAddr(desc), len(frames), p.cSend)
	if err != nil {
		t.Fatalf("SendMulti: %v", err)
	}
	return id
}

// recvMulti receives one multi-buffer message and returns its status and block,
// whether it ended within the call or later.
func (p *bridgePair) recvMulti(t *testing.T) (ucxx.Status, uint64) {
	t.Helper()
	res, err := RecvMulti(p.sep, p.sRecv, 0)
	if err != nil { // it failed within the call
		closed, st, _ := parseBridgeError(t, err)
		if closed {
			t.Fatalf("RecvMulti: %v", err)
		}
		return st, 0
	}
	if res&InlineDone != 0 {
		return ucxx.StatusOK, res &^ InlineDone
	}
	c := p.c.wait(res)
	return ucxx.Status(c.Status), c.Length
}

// TestBridgeTransfers: multi-buffer messages (plain and application-allocated),
// active messages and probed receives, through the bridge's functions.
func TestBridgeTransfers(t *testing.T) {
	startBridge(t, "")
	p := connectBridge(t)

	frames := [][]byte{[]byte("header"), {}, bytes.Repeat([]byte{3}, 100_000), []byte("tail")}
	sid := p.sendMulti(t, frames)
	st, block := p.recvMulti(t)
	if st != ucxx.StatusOK {
		t.Fatalf("RecvMulti: %v", st)
	}
	got := blockFrames(t, block)
	if len(got) != len(frames) {
		t.Fatalf("%d frames, sent %d", len(got), len(frames))
	}
	for i := range frames {
		if !bytes.Equal(got[i], frames[i]) {
			t.Fatalf("frame %d differs", i)
		}
	}
	p.c.ok(sid, "SendMulti")

	// Application-allocated: a host-only message completes the receive alone when only
	// CUDA frames are the application's.
	res, err := RecvMultiAllocated(p.sep, p.sRecv, true, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ids := words(t, res, 2)
	if ids[0] == 0 || ids[1] == 0 || ids[0] == ids[1] {
		t.Fatalf("RecvMultiAllocated = %q; want two distinct ids", res)
	}
	p.c.ok(p.sendMulti(t, frames[:1]), "SendMulti")
	if got := blockFrames(t, p.c.ok(ids[0], "RecvMultiAllocated")); len(got) != 1 || !bytes.Equal(got[0], frames[0]) {
		t.Fatalf("RecvMultiAllocated: %q", got)
	}
	// Host frames of 100 bytes or more are the application's: asked for, provided.
	if res, err = RecvMultiAllocated(p.sep, p.sRecv, false, 100, 0); err != nil {
		t.Fatal(err)
	}
	ids = words(t, res, 2)
	sid = p.sendMulti(t, frames)
	p.c.ok(ids[1], "the need for frames")
	mine := make([]byte, len(frames[2]))
	desc := make([]byte, core.ProvidedFrameSize)
	binary.LittleEndian.PutUint64(desc, uint64(bufAddr(mine)))
	binary.LittleEndian.PutUint64(desc[8:], uint64(core.MemHost))
	if _, err := ProvideFrames(ids[1], bufAddr(desc), 1); err != nil {
		t.Fatal(err)
	}
	got = blockFrames(t, p.c.ok(ids[0], "RecvMultiAllocated with host frames"))
	p.c.ok(sid, "SendMulti")
	for i := range frames {
		if !bytes.Equal(got[i], frames[i]) {
			t.Fatalf("frame %d differs", i)
		}
	}
	if !bytes.Equal(mine, frames[2]) {
		t.Fatal("the large frame is not in the memory provided")
	}
	runtime.KeepAlive(mine)

	// Active messages.
	for _, size := range []int{0, 10, 1 << 20} {
		msg := bytes.Repeat([]byte{byte(size) | 5}, size)
		rid, err := AMRecv(p.sep)
		if err != nil {
			t.Fatal(err)
		}
		sid, err := AMSend(p.cep, bufAddr(msg), uint64(size), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := blockFrames(t, p.c.ok(rid, "AMRecv"))
		if len(got) != 1 || !bytes.Equal(got[0], msg) {
			t.Fatalf("AMRecv of %d bytes: %d frames, or different bytes", size, len(got))
		}
		p.c.ok(sid, "AMSend")
		runtime.KeepAlive(msg)
	}

	// A probed message, removed and received.
	msg := []byte("probe me")
	sres, err := TagSend(p.cep, bufAddr(msg), uint64(len(msg)), p.cSend, 0, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	p.c.transfer(sres, "send")
	if sender, length := waitBridgeProbe(t, p.cSend); sender != p.cSend || length != uint64(len(msg)) {
		t.Fatalf("TagProbe: sender tag %#x length %d; want %#x, %d", sender, length, p.cSend, len(msg))
	}
	res, err = TagProbe(p.cSend, ^uint64(0), true)
	if err != nil {
		t.Fatal(err)
	}
	w := words(t, res, 4)
	if w[0] != 1 || w[1] != p.cSend || w[2] != uint64(len(msg)) || w[3] == 0 {
		t.Fatalf("TagProbe with remove = %q", res)
	}
	buf := make([]byte, 32)
	rid, err := RecvProbed(w[3], bufAddr(buf), uint64(len(buf)))
	if err != nil {
		t.Fatal(err)
	}
	if n := p.c.ok(rid, "RecvProbed"); n != uint64(len(msg)) || !bytes.Equal(buf[:n], msg) {
		t.Fatalf("RecvProbed: %q", buf[:n])
	}
	runtime.KeepAlive(frames)
	runtime.KeepAlive(msg)
	runtime.KeepAlive(buf)
}

// TestBridgeLimits: each field of Start's limits JSON reaches the engine: a message
// over it fails with ExceedsLimit and the next message arrives.
func TestBridgeLimits(t *testing.T) {
	for _, c := range []struct {
		limits string
		bad    []int // frame sizes of a message over the limit
	}{
		{`{"max_frames": 3}`, []int{1, 1, 1, 1}},
		{`{"max_frame_bytes": 100}`, []int{101}},
		{`{"max_message_bytes": 150}`, []int{80, 80}},
		{`{"max_outstanding_bytes": 1048576, "max_endpoint_outstanding_bytes": 2048}`, []int{3000}},
		{`{"max_outstanding_bytes": 2048}`, []int{1500}}, // the endpoint's default share is half
	} {
		t.Run(c.limits, func(t *testing.T) {
			startBridge(t, c.limits)
			p := connectBridge(t)
			bad := make([][]byte, len(c.bad))
			for i, n := range c.bad {
				bad[i] = make([]byte, n)
			}
			good := [][]byte{[]byte("fits"), {}, []byte("within")}
			bid := p.sendMulti(t, bad)
			if st, block := p.recvMulti(t); st != ucxx.StatusExceedsLimit || block != 0 {
				t.Fatalf("message over the limit: %v, block %#x; want ExceedsLimit", st, block)
			}
			if bid&InlineDone == 0 {
				t.Logf("send over the limit: %v", ucxx.Status(p.c.wait(bid).Status))
			}
			gid := p.sendMulti(t, good)
			st, block := p.recvMulti(t)
			if st != ucxx.StatusOK {
				t.Fatalf("next message: %v", st)
			}
			if got := blockFrames(t, block); len(got) != 3 || string(got[0]) != "fits" || len(got[1]) != 0 || string(got[2]) != "within" {
				t.Fatalf("next message: %q", got)
			}
			p.c.ok(gid, "SendMulti")
			runtime.KeepAlive(bad)
			runtime.KeepAlive(good)
		})
	}
}

// TestBridgeErrors: failures of a running engine carry the prefix Python maps to an
// exception, with the status that says what went wrong.
func TestBridgeErrors(t *testing.T) {
	startBridge(t, "")
	p := connectBridge(t)
	for _, c := range []struct {
		name string
		call func() error
		want ucxx.Status
	}{
		{"Listen on a bad address", func() error { _, err := Listen("not-an-ip", 0, true); return err }, ucxx.StatusInvalidParam},
		{"Connect to port 0", func() error { _, err := Connect("127.0.0.1", 0, 100, true); return err }, ucxx.StatusInvalidParam},
		{"SendMulti of -1 frames", func() error { _, err := SendMulti(p.cep, 0, -1, 0); return err }, ucxx.StatusInvalidParam},
		{"SendMulti of frames at address 0", func() error { _, err := SendMulti(p.cep, 0, 2, 0); return err }, ucxx.StatusInvalidParam},
		{"SendMulti of an unknown memory type", func() error {
			desc := make([]byte, core.FrameDescriptorSize)
			binary.LittleEndian.PutUint64(desc[16:], 9)
			_, err := SendMulti(p.cep, bufAddr(desc), 1, 0)
			return err
		}, ucxx.StatusInvalidParam},
		{"ConnectWorkerAddress of non-hex", func() error { _, err := ConnectWorkerAddress("zz", true); return err }, ucxx.StatusInvalidAddr},
		{"ConnectWorkerAddress too short", func() error { _, err := ConnectWorkerAddress("0011", true); return err }, ucxx.StatusInvalidAddr},
		{"ConnectWorkerAddress of an unknown version", func() error {
			_, err := ConnectWorkerAddress(strings.Repeat("0f", 32), true)
			return err
		}, ucxx.StatusInvalidAddr},
	} {
		err := c.call()
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if closed, st, _ := parseBridgeError(t, err); closed || st != c.want {
			t.Errorf("%s: %q; want status %d (%v)", c.name, err, int64(c.want), c.want)
		}
	}

	// ProvideFrames reads count (address, memory type) entries; host memory said to be
	// CUDA memory (or no CUDA at all) is refused, and a negative count does not crash
	// the process.
	host := make([]byte, 8)
	desc := binary.LittleEndian.AppendUint64(nil, uint64(bufAddr(host)))
	desc = binary.LittleEndian.AppendUint64(desc, uint64(core.MemCUDA))
	if _, err := ProvideFrames(1, bufAddr(desc), 1); err == nil {
		t.Error("ProvideFrames of host memory as CUDA memory succeeded")
	} else if closed, _, _ := parseBridgeError(t, err); closed {
		t.Errorf("ProvideFrames of host memory as CUDA memory: %q; want a UCS status", err)
	}
	if _, err := ProvideFrames(1, 0, -1); err == nil {
		t.Error("ProvideFrames of -1 frames succeeded")
	} else {
		parseBridgeError(t, err)
	}

	// The worker's own address connects; its hex round-trips.
	addrHex, err := WorkerAddress()
	if err != nil {
		t.Fatal(err)
	}
	if b, err := hex.DecodeString(addrHex); err != nil || len(b) < minWorkerAddress {
		t.Fatalf("WorkerAddress = %q", addrHex)
	}
	h, err := ConnectWorkerAddress(addrHex, true)
	if err != nil || h == 0 {
		t.Fatalf("ConnectWorkerAddress(own address) = %d, %v", h, err)
	}
	AbortEndpoint(h)

	// Endpoint state: an aborted endpoint is closed. The abort is queued like any
	// submission: a call on the progress thread (Stats) has seen it through.
	if _, err := AbortEndpoint(p.cep); err != nil {
		t.Fatal(err)
	}
	if _, err := Stats(); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"TagSend":   func() error { _, err := TagSend(p.cep, 0, 0, 0, 0, 0, 1); return err },
		"AMSend":    func() error { _, err := AMSend(p.cep, 0, 0, 0, 0); return err },
		"AMRecv":    func() error { _, err := AMRecv(p.cep); return err },
		"SendMulti": func() error { _, err := SendMulti(p.cep, 0, 0, 0); return err },
	} {
		if err := call(); err == nil {
			t.Errorf("%s on an aborted endpoint succeeded", name)
		} else if closed, _, _ := parseBridgeError(t, err); !closed {
			t.Errorf("%s on an aborted endpoint: %q; want [closed]", name, err)
		}
	}

	// Informational calls answer JSON or text.
	for name, call := range map[string]func() (string, error){
		"Config":       Config,
		"GPUInfo":      GPUInfo,
		"ProgressCPUs": ProgressCPUs,
	} {
		res, err := call()
		var v map[string]any
		if err != nil || json.Unmarshal([]byte(res), &v) != nil || len(v) == 0 {
			t.Errorf("%s = %q, %v; want a JSON object", name, res, err)
		}
	}
	for _, which := range []string{"context", "worker"} {
		if res, err := UCXInfo(which); err != nil || res == "" {
			t.Errorf("UCXInfo(%s) = %q, %v", which, res, err)
		}
	}
	runtime.KeepAlive(host)
	runtime.KeepAlive(desc)
}

// TestQueuesAreNamed: a reader of an engine that stopped, waiting or freeing by its
// queue's id, never touches the queue of an engine started since (one bridge global
// stood for "the stopped engine" once: the old reader waited on the new queue, and
// FreeQueue freed whichever stopped last). Nor does it when the new queue is mapped
// where the freed one was (queues were named by their address once), which the
// kernel does for a mapping of the same size freed just before.
func TestQueuesAreNamed(t *testing.T) {
	started := words(t, startBridge(t, ""), 4)
	first, firstAt := started[3], started[0]
	if _, err := Stop(5000); err != nil {
		t.Fatal(err)
	}
	if r, err := NotifierWait(first, 2000); r != int(notifier.Closed) || err != nil {
		t.Fatalf("NotifierWait on the stopped engine's queue = %d, %v; want %d (closed)", r, err, notifier.Closed)
	}
	if ok, err := FreeQueue(first); !ok || err != nil {
		t.Fatalf("FreeQueue(first) = %t, %v", ok, err)
	}
	started = words(t, startBridge(t, ""), 4)
	second, secondAt := started[3], started[0]
	t.Logf("the second queue mapped where the first was: %t", firstAt == secondAt)
	if r, err := NotifierWait(first, 10); r != int(notifier.Closed) || err != nil {
		t.Fatalf("NotifierWait on the freed queue = %d, %v; want %d (closed)", r, err, notifier.Closed)
	}
	if ok, err := FreeQueue(first); !ok || err != nil {
		t.Fatalf("FreeQueue(first) again = %t, %v", ok, err)
	}
	if r, err := NotifierWait(second, 10); r != int(notifier.Timeout) || err != nil {
		t.Fatalf("NotifierWait on the running engine's queue after the first was freed = %d, %v; want %d", r, err, notifier.Timeout)
	}
	if _, err := Settings(); err != nil {
		t.Fatalf("the second engine after the first's queue was freed: %v", err)
	}
}
