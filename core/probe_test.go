package core

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// TagProbe and RecvProbed over a loopback pair. Probes look at the worker's queue of
// unexpected messages, whichever endpoint they came from.

// probeTag is a user tag for these tests: bit 63 clear, distinct low bits to mask.
const probeTag uint64 = 0x5eed_0000_0000_ab12

// sendTagged sends msg with tag from the client, waiting for the send when wait is
// set (an eager send ends at once; a rendezvous one once received), and returns the
// request id.
func sendTagged(t *testing.T, client *Engine, cep uint64, cc *collector, tag uint64, msg []byte, wait bool) uint64 {
	t.Helper()
	id, err := client.TagSend(cep, addr(msg), uint64(len(msg)), tag, 0, 0)
	if err != nil {
		t.Fatalf("TagSend: %v", err)
	}
	if wait {
		if c := cc.wait(id, 5*time.Second); c.Status != 0 {
			t.Fatalf("TagSend completed with %v", ucxx.Status(c.Status))
		}
	}
	return id
}

// checkProbe compares a probe's result with what it should have found.
func checkProbe(t *testing.T, got ProbeResult, tag uint64, length int, removed bool) {
	t.Helper()
	if !got.Found || got.SenderTag != tag || got.Length != uint64(length) || (got.Handle != 0) != removed {
		t.Fatalf("TagProbe = %+v; want found, sender tag %#x, length %d, a handle %t", got, tag, length, removed)
	}
}

// TestTagProbeNothing: with nothing sent, a probe finds nothing, with or without
// remove, and reports no sender, length or handle.
func TestTagProbeNothing(t *testing.T) {
	e := newTestEngine(t, Options{})
	for _, remove := range []bool{false, true} {
		res, err := e.TagProbe(probeTag, ^uint64(0), remove)
		if err != nil {
			t.Fatal(err)
		}
		if res != (ProbeResult{}) {
			t.Fatalf("TagProbe(remove=%t) of nothing = %+v; want the zero result", remove, res)
		}
	}
}

