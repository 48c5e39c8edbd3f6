package core

import (
	"bytes"
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Connections of ViaAddress (direct.go). The rest of the suite runs them too with
// UCXGO_CONNECT=address (the README's test command runs core both ways).

var byAddress = EndpointOptions{Via: ViaAddress}

// addressPair connects client to a listener of ViaAddress on server.
func addressPair(t *testing.T, client, server *Engine) (cep, sep uint64, cc, sc *collector, port int) {
	t.Helper()
	lh, port, err := server.ListenWith("127.0.0.1", 0, byAddress)
	if err != nil {
		t.Fatalf("ListenWith: %v", err)
	}
	cc, sc = newCollector(t, client), newCollector(t, server)
	id, err := client.ConnectWith("127.0.0.1", port, 5*time.Second, byAddress)
	if err != nil {
		t.Fatal(err)
	}
	if c := cc.wait(id, 10*time.Second); c.Status != 0 {
		t.Fatalf("connect: %+v", c)
	} else {
		cep = c.Length
	}
	acc := sc.wait(EventListenerAccept|lh, 10*time.Second)
	return cep, acc.Length, cc, sc, port
}

func TestHelloRoundTrip(t *testing.T) {
	at := place{boot: [16]byte{1, 2}, netNS: [16]byte{3, 4}}
	for _, net := range [][]byte{[]byte("network address"), {}} {
		h := &hello{keepalive: true, chunkLog2: 22, recvTag: 5 << UserTagBits, ctlTag: 9 << UserTagBits, place: at,
			address: []byte("worker address"), networkAddress: net}
		got, err := readHello(bytes.NewReader(h.encode()))
		if err != nil {
			t.Fatal(err)
		}
		if !got.keepalive || got.chunkLog2 != 22 || got.recvTag != h.recvTag || got.ctlTag != h.ctlTag || got.place != at ||
			!bytes.Equal(got.address, h.address) || !bytes.Equal(got.networkAddress, net) {
			t.Fatalf("read %+v; want %+v", got, h)
		}
	}
}

// TestHelloAddressFor: a peer on this machine in another network namespace is reached
// through its network address (when it has one); any other peer through its whole one.
func TestHelloAddressFor(t *testing.T) {
	own := place{boot: [16]byte{1}, netNS: [16]byte{7}}
	h := &hello{address: []byte("all")}
	for _, c := range []struct {
		name string
		peer place
		net  []byte
		want string
	}{
		{"same namespace", own, []byte("net"), "all"},
		{"other namespace", place{boot: own.boot, netNS: [16]byte{8}}, []byte("net"), "net"},
		{"other namespace, no network transport", place{boot: own.boot, netNS: [16]byte{8}}, nil, "all"},
		{"other machine", place{boot: [16]byte{2}, netNS: [16]byte{8}}, []byte("net"), "all"},
		{"peer's place unknown", place{}, []byte("net"), "all"},
		{"peer's namespace unknown", place{boot: own.boot}, []byte("net"), "all"},
	} {
		h.place, h.networkAddress = c.peer, c.net
		if got, network := h.addressFor(own); string(got) != c.want || network != (c.want == "net") {
			t.Errorf("%s: %q, network %v; want %q", c.name, got, network, c.want)
		}
	}
	h.place, h.networkAddress = place{boot: own.boot, netNS: [16]byte{8}}, []byte("net")
	if got, _ := h.addressFor(place{}); string(got) != "all" {
		t.Errorf("own place unknown: %q; want all", got)
	}
}

// TestOwnPlace: this process's place is known on Linux; files that are not there, or
// a boot id that is not a UUID, leave their part unknown.
func TestOwnPlace(t *testing.T) {
	if p := ownPlace(); !p.known() {
		t.Fatalf("ownPlace() = %+v: unknown", p)
	}
	if p := readPlace("/nonexistent/boot_id", "/nonexistent/net"); p != (place{}) {
		t.Fatalf("readPlace of missing files = %+v; want zero", p)
	}
	f := t.TempDir() + "/boot_id"
	if err := os.WriteFile(f, []byte("not a uuid\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if p := readPlace(f, "/proc/self/ns/net"); p.boot != ([16]byte{}) || p.netNS == ([16]byte{}) {
		t.Fatalf("readPlace of a malformed boot id = %+v; want the boot id alone unknown", p)
	}
}

// malformedHellos are hellos a hostile or confused peer may send, each with the
// status the connecting side reports for it.
func malformedHellos() map[string][]byte {
	good := (&hello{recvTag: 5 << UserTagBits, ctlTag: 9 << UserTagBits, address: []byte("a"), networkAddress: []byte("n")}).encode()
	with := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	// The hello of ucxx-go before places ("ucxxgo-a": 36 bytes, then its address),
	// padded to a header's length.
	oldVersion := with(func(b []byte) []byte {
		b[0] = 'a'
		binary.LittleEndian.PutUint32(b[32:], 1)
		clear(b[36:])
		return b
	})
	return map[string][]byte{
		"magic":       with(func(b []byte) []byte { b[0] ^= 1; return b }),
		"old-version": oldVersion,
		"tag-user":    with(func(b []byte) []byte { b[16] = 1; return b }),
		"tag-zero":    with(func(b []byte) []byte { clear(b[16:24]); return b }),
		"tag-bit63":   with(func(b []byte) []byte { b[31] |= 0x80; return b }),
		"tags-equal":  with(func(b []byte) []byte { copy(b[24:32], b[16:24]); return b }),
		"no-address":  with(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[64:], 0); return b }),
		"huge":        with(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[64:], maxHelloAddress+1); return b }),
		"huge-net":    with(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[68:], maxHelloAddress+1); return b }),
		"chunk-small": with(func(b []byte) []byte { b[9] = 11; return b }), // flow-control chunk 2^11
		"chunk-huge":  with(func(b []byte) []byte { b[9] = 63; return b }),
		"short":       good[:helloHeaderSize-1],
		"short-addr":  with(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[64:], 100); return b }),
		"short-net":   with(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[68:], 100); return b }),
		"http":        []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + string(make([]byte, 96))),
	}
}

