package core

import (
	"bytes"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Peers that announce messages just under the per-endpoint bound and never send the
// frames used to reserve the whole budget between two of them, and an honest peer's
// message waited for good. Now room is given on a header's word only up to the
// unproven allowances (a quarter of each bound); the rest of a message is admitted on
// the evidence of its frames. The honest message goes through, and the liars'
// messages, once their frames do come, are received whole.
func TestMultiLiarsCannotHoldTheBudget(t *testing.T) {
	const budget = 1 << 20 // per endpoint: half; unproven allowances: 256 and 128 KiB
	for _, c := range []struct {
		name  string
		liars []int // bytes each liar announces in one frame
	}{
		{"two-large", []int{500 << 10, 500 << 10}},
		// Each under the per-endpoint allowance: the first two are admitted on their
		// word, the third waits, and the worker's allowance is full.
		{"small-many", []int{120 << 10, 120 << 10, 120 << 10}},
	} {
		t.Run(c.name, func(t *testing.T) {
			server := newTestEngine(t, Options{MaxOutstandingBytes: budget})
			sc := newCollector(t, server)
			connect := clientsOf(t, server, sc)
			type liar struct {
				client   *Engine
				cep, sep uint64
				cc       *collector
				recv     uint64
				frame    []byte
			}
			var liars []liar
			for i, size := range c.liars {
				l := liar{frame: bytes.Repeat([]byte{byte('A' + i)}, size)}
				l.client, l.cep, l.sep, l.cc = connect()
				var err error
				if l.recv, err = server.RecvMulti(l.sep, endpointInfo(t, server, l.sep).RecvTag); err != nil {
					t.Fatal(err)
				}
				sendRaw(t, l.client, l.cep, l.cc, endpointInfo(t, l.client, l.cep).SendTag,
					okHeader(0, 1, []uint64{uint64(size)}))
				// A barrier: its header has been taken in once a plain message after it is.
				exchange(t, l.client, l.cep, l.cc, server, l.sep, sc, []byte("barrier"))
				liars = append(liars, l)
			}
			client, cep, sep, cc := connect()
			honest := bytes.Repeat([]byte("h"), 400<<10)
			send := startSendFrames(t, client, cep, endpointInfo(t, client, cep).SendTag, honest)
			st, block := recvMulti(t, server, sep, sc, endpointInfo(t, server, sep).RecvTag)
			if st != ucxx.StatusOK {
				t.Fatalf("honest message: %v", st)
			}
			if got := takeBlock(t, block); len(got) != 1 || !bytes.Equal(got[0], honest) {
				t.Fatal("honest message: wrong bytes")
			}
			if comp := cc.wait(send, 10*time.Second); comp.Status != 0 {
				t.Fatalf("honest send: %v", ucxx.Status(comp.Status))
			}
			settle(t, server)
			for _, l := range liars {
				noCompletion(t, sc, l.recv)
			}
			// The "liars" send their frames after all: every message arrives whole.
			for _, l := range liars {
				sendRaw(t, l.client, l.cep, l.cc, endpointInfo(t, l.client, l.cep).SendTag, l.frame)
			}
			for i, l := range liars {
				comp := sc.wait(l.recv, 10*time.Second)
				if ucxx.Status(comp.Status) != ucxx.StatusOK {
					t.Fatalf("late frames of message %d: %v", i, ucxx.Status(comp.Status))
				}
				if got := takeBlock(t, comp.Length); len(got) != 1 || !bytes.Equal(got[0], l.frame) {
					t.Fatalf("late frames of message %d: wrong bytes", i)
				}
			}
		})
	}
}

// A message waiting for room on the evidence of its frames claims them as they are
// held unexpected, and claimed frames do not count against the sender's bound on
// unexpected bytes: a message of more frames than that bound holds is received, and
// its sender's endpoint is not failed.
func TestMultiEvidenceFramesAreNotChargedAsUnexpected(t *testing.T) {
	client := newTestEngine(t, Options{})
	server := newTestEngine(t, Options{MaxOutstandingBytes: 4 << 20, MaxUnexpectedBytes: 256 << 10})
	cep, sep, cc, sc := pair(t, client, server)
	frames := make([][]byte, 56) // 56 x 32 KiB: 1.75 MiB, over the 512 KiB unproven allowance
	for i := range frames {
		frames[i] = bytes.Repeat([]byte{byte(i)}, 32<<10)
	}
	recv, err := server.RecvMulti(sep, endpointInfo(t, server, sep).RecvTag)
	if err != nil {
		t.Fatal(err)
	}
	settle(t, server) // the header's receive is posted before it comes
	send := startSendFrames(t, client, cep, endpointInfo(t, client, cep).SendTag, frames...)
	comp := sc.wait(recv, 10*time.Second)
	if st := ucxx.Status(comp.Status); st != ucxx.StatusOK {
		t.Fatalf("message: %v", st)
	}
	if comp := cc.wait(send, 10*time.Second); comp.Status != 0 {
		t.Fatalf("send: %v", ucxx.Status(comp.Status))
	}
	got := takeBlock(t, comp.Length)
	if len(got) != len(frames) {
		t.Fatalf("got %d frames, want %d", len(got), len(frames))
	}
	for i := range got {
		if !bytes.Equal(got[i], frames[i]) {
			t.Fatalf("frame %d: wrong bytes", i)
		}
	}
	exchange(t, client, cep, cc, server, sep, sc, []byte("still open"))
}
