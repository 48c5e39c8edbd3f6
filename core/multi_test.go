package core

import (
	"bytes"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// The multi-buffer state machine over a loopback pair of engines: whole messages, and
// a peer that does not keep to what its headers announce.

func TestMultiRoundTrip(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, sep, cc, sc := pair(t, client, server)
	ci, si := endpointInfo(t, client, cep), endpointInfo(t, server, sep)
	for _, frames := range [][][]byte{
		{},
		{[]byte("one")},
		{[]byte("header"), bytes.Repeat([]byte{7}, 100_000), {}, []byte("tail")},
	} {
		sendFrames(t, client, cep, cc, ci.SendTag, frames...)
		st, block := recvMulti(t, server, sep, sc, si.RecvTag)
		if st != ucxx.StatusOK {
			t.Fatalf("RecvMulti of %d frames: %v", len(frames), st)
		}
		checkBlock(t, block, frames)
	}
}

// TestMultiOwnHostFrames: under FramePolicy.OwnHostFrom, host frames from that size
// arrive in C allocations of their own, outside the message's block, smaller ones in
// the block; without it every host frame is in the block; every frame has the bytes
// sent.
func TestMultiOwnHostFrames(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, sep, cc, sc := pair(t, client, server)
	ci, si := endpointInfo(t, client, cep), endpointInfo(t, server, sep)
	const from = 64 << 10
	frames := testMessage(5, 10, from-1, from, 100, 1<<20, 0)
	for _, own := range []uint64{from, 0} {
		sid := startSendFrames(t, client, cep, ci.SendTag, frames...) // rendezvous: waits for the receives
		tk, err := server.RecvMultiInline(sep, si.RecvTag, own)
		if err != nil {
			t.Fatalf("RecvMultiInline: %v", err)
		}
		block := tk.Length
		if tk.Done && tk.Status != ucxx.StatusOK {
			t.Fatalf("RecvMultiInline: %v", tk.Status)
		}
		if !tk.Done {
			c := sc.wait(tk.ID, 10*time.Second)
			if c.Status != 0 {
				t.Fatalf("RecvMultiInline: %v", ucxx.Status(c.Status))
			}
			block = c.Length
		}
		if c := cc.wait(sid, 10*time.Second); c.Status != 0 {
			t.Fatalf("send: %v", ucxx.Status(c.Status))
		}
		size, rec := readBlock(t, block)
		for i, f := range rec {
			switch ownsIt := own != 0 && uint64(len(frames[i])) >= own; {
			case ownsIt && (f.memType != uint64(MemHost)|FrameOwnFlag || (f.loc >= block && f.loc < block+size)):
				t.Errorf("own from %d: frame %d (%d bytes): memory type word %#x at %#x, want its own allocation outside the block at %#x",
					own, i, len(frames[i]), f.memType, f.loc, block)
			case !ownsIt && f.memType != uint64(MemHost):
				t.Errorf("own from %d: frame %d (%d bytes): memory type word %#x, want in the block", own, i, len(frames[i]), f.memType)
			}
		}
		checkFrames(t, takeBlock(t, block), frames, "message with large host frames")
	}
}

// Frames that arrive shorter or longer than their header announced (two host frames,
// gathered into one tag message) fail the message with MessageTruncated: no byte the
// peer did not write is delivered. The stream stays in step, so an honest message after
// it arrives whole.
func TestMultiFrameLengthMustMatchHeader(t *testing.T) {
	for _, c := range []struct {
		name      string
		announced uint64
		sent      int
	}{
		{"shorter", 4000, 1},
		{"empty", 4000, 0},
		{"longer", 10, 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
			cep, sep, cc, sc := pair(t, client, server)
			ci, si := endpointInfo(t, client, cep), endpointInfo(t, server, sep)
			sendRaw(t, client, cep, cc, ci.SendTag, okHeader(0, 2, []uint64{c.announced, 3}))
			sendRaw(t, client, cep, cc, ci.SendTag, append(bytes.Repeat([]byte{0xAB}, c.sent), "xyz"...))
			if st, block := recvMulti(t, server, sep, sc, si.RecvTag); st != ucxx.StatusMessageTruncated || block != 0 {
				t.Fatalf("lying frame: status %v, block %#x; want %v and no block", st, block, ucxx.StatusMessageTruncated)
			}
			sendFrames(t, client, cep, cc, ci.SendTag, []byte("honest"))
			st, block := recvMulti(t, server, sep, sc, si.RecvTag)
			if st != ucxx.StatusOK {
				t.Fatalf("next message: %v", st)
			}
			if got := takeBlock(t, block); len(got) != 1 || string(got[0]) != "honest" {
				t.Fatalf("next message: %q", got)
			}
		})
	}
}