func TestReadHelloRefusesMalformed(t *testing.T) {
	for name, b := range malformedHellos() {
		if _, err := readHello(bytes.NewReader(b)); err == nil {
			t.Errorf("%s: read without error", name)
		} else if name != "short" && name != "short-addr" && name != "short-net" && !errors.Is(err, errHello) {
			t.Errorf("%s: %v; want errHello", name, err)
		}
	}
}

// fakeListener accepts TCP connections and, after reading a hello's header, answers
// each with answer (nil: silence); with hangUp it then closes the connection, else
// keeps it open until the test ends.
func fakeListener(t *testing.T, answer []byte, hangUp bool) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			var head [helloHeaderSize]byte
			if _, err := io.ReadFull(c, head[:]); err == nil && answer != nil {
				c.Write(answer)
			}
			if hangUp {
				c.Close()
				continue
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestAddressConnectFailures: every way a connection of ViaAddress can fail ends in
// a typed status, and leaves nothing behind.
func TestAddressConnectFailures(t *testing.T) {
	client := newTestEngine(t, Options{})
	cc := newCollector(t, client)
	cases := []struct {
		name    string
		port    int
		timeout time.Duration
		want    ucxx.Status
	}{
		{"silent", fakeListener(t, nil, false), 300 * time.Millisecond, ucxx.StatusTimedOut},
	}
	for name, b := range malformedHellos() {
		want, hangUp := ucxx.StatusIOError, false
		if name == "short" || name == "short-addr" || name == "short-net" {
			want, hangUp = ucxx.StatusConnectionReset, true // the peer closed mid-hello
		}
		port := fakeListener(t, b, hangUp)
		cases = append(cases, struct {
			name    string
			port    int
			timeout time.Duration
			want    ucxx.Status
		}{"hello-" + name, port, 5 * time.Second, want})
	}
	// A port nobody listens on, taken after the fake listeners: a port freed before
	// them could be handed to one of them (one that hangs up made "refused" a reset).
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	cases = append(cases, struct {
		name    string
		port    int
		timeout time.Duration
		want    ucxx.Status
	}{"refused", closedPort, 5 * time.Second, ucxx.StatusUnreachable})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, err := client.ConnectWith("127.0.0.1", tc.port, tc.timeout, byAddress)
			if err != nil {
				t.Fatal(err)
			}
			if c := cc.wait(id, tc.timeout+5*time.Second); ucxx.Status(c.Status) != tc.want {
				t.Fatalf("connect: %v; want %v", ucxx.Status(c.Status), tc.want)
			}
			waitIdle(t, client)
		})
	}
	id, _ := client.ConnectWith("not-an-ip", 1, time.Second, byAddress)
	if c := cc.wait(id, 5*time.Second); ucxx.Status(c.Status) != ucxx.StatusInvalidParam {
		t.Fatalf("connect to not-an-ip: %v", ucxx.Status(c.Status))
	}
}

