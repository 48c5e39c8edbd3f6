package core

import (
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Connections by address exchange (ViaAddress). A listener of this kind is a TCP
// socket of the engine's own, not UCX's: the connecting engine dials it and each side
// sends the other a hello (its worker address, its receive and control tags, whether
// it keeps connections alive), then makes its UCX endpoint from the peer's worker
// address. No UCX connection manager takes part, so a connection costs one round
// trip on the socket and UCX's wire-up of the final endpoint alone: the manager's
// configurations, their protocol selection (most of a first connection) and its five
// lane selections a connection (most of a later one) are skipped (RESULTS.md,
// "Connection set-up").
//
// Two endpoints made from each other's addresses are not a pair to UCX's stream API,
// so the control channel (control.go) of such a connection runs on tagged messages:
// each side receives control words on a control tag of its own (an endpoint id of
// its own, tags.go), which the hello tells the peer. Tagged messages of one endpoint
// reach the peer in the order they were sent, so a goodbye still arrives behind
// everything sent before it.
//
// The socket stays open while the connection lives, and is how each side learns that
// the other went away, as UCX's connection manager tells it otherwise: the peer's
// process ending, or its endpoint closed or aborted, closes the socket, and the
// reader each side keeps on it fails the endpoint with StatusConnectionReset (after a
// goodbye, the peer's graceful close, which teardown reports as such). Anything the
// peer writes on it after its hello breaks the protocol (StatusIOError).
//
// A hello carries two worker addresses: the whole one, and the one of the network
// transports only. A peer on this machine in another network namespace (place.go) is
// reached through the second, as another host would be: UCX's shared memory between
// the two would never wake the receiver.
//
// Peers are untrusted: a hello is bounded (maxHelloAddress), checked (magic, tag
// shapes) and must arrive within the connection's deadline; the worker addresses in
// it are UCX's to parse, as the private data of a connection manager's request is.

// ConnectVia says how a connection through a listener is made.
type ConnectVia uint8

const (
	// ViaDefault: UCXGO_CONNECT ("address" or "manager"), else ViaAddress.
	ViaDefault ConnectVia = iota
	// ViaManager: UCX's connection manager (ucp_listener_create, ucp_ep_create to a
	// socket address) and the tag handshake on UCX's stream API (handshake.go).
	ViaManager
	// ViaAddress: worker addresses exchanged over a socket of the engine's own.
	ViaAddress
)

// connectViaEnv is UCXGO_CONNECT's choice, read once.
var connectViaEnv = parseConnectVia(os.Getenv("UCXGO_CONNECT"))

func parseConnectVia(s string) ConnectVia {
	switch s {
	case "address":
		return ViaAddress
	case "manager":
		return ViaManager
	}
	return ViaAddress
}

// via is how the options connect: Via, or the default.
func (o EndpointOptions) via() ConnectVia {
	if o.Via != ViaDefault {
		return o.Via
	}
	return connectViaEnv
}

// The hello: every field little-endian.
const (
	// helloMagic: "ucxxgo-b" (-a was the hello without a place and a network address,
	// which this one refuses as it is refused by it).
	helloMagic = 0x7563_7878_676f_2d62
	// helloFlagKeepalive: the sender keeps connections alive (keepalive.go).
	helloFlagKeepalive = 1
	// helloChunkShift: bits 8-15 of the flags hold the base-2 logarithm of the chunk
	// after which the sender answers pings (flowcontrol.go), 0 for none. Flags this
	// version does not know are ignored, as older peers ignore these.
	helloChunkShift = 8
	// helloHeaderSize: magic, flags, receive tag, control tag (8 bytes each), the
	// place (boot id, network namespace: 16 bytes each), then the lengths of the worker
	// address and of the network address (4 bytes each); the two addresses follow.
	helloHeaderSize = 72
	// maxHelloAddress bounds each of a peer's worker addresses (UCX's are hundreds of
	// bytes).
	maxHelloAddress = 64 << 10
)

// hello is what one side of a connection tells the other.
type hello struct {
	keepalive bool
	chunkLog2 uint8  // its flow-control chunk's base-2 logarithm; 0: it answers no pings
	recvTag   uint64 // its receive tag: our messages carry it
	ctlTag    uint64 // its control tag: our control words carry it
	place     place  // where it runs
	address   []byte // its worker address
	// networkAddress is its worker address of the network transports only (empty when
	// it has none): what a peer on its machine in another network namespace uses.
	networkAddress []byte
}

// body is the storage the addresses of a hello whose header was decoded are read
// into: address, then networkAddress (decodeHelloHeader sized them).
func (h *hello) body() []byte {
	b := make([]byte, len(h.address)+len(h.networkAddress))
	h.address, h.networkAddress = b[:len(h.address)], b[len(h.address):]
	return b
}

// addressFor is the worker address of the peer that sent h which an endpoint of ours,
// at own, is made from: the network one (network true) for a peer on our machine in
// another network namespace (place.go), when it has one, else the whole one.
func (h *hello) addressFor(own place) (address []byte, network bool) {
	if own.sameMachineOtherNetwork(h.place) && len(h.networkAddress) > 0 {
		return h.networkAddress, true
	}
	return h.address, false
}

// errHello is a hello that breaks the protocol.
var errHello = errors.New("core: malformed hello")

// encode returns the hello's bytes.
func (h *hello) encode() []byte {
	b := make([]byte, helloHeaderSize+len(h.address)+len(h.networkAddress))
	binary.LittleEndian.PutUint64(b[0:], helloMagic)
	var flags uint64
	if h.keepalive {
		flags |= helloFlagKeepalive
	}
	flags |= uint64(h.chunkLog2) << helloChunkShift
	binary.LittleEndian.PutUint64(b[8:], flags)
	binary.LittleEndian.PutUint64(b[16:], h.recvTag)
	binary.LittleEndian.PutUint64(b[24:], h.ctlTag)
	copy(b[32:48], h.place.boot[:])
	copy(b[48:64], h.place.netNS[:])
	binary.LittleEndian.PutUint32(b[64:], uint32(len(h.address)))
	binary.LittleEndian.PutUint32(b[68:], uint32(len(h.networkAddress)))
	n := copy(b[helloHeaderSize:], h.address)
	copy(b[helloHeaderSize+n:], h.networkAddress)
	return b
}

// validEndpointTag reports whether tag has an endpoint tag's shape: an id, no
// application bits, bit 63 clear (tags.go).
func validEndpointTag(tag uint64) bool {
	return tagEndpointID(tag) != 0 && tag&(1<<UserTagBits-1) == 0 && tag>>63 == 0
}

// readHello reads and checks a peer's hello from r.
func readHello(r io.Reader) (*hello, error) {
	var head [helloHeaderSize]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	h, err := decodeHelloHeader(head[:])
	if err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(r, h.body()); err != nil {
		return nil, err
	}
	return h, nil
}

// decodeHelloHeader checks a hello's header and returns the hello with its addresses
// sized but not read (body).
func decodeHelloHeader(head []byte) (*hello, error) {
	flags := binary.LittleEndian.Uint64(head[8:])
	h := &hello{
		keepalive: flags&helloFlagKeepalive != 0,
		chunkLog2: uint8(flags >> helloChunkShift),
		recvTag:   binary.LittleEndian.Uint64(head[16:]),
		ctlTag:    binary.LittleEndian.Uint64(head[24:]),
	}
	copy(h.place.boot[:], head[32:48])
	copy(h.place.netNS[:], head[48:64])
	n, nn := binary.LittleEndian.Uint32(head[64:]), binary.LittleEndian.Uint32(head[68:])
	switch {
	case binary.LittleEndian.Uint64(head[0:]) != helloMagic:
		return nil, fmt.Errorf("%w: not a ucxx-go peer of this version", errHello)
	case !validEndpointTag(h.recvTag) || !validEndpointTag(h.ctlTag) || h.recvTag == h.ctlTag:
		return nil, fmt.Errorf("%w: tags %#x, %#x", errHello, h.recvTag, h.ctlTag)
	case n == 0 || n > maxHelloAddress:
		return nil, fmt.Errorf("%w: worker address of %d bytes", errHello, n)
	case nn > maxHelloAddress:
		return nil, fmt.Errorf("%w: network address of %d bytes", errHello, nn)
	case h.chunkLog2 != 0 && !validChunkLog2(h.chunkLog2):
		return nil, fmt.Errorf("%w: flow-control chunk 2^%d", errHello, h.chunkLog2)
	}
	h.address, h.networkAddress = make([]byte, n), make([]byte, nn) // sizes for body
	return h, nil
}

// sockets are the engine's open connection sockets in Go's poller, a listener's
// hellos being exchanged and connections' alike, so that the engine's stop closes
// every one (their goroutines then end) whatever state its endpoint is in; a
// connecting side's socket joins once its hellos are exchanged (dialing.go closes
// those before). Any goroutine.
type sockets struct {
	mu     sync.Mutex
	open   map[net.Conn]struct{}
	closed bool
}

// add takes c in; false (and c closed) once the engine stops.
func (ss *sockets) add(c net.Conn) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		c.Close()
		return false
	}
	if ss.open == nil {
		ss.open = make(map[net.Conn]struct{})
	}
	ss.open[c] = struct{}{}
	return true
}

