package core

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Receives whose frames the application allocates (RecvMultiAllocated and
// ProvideFrames), over a loopback pair. Without a GPU CUDA frames cannot be provided,
// but everything up to that point, and every way out of it, runs on the host: a peer
// writing by hand announces CUDA frames and sends their bytes from host memory. Host
// frames the application allocates run the whole way.

// cudaFrames is the policy of a receive whose CUDA frames the application allocates.
var cudaFrames = FramePolicy{CUDA: true}

// startRecvAllocated posts a RecvMultiAllocated on the stream and returns its ids.
func (m *multiConn) startRecvAllocated(t *testing.T, policy FramePolicy) (id, needID uint64) {
	t.Helper()
	id, needID, err := m.server.RecvMultiAllocated(m.sep, m.tag, policy)
	if err != nil {
		t.Fatalf("RecvMultiAllocated: %v", err)
	}
	if needID == 0 || needID == id {
		t.Fatalf("RecvMultiAllocated = %d, %d; want two distinct ids", id, needID)
	}
	return id, needID
}

// sendAnnounced plays a peer that sends a message of frames whose memory types are
// types, as the wire has it (wireMessages), from host memory whatever a type says.
func (m *multiConn) sendAnnounced(t *testing.T, frames [][]byte, types []uint8) {
	t.Helper()
	for _, msg := range wireMessages(frames, types) {
		sendRaw(t, m.client, m.cep, m.cc, m.tag, msg)
	}
}

// TestRecvMultiAllocatedHostOnly: a message without CUDA frames completes the receive
// alone, as RecvMulti would; the need-frames id never completes.
func TestRecvMultiAllocatedHostOnly(t *testing.T) {
	m := newMultiConn(t, Options{})
	msgs := [][][]byte{testMessage(0, 10, 0, 4000), testMessage(1), testMessage(2, 1<<20, 1)}
	var needs []uint64
	for i, msg := range msgs {
		var id, need uint64
		if i%2 == 0 { // the receive first (message 2's rendezvous send waits for it)
			id, need = m.startRecvAllocated(t, cudaFrames)
			m.send(t, msg)
		} else { // the message first
			m.send(t, msg)
			waitProbe(t, m.server, m.tag|MultiTagBit, ^uint64(0))
			id, need = m.startRecvAllocated(t, cudaFrames)
		}
		m.expect(t, id, msg, "host-only message")
		needs = append(needs, need)
	}
	settle(t, m.server)
	for _, need := range needs {
		noCompletion(t, m.sc, need)
	}
}

// TestRecvMultiAllocatedAsksForFrames: once the headers of a message with CUDA frames
// are in, the need-frames id completes with the block, its record listing every frame:
// host frames placed in the block, CUDA frames with address 0 and the application's
// flag. The receive waits for ProvideFrames, which refuses host memory; a Cancel then
// ends it and drops the message, and the next message arrives whole.
func TestRecvMultiAllocatedAsksForFrames(t *testing.T) {
	m := newMultiConn(t, Options{})
	id, need := m.startRecvAllocated(t, cudaFrames)
	frames := testMessage(3, 10, 20, 7, 0)
	types := []uint8{MemHost, MemCUDA, MemHost, MemCUDA}
	m.sendAnnounced(t, frames, types)

	c := m.sc.wait(need, 10*time.Second)
	if c.Status != 0 || c.Length == 0 {
		t.Fatalf("need-frames completion: %v, block %#x", ucxx.Status(c.Status), c.Length)
	}
	block := c.Length
	size, rec := readBlock(t, block)
	if len(rec) != len(frames) {
		t.Fatalf("record of %d frames, want %d", len(rec), len(frames))
	}
	for i, f := range rec {
		if f.size != uint64(len(frames[i])) {
			t.Errorf("frame %d: size %d, want %d", i, f.size, len(frames[i]))
		}
		switch types[i] {
		case MemHost:
			if f.memType != uint64(MemHost) {
				t.Errorf("host frame %d: memory type word %#x", i, f.memType)
			}
		case MemCUDA:
			if f.loc != 0 || f.memType != uint64(MemCUDA)|FrameUserFlag {
				t.Errorf("CUDA frame %d: location %#x, memory type word %#x; want 0 and %#x", i, f.loc, f.memType, uint64(MemCUDA)|FrameUserFlag)
			}
		}
	}
	t.Logf("block of %d bytes", size)
	settle(t, m.server)
	noCompletion(t, m.sc, id) // it waits for the frames' addresses

	host := make([]byte, 64)
	err := provideFrames(m.server, need, []providedFrame{{addr(host), uint64(MemCUDA)}, {addr(host), uint64(MemCUDA)}})
	if !errors.Is(err, ErrNotCUDA) && !errors.Is(err, ucxx.ErrNoCUDA) {
		t.Fatalf("ProvideFrames with host memory: %v; want ErrNotCUDA or ucxx.ErrNoCUDA", err)
	}
	settle(t, m.server)
	noCompletion(t, m.sc, id)

	if err := m.server.Cancel(id); err != nil {
		t.Fatal(err)
	}
	m.expectStatus(t, id, ucxx.StatusCanceled, "receive cancelled while it waits for frames")

	next := testMessage(4, 5, 6)
	m.send(t, next)
	id2, need2 := m.startRecvAllocated(t, cudaFrames)
	m.expect(t, id2, next, "next message")
	settle(t, m.server)
	noCompletion(t, m.sc, need2)
	runtime.KeepAlive(host)
}

// TestRecvMultiAllocatedWaitEnds: every way a receive waiting for its CUDA frames
// can end without them completes it with a status saying why, and the stream stays
// in step: too few addresses (InvalidParam), its endpoint aborted (the endpoint's
// status, when the application answers), the engine shut down (Canceled).
func TestRecvMultiAllocatedWaitEnds(t *testing.T) {
	frames := testMessage(5, 3, 9)
	types := []uint8{MemHost, MemCUDA}
	waitForNeed := func(t *testing.T, m *multiConn) (id, need, block uint64) {
		t.Helper()
		id, need = m.startRecvAllocated(t, cudaFrames)
		m.sendAnnounced(t, frames, types)
		c := m.sc.wait(need, 10*time.Second)
		if c.Status != 0 || c.Length == 0 {
			t.Fatalf("need-frames completion: %v, block %#x", ucxx.Status(c.Status), c.Length)
		}
		return id, need, c.Length
	}

	t.Run("no addresses", func(t *testing.T) {
		m := newMultiConn(t, Options{})
		id, need, _ := waitForNeed(t, m)
		if err := provideFrames(m.server, need, nil); err != nil {
			t.Fatal(err)
		}
		m.expectStatus(t, id, ucxx.StatusInvalidParam, "receive given no frame addresses")
		next := testMessage(6, 11)
		m.send(t, next)
		m.expect(t, m.startRecv(t), next, "next message")
	})

	t.Run("endpoint aborted", func(t *testing.T) {
		m := newMultiConn(t, Options{})
		id, need, _ := waitForNeed(t, m)
		if err := m.server.AbortEndpoint(m.sep); err != nil {
			t.Fatal(err)
		}
		if err := provideFrames(m.server, need, nil); err != nil {
			t.Fatal(err)
		}
		m.expectStatus(t, id, ucxx.StatusCanceled, "receive whose endpoint was aborted")
		waitIdle(t, m.server)
	})

	t.Run("shutdown", func(t *testing.T) {
		m := newMultiConn(t, Options{})
		id, _, block := waitForNeed(t, m)
		if err := m.server.Shutdown(5 * time.Second); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		m.expectStatus(t, id, ucxx.StatusCanceled, "receive waiting at shutdown")
		// The block the need-frames completion reported stays readable until the
		// queue is freed: its reader may not have got to it before the shutdown.
		if _, rec := readBlock(t, block); len(rec) != len(frames) {
			t.Fatalf("block after shutdown lists %d frames, want %d", len(rec), len(frames))
		}
	})
}

// TestRecvMultiCUDAFramesWithoutCUDA: a plain RecvMulti of a message announcing CUDA
// frames, on a machine without CUDA, cannot allocate them: the message fails with
// NoMemory, its frames are dropped, and the next message arrives whole.
func TestRecvMultiCUDAFramesWithoutCUDA(t *testing.T) {
	if _, err := ucxx.CUDA(); err == nil {
		t.Skip("a CUDA driver is present: the engine allocates the frames")
	}
	m := newMultiConn(t, Options{})
	ids := []uint64{m.startRecv(t), m.startRecv(t)}
	m.sendAnnounced(t, testMessage(7, 4, 8), []uint8{MemCUDA, MemHost})
	next := testMessage(8, 12, 0)
	m.send(t, next)
	m.expectStatus(t, ids[0], ucxx.StatusNoMemory, "message with CUDA frames")
	m.expect(t, ids[1], next, "next message")
}

// TestRecvMultiAllocatedHostFrames: with FramePolicy.HostFrom, host frames of at least
// that size are received into the application's memory and the smaller ones into the
// block: the need-frames id reports the block with the large frames at location 0 and
// the application's flag, ProvideFrames hands their memory, and the message completes
// with the record pointing at it. A message of small frames only completes alone.
func TestRecvMultiAllocatedHostFrames(t *testing.T) {
	const from = 4096
	m := newMultiConn(t, Options{})
	frames := testMessage(9, 10, 5000, 0, from, 1<<20)
	id, need := m.startRecvAllocated(t, FramePolicy{HostFrom: from})
	sid := startSendFrames(t, m.client, m.cep, m.tag, frames...) // rendezvous: waits for the receives

	c := m.sc.wait(need, 10*time.Second)
	if c.Status != 0 || c.Length == 0 {
		t.Fatalf("need-frames completion: %v, block %#x", ucxx.Status(c.Status), c.Length)
	}
	_, rec := readBlock(t, c.Length)
	var mine []providedFrame
	for i, f := range rec {
		large := len(frames[i]) >= from
		if want := uint64(MemHost) | map[bool]uint64{true: FrameUserFlag}[large]; f.memType != want {
			t.Fatalf("frame %d (%d bytes): memory type word %#x, want %#x", i, len(frames[i]), f.memType, want)
		}
		if large {
			if f.loc != 0 {
				t.Fatalf("frame %d: location %#x before it was provided", i, f.loc)
			}
			mine = append(mine, providedFrame{addr(make([]byte, f.size)), uint64(MemHost)})
		}
	}
	settle(t, m.server)
	noCompletion(t, m.sc, id) // it waits for the frames' memory
	if err := provideFrames(m.server, need, mine); err != nil {
		t.Fatal(err)
	}
	if c := m.cc.wait(sid, 10*time.Second); c.Status != 0 {
		t.Fatalf("send: %v", ucxx.Status(c.Status))
	}
	c = m.sc.wait(id, 10*time.Second)
	if c.Status != 0 {
		t.Fatalf("receive: %v", ucxx.Status(c.Status))
	}
	_, rec = readBlock(t, c.Length)
	for i, j := 0, 0; i < len(rec); i++ {
		if rec[i].memType&FrameUserFlag != 0 {
			if rec[i].loc != uint64(mine[j].addr) {
				t.Fatalf("frame %d at %#x, not in the memory provided (%#x)", i, rec[i].loc, mine[j].addr)
			}
			j++
		}
	}
	checkFrames(t, takeBlock(t, c.Length), frames, "message with provided host frames")

	small := testMessage(10, 1, from-1)
	id, need = m.startRecvAllocated(t, FramePolicy{HostFrom: from})
	m.send(t, small)
	m.expect(t, id, small, "message of small frames")
	settle(t, m.server)
	noCompletion(t, m.sc, need)
}

// TestProvideFramesMismatch: memory that does not match the frames asked for (too
// many entries, or a CUDA frame's memory for a host frame) ends the receive with
// InvalidParam, and the stream stays in step.
func TestProvideFramesMismatch(t *testing.T) {
	policy := FramePolicy{HostFrom: 100}
	for _, c := range []struct {
		name  string
		given func(b []byte) []providedFrame
		err   bool // refused by ProvideFrames itself
	}{
		{"too many", func(b []byte) []providedFrame {
			return []providedFrame{{addr(b), uint64(MemHost)}, {addr(b), uint64(MemHost)}}
		}, false},
		{"bad memory type", func(b []byte) []providedFrame { return []providedFrame{{addr(b), 7}} }, true},
		{"CUDA for host", func(b []byte) []providedFrame { return []providedFrame{{addr(b), uint64(MemCUDA)}} }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newMultiConn(t, Options{})
			id, need := m.startRecvAllocated(t, policy)
			m.send(t, testMessage(11, 8, 200))
			m.sc.wait(need, 10*time.Second)
			err := provideFrames(m.server, need, c.given(make([]byte, 200)))
			if c.err {
				if err == nil {
					t.Fatal("ProvideFrames accepted them")
				}
				if err := m.server.Cancel(id); err != nil {
					t.Fatal(err)
				}
				m.expectStatus(t, id, ucxx.StatusCanceled, "receive cancelled after a refused ProvideFrames")
			} else {
				if err != nil {
					t.Fatal(err)
				}
				m.expectStatus(t, id, ucxx.StatusInvalidParam, "receive given the wrong frames")
			}
			next := testMessage(12, 3, 300)
			m.send(t, next)
			m.expect(t, m.startRecv(t), next, "next message")
		})
	}
}