// A well-formed header announcing far more frames than the limit breaks the stream at
// once: the receive and every later one on the stream fail with ExceedsLimit, instead
// of the engine silently dropping the peer's next 1.5 million messages.
func TestMultiHugeFrameCountPoisonsTheStream(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, sep, cc, sc := pair(t, client, server)
	ci, si := endpointInfo(t, client, cep), endpointInfo(t, server, sep)
	const announced = 1_500_000
	h := okHeader(HeaderMore, announced, full(FramesPerHeader, 1))
	sendRaw(t, client, cep, cc, ci.SendTag, h)
	if st, _ := recvMulti(t, server, sep, sc, si.RecvTag); st != ucxx.StatusExceedsLimit {
		t.Fatalf("huge header: %v, want ExceedsLimit", st)
	}
	sendFrames(t, client, cep, cc, ci.SendTag, []byte("later"))
	if st, _ := recvMulti(t, server, sep, sc, si.RecvTag); st != ucxx.StatusExceedsLimit {
		t.Fatalf("a receive after the huge header: %v, want ExceedsLimit (stream broken)", st)
	}
	// Plain traffic on the endpoint goes on.
	exchange(t, client, cep, cc, server, sep, sc, []byte("plain"))
}

// Peers that announce large messages and never send their frames hold at most their
// share of the bytes being received: an honest peer's message that fits is admitted at
// once, not queued behind them (issue: a worker-wide FIFO stalled it until a liar left).
func TestMultiLiarsDoNotStallAnHonestPeer(t *testing.T) {
	const budget = 1 << 20
	for _, c := range []struct {
		name      string
		perEP     int64
		liars     []uint64 // bytes each liar announces
		firstFail bool     // the first liar's message is over the per-endpoint bound
	}{
		// The first liar's message waits (for room, or since the unproven allowances,
		// for its frames) and the second is admitted on its word: the honest message
		// fits and must not queue behind the first.
		{"skip-ahead", budget, []uint64{900 << 10, 200 << 10}, false},
		// Default per-endpoint bound (half): the first liar's message is refused.
		{"per-endpoint-bound", 0, []uint64{900 << 10, 400 << 10}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			server := newTestEngine(t, Options{MaxOutstandingBytes: budget, MaxEndpointOutstandingBytes: c.perEP})
			sc := newCollector(t, server)
			connect := clientsOf(t, server, sc)
			var liarRecvs []uint64
			for i, size := range c.liars {
				client, cep, sep, cc := connect()
				id, err := server.RecvMulti(sep, endpointInfo(t, server, sep).RecvTag)
				if err != nil {
					t.Fatal(err)
				}
				sendRaw(t, client, cep, cc, endpointInfo(t, client, cep).SendTag, okHeader(0, 1, []uint64{size}))
				if i == 0 && c.firstFail {
					if comp := sc.wait(id, 10*time.Second); ucxx.Status(comp.Status) != ucxx.StatusExceedsLimit {
						t.Fatalf("liar over the per-endpoint bound: %v", ucxx.Status(comp.Status))
					}
					continue
				}
				liarRecvs = append(liarRecvs, id)
				// A barrier: its header has been taken in once a plain message after it is.
				exchange(t, client, cep, cc, server, sep, sc, []byte("barrier"))
			}
			client, cep, sep, cc := connect()
			start := time.Now()
			sendFrames(t, client, cep, cc, endpointInfo(t, client, cep).SendTag, []byte("a"), []byte("bc"), []byte("def"))
			st, block := recvMulti(t, server, sep, sc, endpointInfo(t, server, sep).RecvTag)
			if st != ucxx.StatusOK {
				t.Fatalf("honest message: %v", st)
			}
			takeBlock(t, block)
			t.Logf("honest message took %v with %d liars holding", time.Since(start), len(liarRecvs))
			for _, id := range liarRecvs {
				noCompletion(t, sc, id)
			}
		})
	}
}