// close closes c and forgets it.
func (ss *sockets) close(c net.Conn) {
	ss.mu.Lock()
	delete(ss.open, c)
	ss.mu.Unlock()
	c.Close()
}

// closeAll closes every socket, and every one added later.
func (ss *sockets) closeAll() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.closed = true
	for c := range ss.open {
		c.Close()
	}
	clear(ss.open)
}

// maxGreeting bounds a listener's connections whose hello has not arrived yet (a
// client that connects and never speaks holds a socket and a goroutine until the
// accept deadline): past it, each new connection drops the oldest of them. Waiting
// for room instead let a flood of silent connections, renewed before the deadline,
// keep every honest one in the kernel's backlog; dropping the oldest leaves a flood
// maxGreeting connections newer than an honest hello to drop it, which comes in
// microseconds. A variable for tests.
var maxGreeting = 1024

// greetingQueue is a listener's connections whose hello has not been read, oldest
// first.
type greetingQueue struct {
	mu    sync.Mutex
	conns *list.List // of *greeting
}

// greeting is a connection in a greetingQueue; dropped once push chose it.
type greeting struct {
	conn    net.Conn
	dropped bool
}

// push adds c and returns the oldest connection to drop, if the queue was full.
func (g *greetingQueue) push(c net.Conn) (el *list.Element, drop net.Conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conns.Len() >= maxGreeting {
		oldest := g.conns.Remove(g.conns.Front()).(*greeting)
		oldest.dropped, drop = true, oldest.conn
	}
	return g.conns.PushBack(&greeting{conn: c}), drop
}