// TestTagProbeKeeps: a probe without remove reports the message's sender tag and
// length, and leaves it for TagRecv; once received, a probe finds nothing.
func TestTagProbeKeeps(t *testing.T) {
	for _, size := range []int{0, 100, 1 << 20} {
		client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
		cep, _, cc, sc := pair(t, client, server)
		msg := testMessage(size, size)[0]
		eager := size < 1<<20
		sid := sendTagged(t, client, cep, cc, probeTag, msg, eager)
		checkProbe(t, waitProbe(t, server, probeTag, ^uint64(0)), probeTag, size, false)
		// Probing again finds it again: it was left in place.
		res, err := server.TagProbe(probeTag, ^uint64(0), false)
		if err != nil {
			t.Fatal(err)
		}
		checkProbe(t, res, probeTag, size, false)

		buf := make([]byte, size+1)
		rid, err := server.TagRecv(0, addr(buf), uint64(len(buf)), probeTag, ^uint64(0), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		c := sc.wait(rid, 10*time.Second)
		if c.Status != 0 || c.Length != uint64(size) || c.Tag != probeTag || !bytes.Equal(buf[:size], msg) {
			t.Fatalf("%d bytes: TagRecv after the probe: %+v", size, c)
		}
		if !eager { // a rendezvous send ends once received
			if c := cc.wait(sid, 10*time.Second); c.Status != 0 {
				t.Fatalf("%d bytes: send: %v", size, ucxx.Status(c.Status))
			}
		}
		if res, err := server.TagProbe(probeTag, ^uint64(0), false); err != nil || res.Found {
			t.Fatalf("%d bytes: TagProbe after the receive = %+v, %v; want nothing", size, res, err)
		}
		runtime.KeepAlive(msg)
		runtime.KeepAlive(buf)
	}
}

// TestTagProbeRemove: a probe with remove takes the message off the queue (a second
// probe finds nothing, a TagRecv would not get it) and hands it to RecvProbed, once.
func TestTagProbeRemove(t *testing.T) {
	for _, size := range []int{0, 100, 1 << 20} {
		client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
		cep, _, cc, sc := pair(t, client, server)
		msg := testMessage(size, size)[0]
		eager := size < 1<<20
		sid := sendTagged(t, client, cep, cc, probeTag, msg, eager)
		waitProbe(t, server, probeTag, ^uint64(0))
		res, err := server.TagProbe(probeTag, ^uint64(0), true)
		if err != nil {
			t.Fatal(err)
		}
		checkProbe(t, res, probeTag, size, true)
		if again, err := server.TagProbe(probeTag, ^uint64(0), false); err != nil || again.Found {
			t.Fatalf("%d bytes: TagProbe after removing = %+v, %v; want nothing", size, again, err)
		}
		other := make([]byte, size+1)
		oid, err := server.TagRecv(0, addr(other), uint64(len(other)), probeTag, ^uint64(0), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		settle(t, server)
		noCompletion(t, sc, oid) // the removed message is not there to match

		buf := make([]byte, size+1)
		rid, err := server.RecvProbed(res.Handle, addr(buf), uint64(len(buf)))
		if err != nil {
			t.Fatal(err)
		}
		c := sc.wait(rid, 10*time.Second)
		if c.Status != 0 || c.Length != uint64(size) || !bytes.Equal(buf[:size], msg) {
			t.Fatalf("%d bytes: RecvProbed: %+v", size, c)
		}
		if !eager { // a rendezvous send ends once received
			if c := cc.wait(sid, 10*time.Second); c.Status != 0 {
				t.Fatalf("%d bytes: send: %v", size, ucxx.Status(c.Status))
			}
		}
		if err := server.Cancel(oid); err != nil {
			t.Fatal(err)
		}
		if c := sc.wait(oid, 5*time.Second); ucxx.Status(c.Status) != ucxx.StatusCanceled {
			t.Fatalf("%d bytes: the TagRecv posted after the removal: %+v; want it cancelled, having taken nothing", size, c)
		}
		runtime.KeepAlive(other)
		// The handle was used up; one never given out is unknown too.
		for _, h := range []uint64{res.Handle, res.Handle + 1000} {
			id, err := server.RecvProbed(h, addr(buf), uint64(len(buf)))
			if err != nil {
				t.Fatal(err)
			}
			if c := sc.wait(id, 5*time.Second); ucxx.Status(c.Status) != ucxx.StatusNoElem {
				t.Fatalf("RecvProbed(%d) of no message: %+v; want status %v", h, c, ucxx.StatusNoElem)
			}
		}
		runtime.KeepAlive(msg)
		runtime.KeepAlive(buf)
	}
}

// TestTagProbeMask: a probe matches the tag under its mask, and reports the sender's
// whole tag.
func TestTagProbeMask(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, _, cc, _ := pair(t, client, server)
	msg := []byte("masked")
	sendTagged(t, client, cep, cc, probeTag, msg, true)
	waitProbe(t, server, probeTag, ^uint64(0))
	for _, c := range []struct {
		tag, mask uint64
		found     bool
	}{
		{probeTag &^ 0xff, ^uint64(0xff), true},
		{probeTag ^ 0x100, ^uint64(0xff), false},
		{0, 0, true}, // any tag
		{probeTag + 1, ^uint64(0), false},
	} {
		res, err := server.TagProbe(c.tag, c.mask, false)
		if err != nil {
			t.Fatal(err)
		}
		if c.found {
			checkProbe(t, res, probeTag, len(msg), false)
		} else if res.Found {
			t.Fatalf("TagProbe(%#x, mask %#x) = %+v; want nothing", c.tag, c.mask, res)
		}
	}
	runtime.KeepAlive(msg)
}

// TestRecvProbedTruncated: a removed message longer than the buffer given to
// RecvProbed fails with MessageTruncated.
func TestRecvProbedTruncated(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, _, cc, sc := pair(t, client, server)
	msg := bytes.Repeat([]byte{0xcd}, 64)
	sendTagged(t, client, cep, cc, probeTag, msg, true)
	waitProbe(t, server, probeTag, ^uint64(0))
	res, err := server.TagProbe(probeTag, ^uint64(0), true)
	if err != nil {
		t.Fatal(err)
	}
	checkProbe(t, res, probeTag, len(msg), true)
	buf := make([]byte, 16)
	id, err := server.RecvProbed(res.Handle, addr(buf), uint64(len(buf)))
	if err != nil {
		t.Fatal(err)
	}
	if c := sc.wait(id, 5*time.Second); ucxx.Status(c.Status) != ucxx.StatusMessageTruncated {
		t.Fatalf("RecvProbed of 64 bytes into 16: %+v; want status %v", c, ucxx.StatusMessageTruncated)
	}
	runtime.KeepAlive(msg)
	runtime.KeepAlive(buf)
}
