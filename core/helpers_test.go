package core

// Helpers shared by the package's tests: engines and loopback pairs, reading the
// completion queue with deadlines, plain and multi-buffer traffic, and reading the
// blocks that multi-buffer and active-message receives complete with. A helper that
// only one test file uses lives in that file.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/notifier"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

func TestMain(m *testing.M) {
	// Keep UCX's TCP on loopback, whatever interfaces the machine has.
	os.Setenv("UCX_NET_DEVICES", "lo")
	os.Exit(m.Run())
}

// Engines, pairs and completions.

// newTestEngine starts an engine that the test shuts down.
func newTestEngine(t testing.TB, opts Options) *Engine {
	t.Helper()
	e, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	engineOpened()
	t.Cleanup(func() {
		if err := e.Shutdown(5 * time.Second); err != nil && err != ErrEngineClosed {
			t.Errorf("Shutdown: %v", err)
			return // operations may still be in flight: the lent buffers stay
		}
		e.FreeQueue()
		engineShut()
	})
	return e
}

// collector reads an engine's queue the way the Python consumer does, with a deadline.
type collector struct {
	t   testing.TB
	q   *notifier.Queue
	got map[uint64]notifier.Completion
	buf [256]notifier.Completion
}

// newCollector reads e's queue for t. One collector per engine: completions it pops
// for other ids wait in it for their own wait.
func newCollector(t testing.TB, e *Engine) *collector {
	return &collector{t: t, q: e.Queue(), got: make(map[uint64]notifier.Completion)}
}

// wait returns the completion of id, failing the test after timeout.
func (c *collector) wait(id uint64, timeout time.Duration) notifier.Completion {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if comp, ok := c.got[id]; ok {
			delete(c.got, id)
			return comp
		}
		n := c.q.Pop(c.buf[:])
		for _, comp := range c.buf[:n] {
			c.got[comp.ID] = comp
		}
		if n > 0 {
			continue
		}
		left := time.Until(deadline)
		if left <= 0 {
			c.t.Fatalf("no completion for request %#x within %v", id, timeout)
		}
		c.q.Wait(min(left, 100*time.Millisecond))
	}
}

// noCompletion fails if a completion for id is waiting: everything the queue holds is
// read first. After a wait for id, it checks that id completed only once.
func noCompletion(t *testing.T, c *collector, id uint64) {
	t.Helper()
	for n := c.q.Pop(c.buf[:]); n > 0; n = c.q.Pop(c.buf[:]) {
		for _, comp := range c.buf[:n] {
			if comp.ID == id {
				t.Fatalf("unexpected completion for %#x: %+v", id, comp)
			}
			c.got[comp.ID] = comp
		}
	}
	if comp, ok := c.got[id]; ok {
		t.Fatalf("unexpected completion for %#x: %+v", id, comp)
	}
}

// settle returns once e's progress thread has dispatched everything submitted to it
// before the call and the completions that produced are in the queue: a pass flushes
// its completions after dispatching its submissions, so two calls on the thread, each
// dispatched by a pass of its own, are enough. After it, noCompletion tells "never"
// from "not yet" for whatever those submissions could have completed at once.
func settle(t *testing.T, e *Engine) {
	t.Helper()
	for range 2 {
		if _, err := e.Stats(); err != nil {
			t.Fatalf("Stats: %v", err)
		}
	}
}

// clientsOf listens on server and returns a function that connects a new client
// engine to it and returns the client, both endpoint handles and the client's
// collector; sc is server's collector.
func clientsOf(t *testing.T, server *Engine, sc *collector) func() (client *Engine, cep, sep uint64, cc *collector) {
	t.Helper()
	return clientsWith(t, server, sc, false)
}

// floodersOf is clientsOf for clients that send as flooding peers do, ignoring the
// server's flow control (flowcontrol.go).
func floodersOf(t *testing.T, server *Engine, sc *collector) func() (client *Engine, cep, sep uint64, cc *collector) {
	t.Helper()
	return clientsWith(t, server, sc, true)
}

// unpaced makes e, before its first connection, ignore its peers' flow control.
func unpaced(e *Engine) *Engine {
	e.unpaced = true
	return e
}