// TestProvideFramesAfterThePeersGoodbye: a peer that sends a message and closes
// gracefully at once may be gone by the time the application provides the frames'
// memory; its frames came before its goodbye, so the message still arrives whole
// (it failed with ConnectionReset when the receive required a usable endpoint).
func TestProvideFramesAfterThePeersGoodbye(t *testing.T) {
	m := newMultiConn(t, Options{})
	frames := testMessage(13, 8, 1000, 3)
	id, need := m.startRecvAllocated(t, FramePolicy{HostFrom: 100})
	m.send(t, frames) // eager: the send ends at once
	c := m.sc.wait(need, 10*time.Second)
	if c.Status != 0 {
		t.Fatalf("need-frames completion: %v", ucxx.Status(c.Status))
	}
	closeID, err := m.client.CloseEndpoint(m.cep, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if c := m.cc.wait(closeID, 10*time.Second); c.Status != 0 {
		t.Fatalf("graceful close: %v", ucxx.Status(c.Status))
	}
	m.sc.wait(EventEndpointError|m.sep, 10*time.Second) // the server saw it go
	mine := make([]byte, 1000)
	if err := provideFrames(m.server, need, []providedFrame{{addr(mine), uint64(MemHost)}}); err != nil {
		t.Fatal(err)
	}
	m.expect(t, id, frames, "message of a peer gone after its goodbye")
}

// TestCancelAfterProvideFrames: a receive cancelled once its frames' receives are
// posted into the memory the application provided does not end before those frames
// are in: the application keeps that memory until the receive's completion, and UCX
// writes into it until then. It ends Canceled once they are, the message dropped (its
// frames are the cancelled caller's), and the stream's next message arrives whole.
// It used to end Canceled at once, the frames still posted into memory the
// application then let go of.
func TestCancelAfterProvideFrames(t *testing.T) {
	m := newMultiConn(t, Options{})
	frames := testMessage(14, 8, 100<<10)
	msgs := wireMessages(frames, []uint8{MemHost, MemHost})
	if len(msgs) != 2 {
		t.Fatalf("%d tag messages on the wire, want the header and the large frame", len(msgs))
	}
	id, need := m.startRecvAllocated(t, FramePolicy{HostFrom: 100})
	sendRaw(t, m.client, m.cep, m.cc, m.tag, msgs[0]) // the header alone: its frames come later
	c := m.sc.wait(need, 10*time.Second)
	if c.Status != 0 {
		t.Fatalf("need-frames completion: %v", ucxx.Status(c.Status))
	}
	mine := make([]byte, 100<<10)
	if err := provideFrames(m.server, need, []providedFrame{{addr(mine), uint64(MemHost)}}); err != nil {
		t.Fatal(err)
	}
	if err := m.server.Cancel(id); err != nil {
		t.Fatal(err)
	}
	settle(t, m.server)
	noCompletion(t, m.sc, id) // the provided frame's receive is still posted
	for _, msg := range msgs[1:] {
		sendRaw(t, m.client, m.cep, m.cc, m.tag, msg)
	}
	m.expectStatus(t, id, ucxx.StatusCanceled, "receive cancelled after its frames were provided")
	if !bytes.Equal(mine, frames[1]) {
		t.Fatal("the provided memory does not hold the frame received into it")
	}
	runtime.KeepAlive(mine)
	next := testMessage(15, 3, 300)
	m.send(t, next)
	m.expect(t, m.startRecv(t), next, "next message")
}

// TestProvideFramesForAnEndedReceive: frames provided for a receive that ended
// (cancelled while it waited) are ignored, also when the next receive's block, made
// for a message of the same shape, has the address the ended one's had: receives are
// named by their need id, never reused. The next receive takes only its own frames.
func TestProvideFramesForAnEndedReceive(t *testing.T) {
	m := newMultiConn(t, Options{})
	policy := FramePolicy{HostFrom: 100}
	id1, need1 := m.startRecvAllocated(t, policy)
	m.send(t, testMessage(16, 8, 300))
	block1 := m.sc.wait(need1, 10*time.Second).Length
	if err := m.server.Cancel(id1); err != nil {
		t.Fatal(err)
	}
	m.expectStatus(t, id1, ucxx.StatusCanceled, "receive cancelled while it waited for its frames")

	second := testMessage(17, 8, 300)
	id2, need2 := m.startRecvAllocated(t, policy)
	m.send(t, second)
	block2 := m.sc.wait(need2, 10*time.Second).Length
	t.Logf("blocks %#x, %#x (the same address: %t)", block1, block2, block1 == block2)
	stale := make([]byte, 300)
	if err := provideFrames(m.server, need1, []providedFrame{{addr(stale), uint64(MemHost)}}); err != nil {
		t.Fatal(err)
	}
	settle(t, m.server)
	noCompletion(t, m.sc, id2)
	mine := make([]byte, 300)
	if err := provideFrames(m.server, need2, []providedFrame{{addr(mine), uint64(MemHost)}}); err != nil {
		t.Fatal(err)
	}
	m.expect(t, id2, second, "the receive after the ended one")
	if !bytes.Equal(mine, second[1]) || bytes.Equal(stale, second[1]) {
		t.Fatal("the frame went into the memory provided for the ended receive")
	}
	runtime.KeepAlive(stale)
	runtime.KeepAlive(mine)
}