// TestAddressListenerHostileClients: clients that send garbage, too much, or stop
// half-way get nothing, and the listener goes on serving a real client meanwhile.
func TestAddressListenerHostileClients(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	lh, port, err := server.ListenWith("127.0.0.1", 0, byAddress)
	if err != nil {
		t.Fatal(err)
	}
	sc := newCollector(t, server)
	var conns []net.Conn
	for name, b := range malformedHellos() {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := c.Write(b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "short" || name == "short-addr" || name == "short-net" {
			continue // the listener waits for the rest (until its deadline)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatalf("%s: the listener answered %d bytes", name, n)
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("%s: the listener kept the connection open", name)
		}
	}
	cc := newCollector(t, client)
	id, err := client.ConnectWith("127.0.0.1", port, 5*time.Second, byAddress)
	if err != nil {
		t.Fatal(err)
	}
	cep := cc.wait(id, 10*time.Second)
	if cep.Status != 0 {
		t.Fatalf("connect beside hostile clients: %+v", cep)
	}
	sep := sc.wait(EventListenerAccept|lh, 10*time.Second)
	exchange(t, client, cep.Length, cc, server, sep.Length, sc, []byte("served"))
	noCompletion(t, sc, EventListenerAccept|lh) // no other connection was accepted
	for _, c := range conns {
		c.Close()
	}
	if st, _ := server.Stats(); st.Endpoints != 1 {
		t.Fatalf("server endpoints %d; want 1", st.Endpoints)
	}
}

// TestAddressPeerGone: a peer that aborts its endpoint, or whose engine shuts down,
// closes the connection's socket; the other side's endpoint fails at once with
// StatusConnectionReset, as UCX's connection manager would report it.
func TestAddressPeerGone(t *testing.T) {
	for _, how := range []string{"abort", "shutdown"} {
		t.Run(how, func(t *testing.T) {
			client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
			cep, sep, _, sc, _ := addressPair(t, client, server)
			start := time.Now()
			if how == "abort" {
				if err := client.AbortEndpoint(cep); err != nil {
					t.Fatal(err)
				}
			} else if err := client.Shutdown(5 * time.Second); err != nil {
				t.Fatal(err)
			}
			ev := sc.wait(EventEndpointError|sep, 5*time.Second)
			if ucxx.Status(ev.Status) != ucxx.StatusConnectionReset {
				t.Fatalf("server's endpoint failed with %v; want StatusConnectionReset", ucxx.Status(ev.Status))
			}
			t.Logf("noticed after %v", time.Since(start).Round(time.Microsecond))
			id, _ := server.CloseEndpoint(sep, time.Second)
			sc.wait(id, 5*time.Second)
			waitIdle(t, server)
		})
	}
}

// TestAddressGracefulCloseDeliversTail: a rendezvous message sent right before a
// graceful close arrives whole: the goodbye goes on the control tag behind it.
func TestAddressGracefulCloseDeliversTail(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, sep, cc, sc, _ := addressPair(t, client, server)
	msg := bytes.Repeat([]byte("tail"), 1<<20)
	sid, err := client.TagSend(cep, addr(msg), uint64(len(msg)), endpointInfo(t, client, cep).SendTag, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	closeID, err := client.CloseEndpoint(cep, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	rid, err := server.TagRecv(sep, addr(buf), uint64(len(buf)), endpointInfo(t, server, sep).RecvTag, ^uint64(0), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c := sc.wait(rid, 10*time.Second); c.Status != 0 || !bytes.Equal(buf, msg) {
		t.Fatalf("receive: %+v", c)
	}
	if c := cc.wait(sid, 10*time.Second); c.Status != 0 {
		t.Fatalf("send: %+v", c)
	}
	if c := cc.wait(closeID, 10*time.Second); c.Status != 0 {
		t.Fatalf("close: %+v", c)
	}
	// The peer's close reaches the server as UCX's connection manager reports one.
	if ev := sc.wait(EventEndpointError|sep, 10*time.Second); ucxx.Status(ev.Status) != ucxx.StatusConnectionReset {
		t.Fatalf("server's endpoint: %v; want StatusConnectionReset", ucxx.Status(ev.Status))
	}
	waitIdle(t, client)
}

// TestAddressControlMessageOfWrongSize: a peer that sends its control tag a message
// other than one control word breaks the protocol: the endpoint fails with
// StatusIOError, and the engine goes on.
func TestAddressControlMessageOfWrongSize(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, sep, cc, sc, _ := addressPair(t, client, server)
	var ctl uint64
	if err := client.onThread(func() { ctl = client.eps.get(cep).peerCtlTag }); err != nil {
		t.Fatal(err)
	}
	bad := make([]byte, 2*controlSize)
	sid, err := client.TagSend(cep, addr(bad), uint64(len(bad)), ctl, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	cc.wait(sid, 5*time.Second)
	if ev := sc.wait(EventEndpointError|sep, 5*time.Second); ucxx.Status(ev.Status) != ucxx.StatusIOError {
		t.Fatalf("server's endpoint: %v; want StatusIOError", ucxx.Status(ev.Status))
	}
}

// TestAddressEndpointInfo: a connection's two ends, as the socket has them.
func TestAddressEndpointInfo(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, sep, _, _, port := addressPair(t, client, server)
	ci, si := endpointInfo(t, client, cep), endpointInfo(t, server, sep)
	if ci.Remote != "127.0.0.1:"+strconv.Itoa(port) || si.Local != ci.Remote || si.Remote != ci.Local {
		t.Fatalf("client %s -> %s, server %s <- %s", ci.Local, ci.Remote, si.Local, si.Remote)
	}
	if ci.SendTag != si.RecvTag || si.SendTag != ci.RecvTag || ci.UCPHandle == 0 {
		t.Fatalf("tags: client %+v, server %+v", ci, si)
	}
}

// TestAddressListenerUnmakeableEndpoint: a client whose hello carries an address UCX
// cannot use gets our hello (sent before our endpoint is made), then the socket's end;
// the listener keeps no endpoint, and its tags, retired, hold nothing for it.
func TestAddressListenerUnmakeableEndpoint(t *testing.T) {
	server := newTestEngine(t, Options{})
	_, port, err := server.ListenWith("127.0.0.1", 0, byAddress)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bad := &hello{recvTag: 5 << UserTagBits, ctlTag: 9 << UserTagBits, address: []byte("0123456789abcdef0123456789abcdef")}
	if _, err := c.Write(bad.encode()); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	ours, err := readHello(c)
	if err != nil {
		t.Fatalf("the listener's hello: %v", err)
	}
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes after the hello; want the socket's end", n)
	}
	waitIdle(t, server)
	var holds []bool
	server.onThread(func() {
		for _, tag := range []uint64{ours.recvTag, ours.ctlTag} {
			if ep := server.eps.owner(tag); ep != nil {
				holds = append(holds, server.mayHold(ep))
			}
		}
	})
	for i, h := range holds {
		if h {
			t.Fatalf("tag %d of the discarded endpoint still holds messages", i)
		}
	}
}

// TestAddressConnectMadeLater: a connection not yet made when connect returns (its
// SYN dropped by a listener whose accept queue is full, and answered on the retry a
// second later, as a connection between hosts is made a round trip later) gets our
// hello once it is made, and then works. A relay between it and a real listener
// stands in for the slow host.
func TestAddressConnectMadeLater(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	lh, port, err := server.ListenWith("127.0.0.1", 0, byAddress)
	if err != nil {
		t.Fatal(err)
	}
	cc, sc := newCollector(t, client), newCollector(t, server)
	// A listener whose accept queue holds two connections (backlog 1), filled; its
	// accepts give up after 15 s rather than hang the test.
	lfd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(lfd) })
	if err := syscall.Bind(lfd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(lfd, 1); err != nil {
		t.Fatal(err)
	}
	if err := syscall.SetsockoptTimeval(lfd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &syscall.Timeval{Sec: 15}); err != nil {
		t.Fatal(err)
	}
	sa, _ := syscall.Getsockname(lfd)
	slowPort := sa.(*syscall.SockaddrInet4).Port
	for range 2 {
		filler, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(slowPort), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer filler.Close()
	}
	id, err := client.ConnectWith("127.0.0.1", slowPort, 20*time.Second, byAddress)
	if err != nil {
		t.Fatal(err)
	}
	waitSynSent(t, slowPort)
	if st, _ := connectionsBeingMade(t, client); st != 1 {
		t.Fatalf("%d connections being made; want 1", st)
	}
	// Make room (the fillers out), then take the client's connection on its SYN's
	// retry and relay it to the real listener.
	for _, relay := range []bool{false, false, true} {
		fd, _, err := syscall.Accept4(lfd, syscall.SOCK_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		if !relay {
			syscall.Close(fd)
			continue
		}
		f := os.NewFile(uintptr(fd), "")
		in, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		out, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { in.Close(); out.Close() })
		go func() { io.Copy(out, in); out.Close() }()
		go func() { io.Copy(in, out); in.Close() }()
	}
	if c := cc.wait(id, 15*time.Second); c.Status != 0 {
		t.Fatalf("connect: %v", ucxx.Status(c.Status))
	} else {
		sep := sc.wait(EventListenerAccept|lh, 10*time.Second)
		exchange(t, client, c.Length, cc, server, sep.Length, sc, []byte("made later"))
	}
	if n, _ := connectionsBeingMade(t, client); n != 0 {
		t.Fatalf("%d connections being made after the connect; want 0", n)
	}
}

// waitSynSent waits until a socket of this host is connecting to 127.0.0.1:port with
// its SYN unanswered (/proc/net/tcp's state 02).
func waitSynSent(t *testing.T, port int) {
	t.Helper()
	want := fmt.Sprintf("0100007F:%04X", port)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile("/proc/net/tcp")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 3 && f[2] == want && f[3] == "02" {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no connection to port %d waits for its SYN's answer", port)
}

// connectionsBeingMade is how many connections of e are being made (dialing.go).
func connectionsBeingMade(t *testing.T, e *Engine) (int, error) {
	t.Helper()
	var n int
	err := e.onThread(func() { n = len(e.dialing.conns) })
	if err != nil {
		t.Fatal(err)
	}
	return n, err
}

// TestSelfConnectedSocket: a socket connected to itself (bound to the port it then
// connects to: TCP's simultaneous open) is told from one connected to a listener.
func TestSelfConnectedSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // the port is free now: a socket bound to it can connect to itself
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	self := &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}
	if err := syscall.Bind(fd, self); err != nil {
		t.Skipf("bind to the listener's old port: %v", err)
	}
	if err := syscall.Connect(fd, self); err != nil {
		t.Fatalf("connect to itself: %v", err)
	}
	if !selfConnected(fd) {
		t.Fatal("a socket connected to itself was not told")
	}
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, _ := c.(*net.TCPConn).SyscallConn()
	var got bool
	raw.Control(func(fd uintptr) { got = selfConnected(int(fd)) })
	if got {
		t.Fatal("a socket connected to a listener was taken for one connected to itself")
	}
}

// TestHelloFromAnotherNetworkNamespace: a listener whose client says it runs on this
// machine in another network namespace makes its endpoint from the client's network
// address (TCP alone), and from its whole one when the network one is of no use.
func TestHelloFromAnotherNetworkNamespace(t *testing.T) {
	server, peer := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	lh, port, err := server.ListenWith("127.0.0.1", 0, byAddress)
	if err != nil {
		t.Fatal(err)
	}
	sc := newCollector(t, server)
	var whole, network []byte // of the worker the hellos name
	peer.onThread(func() { whole, _ = peer.worker.Address(); network, _ = peer.worker.NetworkAddress() })
	if len(whole) == 0 || len(network) == 0 {
		t.Fatalf("peer's addresses: %d and %d bytes", len(whole), len(network))
	}
	other := ownPlace()
	other.netNS[0] ^= 1
	notTCP := func(tr ucxx.Transport) bool { return tr.Name != "tcp" }
	for i, c := range []struct {
		name     string
		network  []byte
		tcpAlone bool
	}{
		{"network address", network, true},
		{"unusable network address", []byte("0123456789abcdef0123456789abcdef"), false},
	} {
		conn, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		h := &hello{recvTag: uint64(5+2*i) << UserTagBits, ctlTag: uint64(6+2*i) << UserTagBits, place: other,
			address: whole, networkAddress: c.network}
		if _, err := conn.Write(h.encode()); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := readHello(conn); err != nil {
			t.Fatalf("%s: the listener's hello: %v", c.name, err)
		}
		acc := sc.wait(EventListenerAccept|lh, 10*time.Second)
		if acc.Status != 0 {
			t.Fatalf("%s: accept: %v", c.name, ucxx.Status(acc.Status))
		}
		got, err := server.EndpointTransports(acc.Length)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(got) == 0 || c.tcpAlone == slices.ContainsFunc(got, notTCP) {
			t.Errorf("%s: the endpoint goes by %v; want TCP alone %v", c.name, got, c.tcpAlone)
		}
	}
}

// FuzzReadHello: whatever a peer sends in place of a hello, readHello fails with
// errHello (or a short read) or returns a hello whose encoding is the bytes it read, its
// addresses within their bounds.
func FuzzReadHello(f *testing.F) {
	f.Add((&hello{recvTag: 5 << UserTagBits, ctlTag: 9 << UserTagBits, place: ownPlace(),
		address: []byte("worker address"), networkAddress: []byte("net")}).encode())
	for _, b := range malformedHellos() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		h, err := readHello(r)
		if err != nil {
			if !errors.Is(err, errHello) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("readHello: %v", err)
			}
			return
		}
		if len(h.address) == 0 || len(h.address) > maxHelloAddress || len(h.networkAddress) > maxHelloAddress {
			t.Fatalf("addresses of %d and %d bytes accepted", len(h.address), len(h.networkAddress))
		}
		read := data[:len(data)-r.Len()]
		enc := h.encode()
		// Flags other than keepalive are not kept: compare the rest.
		binary.LittleEndian.PutUint64(enc[8:], binary.LittleEndian.Uint64(read[8:]))
		if !bytes.Equal(enc, read) {
			t.Fatalf("re-encoded hello differs:\n got %x\nwant %x", enc, read)
		}
	})
}