// heard takes el's connection out once its hello was read or the read failed, and
// reports whether it is still the greeter's: false once push dropped it (its hello may
// have been read meanwhile; the dropper closes it).
func (g *greetingQueue) heard(el *list.Element) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.conns.Remove(el)
	return !el.Value.(*greeting).dropped
}

// hostPort is a TCP address as "ip:port", the IP unbracketed, as UCX's socket
// addresses are written (EndpointInfo).
func hostPort(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String() + ":" + strconv.Itoa(t.Port)
	}
	return a.String()
}

// postCall queues f for the progress thread without waiting for it; false when the
// engine is closed (f will not run). True does not promise that f runs: a call queued
// as the engine stops may not; what it would have closed, the stop closes
// (sockets.closeAll).
func (e *Engine) postCall(f func()) bool {
	return e.submit(submission{op: opCall, call: f}) == nil
}

// ownHello is this side's hello for ep, whose tags are set. Progress thread.
func (e *Engine) ownHello(ep *endpoint) (*hello, error) {
	if e.address == nil {
		a, err := e.worker.Address()
		if err != nil {
			return nil, err
		}
		// A worker without a network transport (UCX_TLS=sm,self) may have no such
		// address: the hello then carries none, and peers take the whole one.
		na, _ := e.worker.NetworkAddress()
		e.address, e.networkAddress = a, na
	}
	return &hello{keepalive: e.ka.timeout > 0 && ep.errMode == ucxx.ErrHandlingPeer,
		chunkLog2: e.chunkNamed(ep.errMode), recvTag: ep.recvTag, ctlTag: ep.ctlTag,
		place: ownPlace(), address: e.address, networkAddress: e.networkAddress}, nil
}

// checkIP refuses what is not a numeric IP address ("" too, unless empty is), as
// UCX's socket addresses do (ucxx.newSockaddr).
func checkIP(op, ip string, empty bool) error {
	if (ip == "" && empty) || net.ParseIP(ip) != nil {
		return nil
	}
	return fmt.Errorf("%w: %q is not a numeric IP address", &ucxx.Error{Op: op, Status: ucxx.StatusInvalidParam}, ip)
}

