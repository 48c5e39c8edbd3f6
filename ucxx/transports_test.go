package ucxx

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

// transportPair is two workers, each with its own context as two processes would have,
// connected through a listener on loopback, or by worker address (client side only). Both are progressed by the test's locked
// thread, so UCX's callbacks for either land in the event buffer attached there (the
// client's); pending keeps what was drained and not yet claimed.
type transportPair struct {
	t              *testing.T
	client, server *Worker
	cep, sep       *Endpoint
	pending        []Event
}

func newTransportPair(t *testing.T, options map[string]string, byAddress bool) *transportPair {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread) // registered first, runs last
	p := &transportPair{t: t}
	newWorker := func() *Worker {
		ctx, err := NewContext(options)
		if err != nil {
			t.Fatalf("NewContext(%v): %v", options, err)
		}
		t.Cleanup(ctx.Close)
		w, err := ctx.NewWorker(false)
		if err != nil {
			t.Fatalf("NewWorker: %v", err)
		}
		t.Cleanup(w.Close)
		return w
	}
	// The client first: cleanups run in reverse, so its worker, whose event buffer
	// both use, goes after the server's.
	p.client = newWorker()
	p.client.AttachEvents()
	p.server = newWorker()

	if byAddress {
		addr, err := p.server.Address()
		if err != nil {
			t.Fatalf("Address: %v", err)
		}
		if p.cep, err = p.client.ConnectAddress(addr, 100); err != nil {
			t.Fatalf("ConnectAddress: %v", err)
		}
		t.Cleanup(p.close)
		return p
	}
	l, err := p.server.Listen("127.0.0.1", 0, 7)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(l.Close)
	if p.cep, err = p.client.Connect("127.0.0.1", l.Port, 100); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(p.close) // registered last: endpoints close before workers and listener
	conn := p.await(func(ev Event) bool { return ev.Kind == EventConnRequest && ev.ID == 7 })
	if p.sep, err = p.server.AcceptEndpoint(conn.Ptr, 200); err != nil {
		t.Fatalf("AcceptEndpoint: %v", err)
	}
	return p
}

// await progresses both workers until an event satisfying match arrives, and
// returns it; it fails the test after 10 s.
func (p *transportPair) await(match func(Event) bool) Event {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.pending = append(p.pending, p.client.Events()...)
		p.client.ResetEvents()
		if i := slices.IndexFunc(p.pending, match); i >= 0 {
			ev := p.pending[i]
			p.pending = slices.Delete(p.pending, i, i+1)
			return ev
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no matching event within 10 s; pending %+v", p.pending)
		}
		p.client.Progress()
		p.server.Progress()
	}
}

// exchange sends one tag message from client to server and waits for both ends.
func (p *transportPair) exchange() {
	p.t.Helper()
	msg := CMalloc(64)
	in := CMalloc(64)
	defer CFree(msg)
	defer CFree(in)
	p.server.TagRecv(uintptr(in), 64, 9, ^uint64(0), MemoryUnknown, 1)
	if _, st := p.cep.TagSend(uintptr(msg), 64, 9, MemoryUnknown, 2); st != StatusOK && st != StatusInProgress {
		p.t.Fatalf("TagSend: %v", st)
	}
	for _, id := range []uint64{1, 2} {
		ev := p.await(func(ev Event) bool { return ev.Kind == EventCompletion && ev.ID == id })
		FreeRequest(ev.Ptr)
		if ev.Status != StatusOK {
			p.t.Fatalf("request %d: %v", id, ev.Status)
		}
	}
}

// close force-closes both endpoints, waits for the closes and frees every request
// still held by a drained event.
func (p *transportPair) close() {
	for i, ep := range []*Endpoint{p.cep, p.sep} {
		if ep == nil {
			continue
		}
		id := uint64(1000 + i)
		if _, st := ep.Close(true, id); st == StatusInProgress {
			ev := p.await(func(ev Event) bool { return ev.Kind == EventCompletion && ev.ID == id })
			FreeRequest(ev.Ptr)
		}
	}
	p.pending = append(p.pending, p.client.Events()...)
	p.client.ResetEvents()
	for _, ev := range p.pending {
		if ev.Kind == EventCompletion {
			FreeRequest(ev.Ptr)
		}
	}
	p.pending = nil
}

func TestEndpointTransports(t *testing.T) {
	for _, tc := range []struct {
		name      string
		options   map[string]string
		byAddress bool
		want      *Transport // an entry every endpoint must list, if known
	}{
		// TCP alone on loopback (UCX_NET_DEVICES=lo): the one answer known anywhere.
		// Through a listener, the connection manager's lane comes first as {"tcp", ""}.
		{"tcp", map[string]string{"TLS": "tcp"}, false, &Transport{Name: "tcp", Device: "lo"}},
		{"tcp-address", map[string]string{"TLS": "tcp"}, true, &Transport{Name: "tcp", Device: "lo"}},
		// UCX's own choice: CUDA transports too on a GPU machine.
		{"default", nil, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTransportPair(t, tc.options, tc.byAddress)
			p.exchange()
			for _, end := range []struct {
				name string
				ep   *Endpoint
			}{{"client", p.cep}, {"server", p.sep}} {
				if end.ep == nil {
					continue
				}
				got, err := end.ep.Transports()
				if err != nil {
					t.Fatalf("%s Transports: %v", end.name, err)
				}
				t.Logf("%s: %v", end.name, got)
				withDevice := 0
				for _, tr := range got {
					if tr.Name == "" {
						t.Errorf("%s: transport %+v has no name", end.name, tr)
					}
					if tr.Device != "" {
						withDevice++
					} else if tc.byAddress {
						t.Errorf("%s: transport %+v of an address endpoint has no device", end.name, tr)
					}
				}
				if withDevice == 0 {
					t.Errorf("%s: no transport with a device in %v", end.name, got)
				}
				if tc.want != nil && !slices.Contains(got, *tc.want) {
					t.Errorf("%s: %v lacks %+v", end.name, got, *tc.want)
				}
			}
		})
	}
}