// TestGreetingQueueDrop: the connection a push drops is no longer its greeter's, even
// if its hello was read meanwhile (the greeter then leaves it to the dropper, which
// closes it); the others are.
func TestGreetingQueueDrop(t *testing.T) {
	n := maxGreeting
	t.Cleanup(func() { maxGreeting = n })
	maxGreeting = 2
	g := greetingQueue{conns: list.New()}
	var els []*list.Element
	var conns []net.Conn
	for range 3 {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		el, drop := g.push(a)
		els, conns = append(els, el), append(conns, a)
		if len(els) < 3 && drop != nil || len(els) == 3 && drop != conns[0] {
			t.Fatalf("push %d dropped %v", len(els), drop)
		}
	}
	if g.heard(els[0]) {
		t.Fatal("the dropped connection is still its greeter's")
	}
	if !g.heard(els[1]) || !g.heard(els[2]) || g.conns.Len() != 0 {
		t.Fatal("a connection not dropped is not its greeter's")
	}
}

// TestAddressListenerSilentFlood: more connections than maxGreeting that never say
// hello, renewed as the listener drops them, do not keep an honest client out: each
// new connection drops the oldest silent one, and the honest hello is read at once.
// (Before, the listener stopped accepting at maxGreeting until one timed out, 10 s.)
func TestAddressListenerSilentFlood(t *testing.T) {
	n := maxGreeting
	t.Cleanup(func() { maxGreeting = n }) // last: after the engines' cleanups stop their listeners
	maxGreeting = 8
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	lh, port, err := server.ListenWith("127.0.0.1", 0, byAddress)
	if err != nil {
		t.Fatal(err)
	}
	sc := newCollector(t, server)
	var silent []net.Conn
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	for range 3 * maxGreeting {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	cc := newCollector(t, client)
	id, err := client.ConnectWith("127.0.0.1", port, 3*time.Second, byAddress)
	if err != nil {
		t.Fatal(err)
	}
	if c := cc.wait(id, 5*time.Second); c.Status != 0 {
		t.Fatalf("connect beside %d silent connections: %v", len(silent), ucxx.Status(c.Status))
	}
	sc.wait(EventListenerAccept|lh, 5*time.Second)
	// The oldest silent connections were dropped: their reads end.
	silent[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := silent[0].Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the oldest silent connection: %v; want it closed by the listener", err)
	}
}