func clientsWith(t *testing.T, server *Engine, sc *collector, flooding bool) func() (client *Engine, cep, sep uint64, cc *collector) {
	t.Helper()
	lh, port, err := server.Listen("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	return func() (client *Engine, cep, sep uint64, cc *collector) {
		t.Helper()
		client = newTestEngine(t, Options{})
		client.unpaced = flooding
		cc = newCollector(t, client)
		id, err := client.Connect("127.0.0.1", port, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		comp := cc.wait(id, 10*time.Second)
		if comp.Status != 0 {
			t.Fatalf("Connect: %v", ucxx.Status(comp.Status))
		}
		return client, comp.Length, sc.wait(EventListenerAccept|lh, 10*time.Second).Length, cc
	}
}

// pair connects two engines through a listener on loopback and returns the endpoint
// handles of client and server.
func pair(t testing.TB, client, server *Engine) (cep, sep uint64, cc, sc *collector) {
	t.Helper()
	lh, port, err := server.Listen("127.0.0.1", 0)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	if port <= 0 {
		t.Fatalf("Listen: port %d", port)
	}
	cc, sc = newCollector(t, client), newCollector(t, server)
	id, err := client.Connect("127.0.0.1", port, 5*time.Second)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	comp := cc.wait(id, 10*time.Second)
	if comp.Status != 0 {
		t.Fatalf("Connect completed with status %d", comp.Status)
	}
	acc := sc.wait(EventListenerAccept|lh, 10*time.Second)
	return comp.Length, acc.Length, cc, sc
}

// endpointInfo is EndpointInfo that fails the test on error.
func endpointInfo(t *testing.T, e *Engine, h uint64) EndpointInfo {
	t.Helper()
	info, err := e.EndpointInfo(h)
	if err != nil {
		t.Fatalf("EndpointInfo(%d): %v", h, err)
	}
	return info
}

// addr lends b to UCX for an operation that outlives the call. b stays reachable while
// any test engine is open (lentBuffers), so no operation in flight, even one a test
// leaves behind when it ends, reads or writes memory the GC freed: a send's buffer
// once went while UCX's shared-memory transport still held the send in its pending
// queue (AddressSanitizer, use-after-poison). Keeping b in the heap's sight also makes
// every caller's buffer escape: Go may put a small make([]byte, n) on the goroutine's
// stack, which moves when the stack grows (TestSharedMemoryOnlyTLS's 8-byte receive
// once got the old stack's bytes).
func addr(b []byte) uintptr {
	lentBuffers.Lock()
	lentBuffers.bufs = append(lentBuffers.bufs, b)
	lentBuffers.Unlock()
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))
}

// lentBuffers holds what addr lent until no test engine is open: only then has every
// UCX operation on those buffers ended.
var lentBuffers struct {
	sync.Mutex
	bufs    [][]byte
	engines int
}

// engineOpened and engineShut count the open test engines; the last to shut lets the
// lent buffers go.
func engineOpened() {
	lentBuffers.Lock()
	lentBuffers.engines++
	lentBuffers.Unlock()
}

func engineShut() {
	lentBuffers.Lock()
	if lentBuffers.engines--; lentBuffers.engines == 0 {
		lentBuffers.bufs = nil
	}
	lentBuffers.Unlock()
}

// exchange sends msg from one end of a connection to the other and checks it arrived.
func exchange(t *testing.T, from *Engine, fromEP uint64, fc *collector, to *Engine, toEP uint64, tc *collector, msg []byte) {
	t.Helper()
	tag := endpointInfo(t, to, toEP).RecvTag
	buf := make([]byte, len(msg)+1)
	rid, err := to.TagRecv(toEP, addr(buf), uint64(len(buf)), tag, ^uint64(0), 0, 0)
	if err != nil {
		t.Fatalf("TagRecv: %v", err)
	}
	sid, err := from.TagSend(fromEP, addr(msg), uint64(len(msg)), endpointInfo(t, from, fromEP).SendTag, 0, 0)
	if err != nil {
		t.Fatalf("TagSend: %v", err)
	}
	if c := fc.wait(sid, 5*time.Second); c.Status != 0 {
		t.Fatalf("send: status %d", c.Status)
	}
	c := tc.wait(rid, 5*time.Second)
	if c.Status != 0 || c.Length != uint64(len(msg)) || !bytes.Equal(buf[:c.Length], msg) {
		t.Fatalf("recv: %+v, payload %q; want %q", c, buf[:min(c.Length, uint64(len(buf)))], msg)
	}
	runtime.KeepAlive(msg)
	runtime.KeepAlive(buf)
}

