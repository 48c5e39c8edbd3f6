package core

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// An engine started without Options.OneSided refuses every one-sided operation, on
// either side, with ErrOneSidedOff (StatusUnsupported); registering memory for its own
// use is still allowed.
func TestOneSidedOffRefuses(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, sep, _, _ := pair(t, client, server)
	buf := make([]byte, 64)
	region, err := server.RegisterMemory(addr(buf), uint64(len(buf)), MemHost)
	if err != nil {
		t.Fatal(err)
	}
	defer server.ReleaseMemory(region)
	desc := make([]byte, TransferDescriptorSize) // one transfer of host memory
	desc[24], desc[32] = 8, MemHost
	junk := make([]byte, MaxPackedKey)
	for name, call := range map[string]func() error{
		"PackRegion":   func() error { _, err := server.PackRegion(region, addr(buf), 8); return err },
		"UnpackKey":    func() error { _, err := client.UnpackKey(cep, addr(junk), packedKeyHeader); return err },
		"Put":          func() error { _, err := client.Put(cep, Transfer{Key: 1, Addr: addr(buf), Size: 8}, 0); return err },
		"Get":          func() error { _, err := client.Get(cep, Transfer{Key: 1, Addr: addr(buf), Size: 8}, 0); return err },
		"PutMany":      func() error { _, err := client.PutMany(cep, addr(desc), 1); return err },
		"NewSemaphore": func() error { _, err := server.NewSemaphore(sep); return err },
		"Signal":       func() error { _, err := client.Signal(cep, 1, 1); return err },
	} {
		if err := call(); !errors.Is(err, ErrOneSidedOff) || ucxx.StatusOf(err) != ucxx.StatusUnsupported {
			t.Errorf("%s: %v, want ErrOneSidedOff", name, err)
		}
	}
}

// A peer's own UCX, given an endpoint to an engine over TCP and a key of its own
// memory, puts 64 KiB at an address of the engine's process that was never
// registered. Without Options.OneSided nothing lands, whether the peer's endpoint has
// error handling or not: the put goes by UCX's software emulation (the engine's TCP
// transport does not offer its own put, TCP_PUT_ENABLE=n), and the engine's UCX, a
// context without RMA, drops it (its log says so, which shows the put reached it).
// Offering TCP's put again lets a peer without error handling write anywhere; with
// one-sided transfers on, any peer does: the hazards the README names ("What UCX
// itself trusts"); were UCX to check such puts one day, those cases fail and the
// README should say so.
func TestPeersCannotWriteAnEngineWithoutOneSided(t *testing.T) {
	ucxx.CaptureLog() // UCX's warnings into ucxx's buffer, where the cases look for the drop
	for _, c := range []struct {
		name         string
		oneSided     bool
		tcpPut       bool // UCX_TCP_PUT_ENABLE=y on the engine
		mode         ucxx.ErrHandling
		lands, drops bool
	}{
		{"off, peer with error handling", false, false, ucxx.ErrHandlingPeer, false, true},
		{"off, peer without error handling", false, false, ucxx.ErrHandlingNone, false, true},
		{"off, TCP put offered, peer without error handling", false, true, ucxx.ErrHandlingNone, true, false},
		{"on: any peer writes anywhere", true, false, ucxx.ErrHandlingPeer, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := map[string]string{"TLS": "tcp"}
			if c.tcpPut {
				opts["TCP_PUT_ENABLE"] = "y"
			}
			victim := newTestEngine(t, Options{UCXOptions: opts, OneSided: c.oneSided})
			secret := bytes.Repeat([]byte("s"), 1<<20) // never registered
			var pin runtime.Pinner
			defer pin.Unpin()
			pin.Pin(&secret[0])
			target := uint64(uintptr(unsafe.Pointer(&secret[4096])))
			ucxx.TakeLog()
			written := peerPutsAt(t, victim, target, 64<<10, c.mode)
			records, _ := ucxx.TakeLog()
			dropped := false
			for _, r := range records {
				dropped = dropped || strings.Contains(r.Text, "no handler installed")
			}
			landed := bytes.Contains(secret, []byte("WWWWWWWW"))
			if landed != c.lands || dropped != c.drops {
				t.Fatalf("the peer's put landed: %v, dropped by UCX: %v; want %v, %v", landed, dropped, c.lands, c.drops)
			}
			if landed && !bytes.Equal(secret[4096:4096+len(written)], written) {
				t.Fatal("the put landed elsewhere")
			}
			runtime.KeepAlive(secret)
		})
	}
}

