package core

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Receives whose CUDA frames the application allocates (RecvMultiAllocated and
// ProvideFrames), over a loopback pair. Without a GPU the frames cannot be provided,
// but everything up to that point, and every way out of it, runs on the host: a peer
// writing by hand announces CUDA frames and sends their bytes from host memory.

// startRecvAllocated posts a RecvMultiAllocated on the stream and returns its ids.
func (m *multiConn) startRecvAllocated(t *testing.T) (id, needID uint64) {
	t.Helper()
	id, needID, err := m.server.RecvMultiAllocated(m.sep, m.tag)
	if err != nil {
		t.Fatalf("RecvMultiAllocated: %v", err)
	}
	if needID == 0 || needID == id {
		t.Fatalf("RecvMultiAllocated = %d, %d; want two distinct ids", id, needID)
	}
	return id, needID
}

// sendAnnounced plays a peer that sends a message of frames whose memory types are
// types: its headers, encoded by EncodeHeaders, then each frame as a tag message of its
// own, from host memory whatever its type says.
func (m *multiConn) sendAnnounced(t *testing.T, frames [][]byte, types []uint8) {
	t.Helper()
	sizes := make([]uint64, len(frames))
	for i, f := range frames {
		sizes[i] = uint64(len(f))
	}
	dst := make([]byte, HeaderCount(len(frames))*MaxHeaderSize)
	for i, n := range EncodeHeaders(dst, sizes, types, nil) {
		sendRaw(t, m.client, m.cep, m.cc, m.tag, dst[i*MaxHeaderSize:i*MaxHeaderSize+n])
	}
	for _, f := range frames {
		sendRaw(t, m.client, m.cep, m.cc, m.tag, f)
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
			id, need = m.startRecvAllocated(t)
			m.send(t, msg)
		} else { // the message first
			m.send(t, msg)
			waitProbe(t, m.server, m.tag|MultiTagBit, ^uint64(0))
			id, need = m.startRecvAllocated(t)
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
	id, need := m.startRecvAllocated(t)
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
	err := provideFrames(m.server, uintptr(block), []uint64{uint64(addr(host)), uint64(addr(host))})
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
	id2, need2 := m.startRecvAllocated(t)
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
	waitForNeed := func(t *testing.T, m *multiConn) (id, block uint64) {
		t.Helper()
		id, need := m.startRecvAllocated(t)
		m.sendAnnounced(t, frames, types)
		c := m.sc.wait(need, 10*time.Second)
		if c.Status != 0 || c.Length == 0 {
			t.Fatalf("need-frames completion: %v, block %#x", ucxx.Status(c.Status), c.Length)
		}
		return id, c.Length
	}

	t.Run("no addresses", func(t *testing.T) {
		m := newMultiConn(t, Options{})
		id, block := waitForNeed(t, m)
		if err := provideFrames(m.server, uintptr(block), nil); err != nil {
			t.Fatal(err)
		}
		m.expectStatus(t, id, ucxx.StatusInvalidParam, "receive given no frame addresses")
		next := testMessage(6, 11)
		m.send(t, next)
		m.expect(t, m.startRecv(t), next, "next message")
	})

	t.Run("endpoint aborted", func(t *testing.T) {
		m := newMultiConn(t, Options{})
		id, block := waitForNeed(t, m)
		if err := m.server.AbortEndpoint(m.sep); err != nil {
			t.Fatal(err)
		}
		if err := provideFrames(m.server, uintptr(block), nil); err != nil {
			t.Fatal(err)
		}
		m.expectStatus(t, id, ucxx.StatusCanceled, "receive whose endpoint was aborted")
		waitIdle(t, m.server)
	})

	t.Run("shutdown", func(t *testing.T) {
		m := newMultiConn(t, Options{})
		id, _ := waitForNeed(t, m)
		if err := m.server.Shutdown(5 * time.Second); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		m.expectStatus(t, id, ucxx.StatusCanceled, "receive waiting at shutdown")
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