// stats is Stats that fails the test on error.
func stats(t *testing.T, e *Engine) Stats {
	t.Helper()
	s, err := e.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitFor polls cond (each call a round trip to a progress thread) until it holds,
// failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		runtime.Gosched()
	}
}

// waitIdle waits until e has freed every endpoint and has no request in flight: a
// close runs in the background, so this polls, for a bounded time.
func waitIdle(t *testing.T, e *Engine) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		s, err := e.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if s.Endpoints == 0 && s.InFlight == 0 {
			return
		}
		if time.Now().After(deadline) {
			var dump []string
			done := make(chan struct{})
			_ = e.submit(submission{op: opCall, call: func() {
				for _, r := range e.requests.byID {
					dump = append(dump, fmt.Sprintf("id %#x op %v internal %v ep %v canceled %v multi %v expect %d", r.id, r.op, r.internal, r.ep != nil, r.canceled, r.multi != nil, r.expect))
				}
				close(done)
			}})
			<-done
			t.Fatalf("after 2 s: %+v; want no endpoints and nothing in flight; %v", s, dump)
		}
		time.Sleep(time.Millisecond)
	}
}

// holdProgress parks e's progress thread in a submitted call until release runs (at
// the latest at cleanup, before the engine's shutdown), so that everything submitted
// meanwhile is dispatched by the next pass as one batch.
func holdProgress(t testing.TB, e *Engine) (release func()) {
	t.Helper()
	entered, gate := make(chan struct{}), make(chan struct{})
	if err := e.submit(submission{op: opCall, call: func() { close(entered); <-gate }}); err != nil {
		t.Fatalf("holdProgress: %v", err)
	}
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("holdProgress: the progress thread did not run the call within 5 s")
	}
	return release
}

// waitProbe polls TagProbe, without removing anything, until a message matching tag
// under mask has arrived at e, and returns what it found; it fails the test after 5 s.
// It tells that a message sent to e is there, waiting unexpected.
func waitProbe(t *testing.T, e *Engine, tag, mask uint64) ProbeResult {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := e.TagProbe(tag, mask, false)
		if err != nil {
			t.Fatalf("TagProbe: %v", err)
		}
		if res.Found {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("no message for tag %#x mask %#x arrived within 5 s", tag, mask)
		}
		time.Sleep(time.Millisecond)
	}
}

// Threads.

// Multi-buffer headers, written by hand (multiheader.go has the wire format).

// header builds one header field by field, for malformed cases.
func header(magic uint32, version, flags uint8, count uint16, total uint64, sizes []uint64, types []uint8) []byte {
	h := binary.LittleEndian.AppendUint32(nil, magic)
	h = append(h, version, flags)
	h = binary.LittleEndian.AppendUint16(h, count)
	h = binary.LittleEndian.AppendUint64(h, total)
	for _, s := range sizes {
		h = binary.LittleEndian.AppendUint64(h, s)
	}
	return append(h, types...)
}

// okHeader is a well-formed header as far as its own bytes go.
func okHeader(flags uint8, total uint64, sizes []uint64) []byte {
	return header(headerMagic, headerVersion, flags, uint16(len(sizes)), total, sizes, make([]uint8, len(sizes)))
}

// wireMessages returns the tag messages a sender writes for a message of frames whose
// memory types are types (multiheader.go has the wire): the headers, EncodeHeaders'
// (the small host frames after the first when it set HeaderInline, else gathered into
// one message after it, for a message of one header), then the other frames one
// message each.
func wireMessages(frames [][]byte, types []uint8) [][]byte {
	sizes := make([]uint64, len(frames))
	for i, f := range frames {
		sizes[i] = uint64(len(f))
	}
	dst := make([]byte, HeaderCount(len(frames))*MaxHeaderSize)
	lens := EncodeHeaders(dst, sizes, types, nil)
	var msgs [][]byte
	for i, n := range lens {
		msgs = append(msgs, slices.Clone(dst[i*MaxHeaderSize:i*MaxHeaderSize+n]))
	}
	var small []byte
	hasSmall := false
	var alone [][]byte
	for i, f := range frames {
		if len(lens) == 1 && gathers(sizes[i], types[i]) {
			small, hasSmall = append(small, f...), true
		} else {
			alone = append(alone, f)
		}
	}
	switch {
	case dst[5]&HeaderInline != 0:
		msgs[0] = append(msgs[0], small...)
	case hasSmall:
		msgs = append(msgs, small)
	}
	return append(msgs, alone...)
}

