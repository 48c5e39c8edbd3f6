package collective

import (
	"errors"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// TestRankCannotPassAsAnother: rank 2 sends rank 0 messages that claim to come from
// rank 1 (p2pTag's source bits), with its own endpoint id and with none; rank 0's
// receive from rank 1 takes rank 1's message, sent after them. Before tag ids, the
// first forgery was taken as rank 1's.
func TestRankCannotPassAsAnother(t *testing.T) {
	comms := formed(t, 3)
	forger := comms[2]
	forged := []byte("I am rank 1")
	for _, id := range []uint64{forger.peers.sendIDs[0], 0} {
		tk, err := forger.e.TagSendInline(forger.peers.eps[0], ptr(forged), uint64(len(forged)), id|p2pTag(1, 7), ucxx.MemoryHost, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := forger.ended(tk, forged, "forged send"); err != nil {
			t.Fatal(err)
		}
	}
	if err := comms[1].Send(0, 7, []byte("rank 1, honest")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := comms[0].Recv(1, 7, buf)
	if err != nil || string(buf[:n]) != "rank 1, honest" {
		t.Fatalf("rank 0's receive from rank 1: %q, %v", buf[:n], err)
	}
}

// TestFloodingRankFailsItsOwnEndpoint: rank 2 sends rank 0 more than the engine's
// bound of messages rank 0 does not receive; rank 0's endpoint to rank 2 fails, and
// rank 1's message to rank 0 still arrives. Before tag ids every rank's unreceived
// messages shared one bound, past which each further one was dropped, rank 1's too.
func TestFloodingRankFailsItsOwnEndpoint(t *testing.T) {
	comms := formed(t, 3)
	junk := make([]byte, 64<<10)
	sent := 0
	for ; sent < 2*int(32<<20)/len(junk); sent++ {
		if err := comms[2].Send(0, 0x1234, junk); err != nil {
			break // rank 0 failed the endpoint, and UCX told rank 2
		}
	}
	if err := comms[1].Send(0, 7, []byte("from rank 1")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := comms[0].Recv(1, 7, buf)
	if err != nil || string(buf[:n]) != "from rank 1" {
		t.Fatalf("rank 1's message after rank 2 sent %d x 64 KiB: %q, %v", sent, buf[:n], err)
	}
	// Rank 0's endpoint to rank 2 failed for holding too much.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := comms[0].Recv(2, 0x4321, buf)
		var ue *ucxx.Error
		if errors.As(err, &ue) && ue.Status == ucxx.StatusExceedsLimit {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rank 0's receive from rank 2 after the flood: %v, want StatusExceedsLimit", err)
		}
	}
}
