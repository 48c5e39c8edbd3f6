package core

import (
	"bytes"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// The RMA guard (ucxx/rmaguard.go) is in place with the UCX this repository builds
// against: the handlers it wraps are laid out as it expects.
func TestRMAGuardActive(t *testing.T) {
	newTestEngine(t, Options{})
	if !ucxx.RMAGuardActive() {
		t.Fatal("the RMA guard is not in place: this UCX's rendezvous handlers are not as rmaguard.c expects")
	}
}

// A peer running UCX as it comes, with UCX_RMA_PPLN_ENABLE=y and its buffer in GPU
// memory, puts 64 KiB at an address of an engine's process that was never registered,
// or gets 64 KiB from there, with a key to its own memory: UCX takes its one-sided
// rendezvous for that, which every context with tag messages serves at the address
// the peer names. Without Options.OneSided the guard drops the request (its count
// rises) and nothing moves; with one-sided transfers on, the write lands and the read
// takes the secret (the hazard the README names, which shows the request does reach
// the engine). Needs a GPU; skipped without.
func TestPeersCannotStartOneSidedRendezvous(t *testing.T) {
	d, err := ucxx.CUDA()
	if err != nil {
		t.Skipf("no CUDA: %v", err)
	}
	for _, c := range []struct {
		name          string
		get, oneSided bool
	}{
		{"put, one-sided off", false, false},
		{"get, one-sided off", true, false},
		{"put, one-sided on: the peer writes anywhere", false, true},
		{"get, one-sided on: the peer reads anywhere", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			victim := newTestEngine(t, Options{OneSided: c.oneSided})
			secret := bytes.Repeat([]byte("s"), 1<<20) // never registered
			copy(secret[4096:], "TOPSECRET")
			var pin runtime.Pinner
			defer pin.Unpin()
			pin.Pin(&secret[0])
			before := ucxx.RMAGuardDropped()
			got, ended := peerRendezvous(t, d, victim, uint64(uintptr(unsafe.Pointer(&secret[4096]))), 64<<10, c.get)
			dropped := ucxx.RMAGuardDropped() - before
			landed := bytes.Contains(secret, []byte("WWWWWWWW"))
			read := bytes.Contains(got, []byte("TOPSECRET"))
			reached := landed
			if c.get {
				reached = read
			}
			if reached != c.oneSided || landed && read || (dropped == 0) != c.oneSided || ended != c.oneSided {
				t.Fatalf("landed %v, secret read %v, dropped by the guard %d, the peer's request ended %v", landed, read, dropped, ended)
			}
			runtime.KeepAlive(secret)
		})
	}
}

// peerRendezvous is a peer (ucxPeer, UCX_RMA_PPLN_ENABLE=y) that puts n bytes of 'W'
// from GPU memory at target, or gets n bytes from there into GPU memory, then waits
// until its flush ends or the guard has dropped a request, and sends a tag message
// after. It returns what its GPU buffer holds then, and whether its put or get ended
// (a dropped one never does). It runs with device 0's primary context current (UCX
// copies the GPU memory on the peer's thread).
func peerRendezvous(t *testing.T, d *ucxx.CUDADriver, victim *Engine, target uint64, n int, get bool) (got []byte, ended bool) {
	t.Helper()
	if err := heldPrimary(t, d).Use(func() error {
		dev, err := d.MemAlloc(uint64(n))
		if err != nil {
			return err
		}
		defer d.MemFree(dev)
		if err := d.CopyToDevice(dev, bytes.Repeat([]byte("W"), n)); err != nil {
			return err
		}
		p := newUCXPeer(t, victim, map[string]string{"RMA_PPLN_ENABLE": "y"}, ucxx.ErrHandlingPeer)
		defer p.close()
		p.message("hello")
		_, key := p.ownKey(make([]byte, 4096))
		before := ucxx.RMAGuardDropped()
		op := p.ep.Put
		if get {
			op = p.ep.Get
		}
		_, st := op(dev, uint64(n), nil, ucxx.MemoryCUDA, target, key, 3)
		if st != ucxx.StatusOK && st != ucxx.StatusInProgress {
			t.Fatalf("the peer's request: %v", st)
		}
		ended = st == ucxx.StatusOK
		_, st = p.ep.Flush(5)
		done := st != ucxx.StatusInProgress
		progress := func() { // one pass of the peer's worker, noting what ended
			p.w.Progress()
			for _, ev := range p.w.Events() {
				if ev.Kind == ucxx.EventCompletion {
					ucxx.FreeRequest(ev.Ptr)
					done = done || ev.ID == 5
					ended = ended || ev.ID == 3 && ev.Status == ucxx.StatusOK
				}
			}
			p.w.ResetEvents()
		}
		for deadline := time.Now().Add(10 * time.Second); !done && time.Now().Before(deadline); {
			progress()
			done = done || ucxx.RMAGuardDropped() > before
		}
		if !done {
			t.Fatal("the peer's flush did not end, and the guard dropped nothing")
		}
		p.message("after")
		for range 100 { // a late end of the request would show here
			progress()
		}
		got = make([]byte, n)
		return d.CopyFromDevice(got, dev)
	}); err != nil {
		t.Fatal(err)
	}
	return got, ended
}

var primary struct {
	once sync.Once
	ctx  ucxx.CUDAContext
	err  error
}

// heldPrimary retains device 0's primary context once for the test binary and never
// releases it. Releasing the last reference destroys the context, and on an H200 with
// UCX 1.22 the next engine's ucp_init then crashed (SIGSEGV) after a subtest that had
// released it.
func heldPrimary(t *testing.T, d *ucxx.CUDADriver) ucxx.CUDAContext {
	t.Helper()
	primary.once.Do(func() { primary.ctx, primary.err = d.RetainPrimary(0) })
	if primary.err != nil {
		t.Fatal(primary.err)
	}
	return primary.ctx
}