// full returns n sizes of value s.
func full(n int, s uint64) []uint64 {
	return slices.Repeat([]uint64{s}, n)
}

// Multi-buffer traffic over a pair.

// startSendFrames queues frames (host memory) as one multi-buffer message from ep and
// returns the request id, without waiting: the caller keeps frames alive until the
// completion.
func startSendFrames(t *testing.T, e *Engine, ep uint64, tag uint64, frames ...[]byte) uint64 {
	t.Helper()
	desc := make([]byte, FrameDescriptorSize*len(frames))
	for i, f := range frames {
		w := desc[i*FrameDescriptorSize:]
		if len(f) > 0 {
			binary.LittleEndian.PutUint64(w, uint64(addr(f)))
		}
		binary.LittleEndian.PutUint64(w[8:], uint64(len(f)))
	}
	var d uintptr
	if len(desc) > 0 {
		d = uintptr(unsafe.Pointer(&desc[0]))
	}
	id, err := e.SendMulti(ep, d, len(frames), tag)
	if err != nil {
		t.Fatalf("SendMulti: %v", err)
	}
	runtime.KeepAlive(desc) // read during the call
	return id
}

// sendFrames sends frames as one multi-buffer message from ep and waits for it.
func sendFrames(t *testing.T, e *Engine, ep uint64, c *collector, tag uint64, frames ...[]byte) {
	t.Helper()
	id := startSendFrames(t, e, ep, tag, frames...)
	if comp := c.wait(id, 10*time.Second); comp.Status != 0 {
		t.Fatalf("SendMulti completed with %v", ucxx.Status(comp.Status))
	}
	runtime.KeepAlive(frames) // lent to UCX until the completion
}

// sendRaw sends b as one plain tag message on tag (MultiTagBit set: it lands on the
// peer's multi-buffer stream), playing a peer that writes headers and frames by hand.
func sendRaw(t *testing.T, e *Engine, ep uint64, c *collector, tag uint64, b []byte) {
	t.Helper()
	id, err := e.TagSend(ep, addr(b), uint64(len(b)), tag|MultiTagBit, 0, 0)
	if err != nil {
		t.Fatalf("TagSend: %v", err)
	}
	if comp := c.wait(id, 10*time.Second); comp.Status != 0 {
		t.Fatalf("TagSend completed with %v", ucxx.Status(comp.Status))
	}
}

// recvMulti receives one multi-buffer message on ep and tag and returns its status
// and block (0 unless the status is OK).
func recvMulti(t *testing.T, e *Engine, ep uint64, c *collector, tag uint64) (ucxx.Status, uint64) {
	t.Helper()
	id, err := e.RecvMulti(ep, tag)
	if err != nil {
		t.Fatalf("RecvMulti: %v", err)
	}
	comp := c.wait(id, 10*time.Second)
	return ucxx.Status(comp.Status), comp.Length
}

// Received blocks (block.go has the record layout).

// blockFrame is one frame as a received block's record describes it.
type blockFrame struct {
	loc, size, memType uint64 // the record's three words
	data               []byte // a copy of a host frame's bytes; nil for a CUDA frame
}

