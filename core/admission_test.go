package core

import (
	"bytes"
	"runtime"
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
	checkBlock(t, comp.Length, frames)
	exchange(t, client, cep, cc, server, sep, sc, []byte("still open"))
}

// A receive on the worker waiting for room at shutdown, and one queued behind it on
// the same stream, end with the stop, which does not wait for them.
func TestShutdownEndsWorkerReceivesWaitingForRoom(t *testing.T) {
	w := newWorkerStream(t, 1<<20)
	server, sc, client, cep, cc, tag, first := w.server, w.sc, w.client, w.cep, w.cc, w.tag, w.first
	second, err := server.RecvMulti(0, tag)
	if err != nil {
		t.Fatal(err)
	}
	settle(t, server)
	// A header announcing more than the unproven allowance, its frame never sent.
	sendRaw(t, client, cep, cc, tag, okHeader(0, 1, []uint64{600 << 10}))
	settle(t, server)
	noCompletion(t, sc, first)
	start := time.Now()
	if err := server.Shutdown(5 * time.Second); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Shutdown took %v", d)
	}
	for _, r := range []uint64{first, second} {
		if c := sc.wait(r, 5*time.Second); ucxx.Status(c.Status) == ucxx.StatusOK {
			t.Fatalf("receive %#x ended OK at shutdown", r)
		}
	}
}

// workerStream is a server with a multi-buffer budget, a client connected to it, and
// a receive posted on the server's worker (no endpoint) on tag.
type workerStream struct {
	server, client *Engine
	sc, cc         *collector
	cep, tag       uint64
	first          uint64 // the receive's id
}

func newWorkerStream(t *testing.T, budget int64) workerStream {
	w := workerStream{server: newTestEngine(t, Options{MaxOutstandingBytes: budget}), tag: 0x77}
	w.sc = newCollector(t, w.server)
	w.client, w.cep, _, w.cc = clientsOf(t, w.server, w.sc)()
	var err error
	if w.first, err = w.server.RecvMulti(0, w.tag); err != nil {
		t.Fatal(err)
	}
	return w
}

// A receive on an endpoint and a forced tag (no endpoint id in it: its held frames
// name no owner) is admitted on the evidence of its frames like any other.
func TestMultiForcedTagMessageIsAdmittedOnEvidence(t *testing.T) {
	client := newTestEngine(t, Options{})
	server := newTestEngine(t, Options{MaxOutstandingBytes: 2 << 20}) // unproven: 512 KiB, 256 per endpoint
	cep, sep, cc, sc := pair(t, client, server)
	const forced = 0x55
	frame := bytes.Repeat([]byte("f"), 300<<10)
	recv, err := server.RecvMulti(sep, forced)
	if err != nil {
		t.Fatal(err)
	}
	settle(t, server)
	send := startSendFrames(t, client, cep, forced, frame)
	comp := sc.wait(recv, 10*time.Second)
	if st := ucxx.Status(comp.Status); st != ucxx.StatusOK {
		t.Fatalf("message: %v", st)
	}
	if got := takeBlock(t, comp.Length); len(got) != 1 || !bytes.Equal(got[0], frame) {
		t.Fatal("wrong bytes")
	}
	cc.wait(send, 10*time.Second)
}

// Evidence is every frame, each as long as announced: a liar that sends one message
// as long as all its frames together, or every frame but the last, waits holding
// nothing, and an honest message beside two such liars is admitted.
func TestMultiPartialOrWrongEvidenceAdmitsNothing(t *testing.T) {
	for _, c := range []struct {
		name  string
		sizes []uint64
		send  int         // the one "frame" message the liar sends
		liars ucxx.Status // how the liars' receives end (OK: they do not)
	}{
		{"one-long-message", []uint64{480 << 10, 480 << 10}, 960 << 10, ucxx.StatusOK},
		{"all-but-the-last", []uint64{700 << 10, 200 << 10}, 700 << 10, ucxx.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			server := newTestEngine(t, Options{MaxOutstandingBytes: 2 << 20})
			sc := newCollector(t, server)
			connect := clientsOf(t, server, sc)
			var liars []uint64
			var keep [][]byte
			defer func() { runtime.KeepAlive(keep) }()
			for range 2 {
				client, cep, sep, cc := connect()
				r, err := server.RecvMulti(sep, endpointInfo(t, server, sep).RecvTag)
				if err != nil {
					t.Fatal(err)
				}
				liars = append(liars, r)
				tag := endpointInfo(t, client, cep).SendTag
				sendRaw(t, client, cep, cc, tag, okHeader(0, uint64(len(c.sizes)), c.sizes))
				// Not waited for: by rendezvous, it ends only once received, which it
				// is not while its message waits.
				frame := make([]byte, c.send)
				keep = append(keep, frame)
				if _, err := client.TagSend(cep, addr(frame), uint64(len(frame)), tag|MultiTagBit, 0, 0); err != nil {
					t.Fatal(err)
				}
				exchange(t, client, cep, cc, server, sep, sc, []byte("barrier"))
			}
			client, cep, sep, cc := connect()
			honest := bytes.Repeat([]byte("h"), 900<<10) // fits only if the liars hold nothing
			send := startSendFrames(t, client, cep, endpointInfo(t, client, cep).SendTag, honest)
			st, block := recvMulti(t, server, sep, sc, endpointInfo(t, server, sep).RecvTag)
			if st != ucxx.StatusOK {
				t.Fatalf("honest message: %v", st)
			}
			takeBlock(t, block)
			cc.wait(send, 10*time.Second)
			settle(t, server)
			for _, r := range liars {
				if c.liars == ucxx.StatusOK {
					noCompletion(t, sc, r)
				} else if st := ucxx.Status(sc.wait(r, 10*time.Second).Status); st != c.liars {
					t.Fatalf("liar's receive: %v, want %v", st, c.liars)
				}
			}
		})
	}
}

// A message waiting for its frames, one of which comes of another length than
// announced, fails once they are all here (MessageTruncated, as its receives would
// have), without having held room; its frames are dropped and the stream stays in
// step.
func TestMultiFrameOfTheWrongLengthFailsAWaitingMessage(t *testing.T) {
	server := newTestEngine(t, Options{MaxOutstandingBytes: 2 << 20})
	sc := newCollector(t, server)
	connect := clientsOf(t, server, sc)
	client, cep, sep, cc := connect()
	recvTag := endpointInfo(t, server, sep).RecvTag
	recv, err := server.RecvMulti(sep, recvTag)
	if err != nil {
		t.Fatal(err)
	}
	tag := endpointInfo(t, client, cep).SendTag
	sendRaw(t, client, cep, cc, tag, okHeader(0, 40, full(40, 16<<10))) // 640 KiB: over the 256 KiB allowance
	big := make([]byte, 60<<10)
	for range 40 {
		sendRaw(t, client, cep, cc, tag, big)
	}
	if st := ucxx.Status(sc.wait(recv, 10*time.Second).Status); st != ucxx.StatusMessageTruncated {
		t.Fatalf("receive whose peer sent 40 x 60 KiB for 40 x 16 KiB: %v; want MessageTruncated", st)
	}
	sendFrames(t, client, cep, cc, tag, []byte("next"))
	st, block := recvMulti(t, server, sep, sc, recvTag)
	if st != ucxx.StatusOK {
		t.Fatalf("the next message: %v", st)
	}
	if got := takeBlock(t, block); len(got) != 1 || string(got[0]) != "next" {
		t.Fatalf("the next message: %q", got)
	}
}