// listenAddress starts a listener of ViaAddress on ip:port. Progress thread.
func (e *Engine) listenAddress(handle uint64, ip string, port int, opts EndpointOptions) (int, error) {
	if err := checkIP("listen", ip, true); err != nil {
		return 0, err
	}
	if port < 0 || port > 65535 {
		return 0, &ucxx.Error{Op: "listen", Status: ucxx.StatusInvalidParam}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		st := ucxx.StatusInvalidAddr
		if errors.Is(err, syscall.EADDRINUSE) {
			st = ucxx.StatusBusy // as ucp_listener_create reports it
		}
		return 0, fmt.Errorf("%w (%v)", &ucxx.Error{Op: "listen", Status: st}, err)
	}
	e.listeners[handle] = &listener{handle: handle, ln: ln, opts: opts}
	go e.acceptLoop(handle, ln)
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// acceptLoop greets each connection to ln until ln is closed. Other failures to accept
// (out of file descriptors, say) are waited out, as net/http's server does.
func (e *Engine) acceptLoop(handle uint64, ln net.Listener) {
	greeting := greetingQueue{conns: list.New()}
	var backoff time.Duration
	for {
		conn, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if !e.conns.add(conn) {
			return // the engine stops
		}
		el, drop := greeting.push(conn)
		if drop != nil {
			e.conns.close(drop) // its greet's read fails, and it lets go
		}
		go e.greet(handle, conn, func() bool { return greeting.heard(el) })
	}
}

// greet answers one connection to a listener: the peer's hello first, then the
// endpoint, made and announced on the progress thread, which sends ours. heard runs
// once the hello is read, or the read failed; false: the connection was dropped
// (closed by the dropper) and is left alone.
func (e *Engine) greet(listenerHandle uint64, conn net.Conn, heard func() bool) {
	deadline := time.Now().Add(defaultAcceptTimeout)
	_ = conn.SetDeadline(deadline)
	peer, err := readHello(conn)
	if !heard() {
		return
	}
	if err != nil {
		e.conns.close(conn)
		return
	}
	var handle uint64
	if e.onThread(func() { handle = e.acceptAddress(listenerHandle, conn, peer) }) != nil || handle == 0 {
		e.conns.close(conn)
		return
	}
	_ = conn.SetDeadline(time.Time{})
	e.watch(handle, conn)
}

// helloWriteTimeout bounds the progress thread's write of a listener's hello: the
// first bytes on a fresh socket, which its send buffer takes at once.
const helloWriteTimeout = 100 * time.Millisecond

// acceptAddress makes the endpoint of an accepted connection whose peer said hello,
// and returns its handle, or 0 when the connection is dropped (the listener or the
// engine closing, our hello not sent, the endpoint not made). Our hello goes out
// before UCX makes our endpoint, so that the peer makes its own meanwhile (each
// ucp_ep_create from an address takes 0.3-0.5 ms on the dev VM): a listener that
// cannot make its endpoint closes the socket, which the peer sees as its endpoint
// failing (StatusConnectionReset), or its own connect failing where it could not make
// its endpoint either. Without error handling (whose endpoints hear of no failure)
// the hello waits for our endpoint. Progress thread.
func (e *Engine) acceptAddress(listenerHandle uint64, conn net.Conn, peer *hello) uint64 {
	l := e.listeners[listenerHandle]
	if e.stopping || l == nil {
		return 0
	}
	ep := e.newAddressEndpoint(defaultAcceptTimeout, l.opts)
	ep.listener = listenerHandle
	own, err := e.ownHello(ep)
	// Without error handling the peer would never learn that ours could not be made:
	// it hears from us only once it is.
	if err == nil && ep.errMode == ucxx.ErrHandlingNone {
		err = e.joinPeer(ep, conn, endsOf(conn), peer)
	}
	if err == nil {
		_ = conn.SetWriteDeadline(time.Now().Add(helloWriteTimeout))
		_, err = conn.Write(own.encode())
	}
	if err == nil && ep.u == nil {
		err = e.joinPeer(ep, conn, endsOf(conn), peer)
	}
	if err != nil {
		if ep.u == nil {
			e.discard(ep)
			return 0
		}
		// Our hello not sent after joinPeer made the UCX endpoint (without error
		// handling): UCX closes it, and its control memory goes once it has. The
		// caller closes the socket.
		ep.conn = nil
		e.teardown(ep, ucxx.StatusConnectionReset, true)
		return 0
	}
	e.handshakeDone(ep)
	return ep.handle
}

// newAddressEndpoint is a new endpoint of ViaAddress, its tags chosen. Progress thread.
func (e *Engine) newAddressEndpoint(timeout time.Duration, opts EndpointOptions) *endpoint {
	ep := e.newEndpoint(timeout)
	ep.byAddress, ep.errMode = true, opts.errHandling()
	ep.ctlTag = e.eps.newRecvTag()
	e.eps.addControlTag(ep)
	return ep
}

// socketEnds are a connection socket's two addresses, as EndpointInfo reports them
// (hostPort).
type socketEnds struct{ local, remote string }

// endsOf are conn's addresses as Go has them: an accepted socket's.
func endsOf(conn net.Conn) socketEnds {
	return socketEnds{local: hostPort(conn.LocalAddr()), remote: hostPort(conn.RemoteAddr())}
}

// joinPeer makes ep's UCX endpoint from the peer's hello (hello.addressFor; from its
// whole address when its network one reaches it by no transport of ours); the
// handshake is then done. Progress thread.
func (e *Engine) joinPeer(ep *endpoint, conn net.Conn, ends socketEnds, peer *hello) error {
	addr, network := peer.addressFor(ownPlace())
	u, err := e.worker.ConnectAddressWith(addr, ep.handle, ep.errMode)
	if err != nil && network {
		u, err = e.worker.ConnectAddressWith(peer.address, ep.handle, ep.errMode)
	}
	if err != nil {
		return err
	}
	ep.u, ep.conn = u, conn
	ep.sendTag, ep.peerCtlTag, ep.peerKeepalive = peer.recvTag, peer.ctlTag, peer.keepalive
	ep.peerChunkLog2 = peer.chunkLog2
	ep.local, ep.remote = ends.local, ends.remote
	ep.hs = ucxx.CAlloc(controlMemorySize)
	return nil
}

// connectAddress starts a connection of ViaAddress: the endpoint waits in its
// handshake phase while the progress thread connects and exchanges hellos
// (dialing.go). Progress thread.
func (e *Engine) connectAddress(s *submission, timeout time.Duration) {
	if err := checkIP("connect", s.text, false); err != nil {
		e.completeNow(s.id, ucxx.StatusInvalidParam, 0)
		return
	}
	ep := e.newAddressEndpoint(timeout, s.epOpts)
	ep.connectID = s.id
	st := ucxx.StatusOK
	if own, err := e.ownHello(ep); err != nil {
		st = ucxx.StatusOf(err)
	} else if err = e.startDialing(ep, net.ParseIP(s.text), s.port, own.encode()); err != nil {
		st = ucxx.StatusUnreachable // as UCX reports a connect that fails
	}
	if st != ucxx.StatusOK {
		e.discard(ep)
		e.completeNow(s.id, st, 0)
		return
	}
	e.eps.schedule(ep, ep.deadline)
}

// watch reads the connection's socket until it ends, and fails the endpoint then.
func (e *Engine) watch(handle uint64, conn net.Conn) {
	var b [1]byte
	st := ucxx.StatusConnectionReset
	if _, err := conn.Read(b[:]); err == nil {
		st = ucxx.StatusIOError // a peer breaking the protocol
	}
	e.postCall(func() { e.peerGone(handle, conn, st) })
}

// peerGone fails an endpoint whose socket ended, unless it has no error handling
// (whose failures nothing reports); a close waiting on the peer (its sends, its
// answer to our goodbye) waits no more. Progress thread.
func (e *Engine) peerGone(handle uint64, conn net.Conn, st ucxx.Status) {
	ep := e.eps.get(handle)
	if ep == nil || ep.conn != conn || ep.errMode == ucxx.ErrHandlingNone {
		return
	}
	switch {
	case ep.phase == phaseReady:
		e.onEndpointError(handle, st)
	case ep.phase == phaseClosing && (ep.flushing || ep.awaitingGoodbyeAck):
		e.closeUCX(ep, true)
	}
}

// cancelControlRecv cancels the control receive of a connection of ViaAddress whose
// UCX endpoint closes: a tag receive is the worker's, which no endpoint's close ends.
func (e *Engine) cancelControlRecv(ep *endpoint) {
	for _, r := range e.requests.byID {
		if r.ep == ep && r.internal == stepControlRecv && !r.canceled {
			r.canceled = true
			e.worker.Cancel(r.ucp)
		}
	}
}