// readBlock copies out the record and host frames of a block a receive completed
// with, checking the layout block.go promises: a host frame starts BlockAlign-aligned
// after the record, frames follow each other without overlapping, and all of them lie
// within the block's size. A CUDA frame's bytes are not read. The block stays the
// caller's to free.
func readBlock(t *testing.T, block uint64) (size uint64, frames []blockFrame) {
	t.Helper()
	if block == 0 {
		t.Fatal("completion without a block")
	}
	head := make([]byte, BlockHeaderSize)
	ucxx.CopyFrom(head, uintptr(block))
	n, size := binary.LittleEndian.Uint64(head), binary.LittleEndian.Uint64(head[8:])
	if n > 1<<20 {
		t.Fatalf("block record: %d frames", n)
	}
	recLen := BlockHeaderSize + BlockFrameRecordSize*n
	if size < recLen {
		t.Fatalf("block record: size %d, less than its own %d-frame record", size, n)
	}
	rec := make([]byte, recLen)
	ucxx.CopyFrom(rec, uintptr(block))
	next := recLen // where the next host frame may start
	for i := uint64(0); i < n; i++ {
		w := rec[BlockHeaderSize+BlockFrameRecordSize*i:]
		f := blockFrame{loc: binary.LittleEndian.Uint64(w), size: binary.LittleEndian.Uint64(w[8:]), memType: binary.LittleEndian.Uint64(w[16:])}
		if f.memType == uint64(MemHost) {
			if f.loc%BlockAlign != 0 || f.loc < next || f.loc+f.size > size {
				t.Fatalf("block record: frame %d at offset %d, %d bytes, in a %d-byte block (previous frame ends at %d)", i, f.loc, f.size, size, next)
			}
			next = f.loc + f.size
			f.data = make([]byte, f.size)
			ucxx.CopyFrom(f.data, uintptr(block+f.loc))
		}
		if f.memType == uint64(MemHost)|FrameOwnFlag && f.loc == 0 {
			t.Fatalf("block record: frame %d outside the block at address 0", i)
		}
		// The application's memory, or the engine's allocation of the frame alone.
		if (f.memType == uint64(MemHost)|FrameUserFlag || f.memType == uint64(MemHost)|FrameOwnFlag) && f.loc != 0 {
			f.data = make([]byte, f.size)
			ucxx.CopyFrom(f.data, uintptr(f.loc))
		}
		frames = append(frames, f)
	}
	return size, frames
}

// takeBlock copies the frames out of a received block, all in host memory, and frees
// the block and the frames the engine allocated outside it.
func takeBlock(t *testing.T, block uint64) [][]byte {
	t.Helper()
	defer ucxx.CFreeAddr(uintptr(block))
	_, frames := readBlock(t, block)
	out := make([][]byte, len(frames))
	for i, f := range frames {
		if f.memType&^(FrameUserFlag|FrameOwnFlag) != uint64(MemHost) {
			t.Fatalf("frame %d: memory type word %#x, want host", i, f.memType)
		}
		if f.memType&FrameOwnFlag != 0 {
			ucxx.CFreeAddr(uintptr(f.loc))
		}
		out[i] = f.data
	}
	return out
}

// checkBlock takes the frames of block and fails the test unless they are frames.
func checkBlock(t *testing.T, block uint64, frames [][]byte) {
	t.Helper()
	got := takeBlock(t, block)
	if len(got) != len(frames) {
		t.Fatalf("got %d frames, want %d", len(got), len(frames))
	}
	for i := range got {
		if !bytes.Equal(got[i], frames[i]) {
			t.Fatalf("frame %d: wrong bytes", i)
		}
	}
}

// provideFrames hands frames to ProvideFrames, for the receive whose need id is
// needID, as the array it reads.
func provideFrames(e *Engine, needID uint64, frames []providedFrame) error {
	raw := make([]byte, ProvidedFrameSize*len(frames))
	for i, f := range frames {
		binary.LittleEndian.PutUint64(raw[ProvidedFrameSize*i:], uint64(f.addr))
		binary.LittleEndian.PutUint64(raw[ProvidedFrameSize*i+8:], f.memType)
	}
	if len(frames) == 0 {
		return e.ProvideFrames(needID, 0, 0)
	}
	return e.ProvideFrames(needID, addr(raw), len(frames))
}

// footprint is the fuzz model's own reckoning of what admission charges for a message
// of frames of these sizes (messagePlan.footprint is the engine's): the record and
// every frame, wherever it lives, each BlockAlign-aligned.
func footprint(sizes []uint64) uint64 {
	total := alignUp(recordSize(len(sizes)))
	for _, s := range sizes {
		total = alignUp(total + s)
	}
	return total
}