// peerPutsAt is a peer with a UCX context of its own (RMA on, TCP only): it connects
// to victim's worker address with error handling mode, proves the connection with a
// tag message, puts n bytes of 'W' at address target of the victim's process with a
// key to its own memory, then sends a second tag message after it on the same
// endpoint. It returns once the victim has received that second message (the put, on
// the same connection, was handled before it), with the bytes it put.
func peerPutsAt(t *testing.T, victim *Engine, target uint64, n int, mode ucxx.ErrHandling) []byte {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p := newUCXPeer(t, victim, map[string]string{"TLS": "tcp"}, mode)
	defer p.close()
	p.message("hello")
	mine := bytes.Repeat([]byte("W"), n)
	mh, key := p.ownKey(mine)
	// The put goes out (a put refused here would leave nothing to land, and the cases
	// that expect nothing would pass for that reason).
	if _, st := p.ep.Put(addr(mine), uint64(n), mh, ucxx.MemoryHost, target, key, 3); st != ucxx.StatusOK && st != ucxx.StatusInProgress {
		t.Fatalf("the peer's put: %v", st)
	}
	p.message("after")
	return mine
}

// ucxPeer is a peer running UCX as it comes, in a context of its own (RMA on, UCX's
// defaults but opts), with an endpoint to a victim engine's worker address. Its
// worker is progressed by the test's goroutine, which stays locked to its OS thread
// from newUCXPeer to close.
type ucxPeer struct {
	t        *testing.T
	victim   *Engine
	ctx      *ucxx.Context
	w        *ucxx.Worker
	ep       *ucxx.Endpoint
	vc       *collector
	inbox    []byte
	pin      runtime.Pinner
	cleanups []func()
}

func newUCXPeer(t *testing.T, victim *Engine, opts map[string]string, mode ucxx.ErrHandling) *ucxPeer {
	t.Helper()
	p := &ucxPeer{t: t, victim: victim, vc: newCollector(t, victim), inbox: make([]byte, 8)}
	p.pin.Pin(&p.inbox[0])
	p.cleanups = append(p.cleanups, p.pin.Unpin)
	vaddr, err := victim.WorkerAddress()
	if err != nil {
		p.close()
		t.Fatal(err)
	}
	if p.ctx, err = ucxx.NewContext(opts, ucxx.FeatureRMA); err != nil {
		p.close()
		t.Fatal(err)
	}
	p.cleanups = append(p.cleanups, p.ctx.Close)
	if p.w, err = p.ctx.NewWorker(false); err != nil {
		p.close()
		t.Fatal(err)
	}
	p.cleanups = append(p.cleanups, p.w.Close)
	p.w.AttachEvents()
	if p.ep, err = p.w.ConnectAddressWith(vaddr, 1, mode); err != nil {
		p.close()
		t.Fatal(err)
	}
	p.cleanups = append(p.cleanups, func() {
		if req, st := p.ep.Close(true, 4); st == ucxx.StatusInProgress {
			for deadline := time.Now().Add(5 * time.Second); !p.w.Progress() && time.Now().Before(deadline); {
			}
			ucxx.FreeRequest(req)
		}
	})
	return p
}

// close releases what newUCXPeer and ownKey made, last first.
func (p *ucxPeer) close() {
	for i := len(p.cleanups) - 1; i >= 0; i-- {
		p.cleanups[i]()
	}
	p.cleanups = nil
}

// message sends a tag message to the victim, progressing the peer's worker until the
// victim's worker-level receive of it has completed.
func (p *ucxPeer) message(text string) {
	p.t.Helper()
	const tag = 0x5eed
	msg := []byte(text)
	p.pin.Pin(&msg[0])
	id, err := p.victim.TagRecv(0, addr(p.inbox), uint64(len(p.inbox)), tag, ^uint64(0), ucxx.MemoryHost, 0)
	if err != nil {
		p.t.Fatal(err)
	}
	p.ep.TagSend(addr(msg), uint64(len(msg)), tag, ucxx.MemoryHost, 2)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		p.w.Progress()
		p.w.ResetEvents()
		for i, n := 0, p.vc.q.Pop(p.vc.buf[:]); i < n; i++ {
			if comp := p.vc.buf[i]; comp.ID == id {
				if st := ucxx.Status(comp.Status); st != ucxx.StatusOK {
					p.t.Fatalf("the victim's receive of %q: %v", text, st)
				}
				return
			}
		}
	}
	p.t.Fatalf("the victim did not receive %q", text)
}

// ownKey registers mine, the peer's own host memory (pinned here), and returns its
// registration and its key unpacked on the peer's endpoint: a key a peer may well
// have, pointing at nothing of the victim's.
func (p *ucxPeer) ownKey(mine []byte) (*ucxx.MemHandle, *ucxx.RKey) {
	p.t.Helper()
	p.pin.Pin(&mine[0])
	mh, err := p.ctx.MemMap(addr(mine), uint64(len(mine)), ucxx.MemoryHost)
	if err != nil {
		p.t.Fatal(err)
	}
	p.cleanups = append(p.cleanups, func() { mh.Unmap() })
	packed, err := mh.PackRKey()
	if err != nil {
		p.t.Fatal(err)
	}
	padded := make([]byte, len(packed)+64<<10) // UCX reads a key without a length
	copy(padded, packed)
	key, err := p.ep.UnpackRKey(unsafe.Pointer(&padded[0]))
	if err != nil {
		p.t.Fatal(err)
	}
	p.cleanups = append(p.cleanups, key.Destroy)
	return mh, key
}
