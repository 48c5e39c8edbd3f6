package ucxx

import (
	"slices"
	"testing"
)

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
			p, err := newModePair(t, tc.options, ErrHandlingPeer, tc.byAddress)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			p.send(64)
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

// TestNetworkAddress: an endpoint made from a worker's network address goes by its
// network transports only (TCP on loopback here), where one made from its whole
// address takes shared memory between two workers of one process.
func TestNetworkAddress(t *testing.T) {
	p, err := newModePair(t, map[string]string{"MM_ERROR_HANDLING": "y"}, ErrHandlingPeer, true)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	p.send(64)
	whole, err := p.cep.Transports()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(whole, func(tr Transport) bool { return tr.Name != "tcp" }) {
		t.Fatalf("the whole address's endpoint goes by %v: no shared memory to leave out", whole)
	}
	network, err := p.server.NetworkAddress()
	if err != nil {
		t.Fatal(err)
	}
	ep, err := p.client.ConnectAddressWith(network, 101, ErrHandlingPeer)
	if err != nil {
		t.Fatalf("connect to the network address: %v", err)
	}
	p.cep, p.sep = ep, p.cep // p.close closes both
	p.send(64)
	got, err := ep.Transports()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || slices.ContainsFunc(got, func(tr Transport) bool { return tr.Name != "tcp" }) {
		t.Fatalf("the network address's endpoint goes by %v; want tcp alone (the whole one: %v)", got, whole)
	}
}
