package core

import (
	"errors"
	"net"
	"os"
	"syscall"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// The connecting side of a connection of ViaAddress (direct.go), on the progress
// thread: it starts the connect, writes our hello and reads the peer's from a
// non-blocking socket of its own, woken by an epoll set of those sockets (in the
// engine's own epoll set, so a sleeping progress thread, or loop mode's owner, wakes
// when one is ready; every pass polls it while connections are being made). Only
// once the hellos are exchanged does the socket go to Go's poller, for the goroutine
// that watches it (direct.go's watch).
//
// Why not net.Dial and a read on a goroutine: each would wake another thread and then
// the progress thread (the connect done, the peer's hello read), hand-offs that took
// 0.3-0.6 ms of a 1.1-1.3 ms connection on the dev VM.

// dialing is the engine's connections being made. Progress thread.
type dialing struct {
	epfd  int // their sockets' epoll set, -1 until the first connection
	conns map[int]*dialingConn
	evs   [16]syscall.EpollEvent
}

// dialingConn is one connection being made.
type dialingConn struct {
	fd     int
	ep     *endpoint
	remote string // the listener's address, as EndpointInfo reports it
	rest   []byte // what of our hello is still to be written; nil once written
	made   bool   // the connection is made (its failure is no longer the connect's)
	head   [helloHeaderSize]byte
	got    int    // bytes of the peer's hello read, header included
	peer   *hello // the peer's hello, once its header is read
	body   []byte // what its addresses are read into (hello.body)
}

// startDialing starts ep's connection to ip:port: the connect begins, and our hello
// goes out if the connection is made at once (on one host it usually is by the time
// connect returns: the kernel answers a loopback SYN before the call returns).
// Errors: the connect's own (ECONNREFUSED, ENETUNREACH, ...) or the socket's making.
func (e *Engine) startDialing(ep *endpoint, ip net.IP, port int, own []byte) error {
	d := &e.dialing
	if d.epfd < 0 {
		fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			return os.NewSyscallError("epoll_create1", err)
		}
		if e.epfd >= 0 {
			ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}
			if err := syscall.EpollCtl(e.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
				syscall.Close(fd)
				return os.NewSyscallError("epoll_ctl", err)
			}
		}
		d.epfd, d.conns = fd, make(map[int]*dialingConn)
	}
	fd, rest, err := connectSocket(ip, port, own)
	if err != nil {
		return err
	}
	c := &dialingConn{fd: fd, ep: ep, remote: hostPort(&net.TCPAddr{IP: ip, Port: port}), rest: rest,
		made: len(rest) < len(own)}
	if err := syscall.EpollCtl(d.epfd, syscall.EPOLL_CTL_ADD, fd, &syscall.EpollEvent{Events: c.events(), Fd: int32(fd)}); err != nil {
		syscall.Close(fd)
		return os.NewSyscallError("epoll_ctl", err)
	}
	d.conns[fd] = c
	ep.dialing = c
	return nil
}

// events is what c waits for: writable while our hello is not all out (the connect
// not done), then readable (or hung up) for the peer's. Not readable before: a peer
// that sends without reading would keep the set ready while nothing can be done.
func (c *dialingConn) events() uint32 {
	if c.rest != nil {
		return syscall.EPOLLOUT
	}
	return syscall.EPOLLIN | syscall.EPOLLRDHUP
}

// pollDialing advances every connection whose socket is ready, and reports whether
// any was. Progress thread.
func (e *Engine) pollDialing() bool {
	d := &e.dialing
	if len(d.conns) == 0 {
		return false
	}
	n, err := epollWait(d.epfd, d.evs[:], 0)
	if err != nil || n <= 0 {
		return false
	}
	for i := 0; i < n; i++ {
		if c := d.conns[int(d.evs[i].Fd)]; c != nil {
			e.advanceDialing(c)
		}
	}
	return true
}

// advanceDialing takes c as far as its socket allows: the connect's end, the rest of
// our hello, the peer's hello; then the connection goes on as dialed, or fails.
func (e *Engine) advanceDialing(c *dialingConn) {
	if c.rest != nil {
		done, err := connectDone(c.fd)
		switch {
		case err != nil && c.made: // reset while our hello went out
			e.endDialing(c, ucxx.StatusConnectionReset)
			return
		case err != nil: // refused, say: as UCX reports a connect that fails
			e.endDialing(c, ucxx.StatusUnreachable)
			return
		case !done:
			return
		}
		c.made = true
		n, err := syscall.SendmsgN(c.fd, c.rest, nil, nil, syscall.MSG_NOSIGNAL)
		if err != nil && !errors.Is(err, syscall.EAGAIN) {
			e.endDialing(c, ucxx.StatusConnectionReset)
			return
		}
		if c.rest = c.rest[max(n, 0):]; len(c.rest) > 0 {
			return
		}
		c.rest = nil
		_ = syscall.EpollCtl(e.dialing.epfd, syscall.EPOLL_CTL_MOD, c.fd, &syscall.EpollEvent{Events: c.events(), Fd: int32(c.fd)})
	}
	for {
		var buf []byte
		if c.peer == nil {
			buf = c.head[c.got:]
		} else {
			buf = c.body[c.got-helloHeaderSize:]
		}
		n, err := syscall.Read(c.fd, buf)
		switch {
		case errors.Is(err, syscall.EAGAIN):
			return
		case err != nil || n == 0: // the peer closed mid-hello, or the connection broke
			e.endDialing(c, ucxx.StatusConnectionReset)
			return
		}
		if c.got += n; c.got < helloHeaderSize {
			continue
		}
		if c.peer == nil {
			peer, err := decodeHelloHeader(c.head[:])
			if err != nil {
				e.endDialing(c, ucxx.StatusIOError)
				return
			}
			c.peer, c.body = peer, peer.body()
		}
		if c.got == helloHeaderSize+len(c.body) {
			e.finishDialing(c)
			return
		}
	}
}

// finishDialing hands a connection whose hellos were exchanged to Go's poller (for
// its watch) and makes its endpoint. (A connection in the set always has its
// endpoint in the handshake phase: failing it takes the connection out,
// dropDialing.) A socket connected to itself (TCP's simultaneous open, when the
// kernel picks the listener's port, free since its listener went, as the local one)
// read our own hello back (its tags ours): nothing listens there (net.Dial refuses it
// alike).
func (e *Engine) finishDialing(c *dialingConn) {
	if selfConnected(c.fd) || c.peer.recvTag == c.ep.recvTag {
		e.endDialing(c, ucxx.StatusUnreachable)
		return
	}
	e.forgetDialing(c)
	ep := c.ep
	f := os.NewFile(uintptr(c.fd), "")
	conn, err := net.FileConn(f) // a duplicate
	f.Close()
	switch {
	case err != nil:
		e.failHandshake(ep, ucxx.StatusIOError)
		return
	case !e.conns.add(conn):
		e.failHandshake(ep, ucxx.StatusCanceled) // the engine stops
		return
	}
	if err := e.joinPeer(ep, conn, socketEnds{local: hostPort(conn.LocalAddr()), remote: c.remote}, c.peer); err != nil {
		e.conns.close(conn)
		e.failHandshake(ep, ucxx.StatusOf(err))
		return
	}
	e.handshakeDone(ep)
	go e.watch(ep.handle, conn)
}

// endDialing fails a connection that could not be made.
func (e *Engine) endDialing(c *dialingConn, st ucxx.Status) {
	e.forgetDialing(c)
	syscall.Close(c.fd)
	e.failHandshake(c.ep, st)
}

// dropDialing closes the socket of ep's connection if it is still being made (the
// endpoint fails for another reason: its deadline, the engine's stop).
func (e *Engine) dropDialing(ep *endpoint) {
	if c := ep.dialing; c != nil {
		e.forgetDialing(c)
		syscall.Close(c.fd)
	}
}

// forgetDialing takes c out of the set; its socket stays open.
func (e *Engine) forgetDialing(c *dialingConn) {
	_ = syscall.EpollCtl(e.dialing.epfd, syscall.EPOLL_CTL_DEL, c.fd, nil)
	delete(e.dialing.conns, c.fd)
	c.ep.dialing = nil
}

// closeDialing closes the set and every socket in it. Progress thread, at the stop.
func (e *Engine) closeDialing() {
	d := &e.dialing
	for fd, c := range d.conns {
		syscall.Close(fd)
		c.ep.dialing = nil
	}
	clear(d.conns)
	if d.epfd >= 0 {
		syscall.Close(d.epfd)
		d.epfd = -1
	}
}

// connectSocket makes a non-blocking TCP socket, starts its connect to ip:port, and
// writes first on it if the connection is already made. It returns the socket and
// what of first is left (nil: all of it went out).
func connectSocket(ip net.IP, port int, first []byte) (fd int, rest []byte, err error) {
	family, sa := syscall.AF_INET6, syscall.Sockaddr(nil)
	if ip4 := ip.To4(); ip4 != nil {
		a := &syscall.SockaddrInet4{Port: port}
		copy(a.Addr[:], ip4)
		family, sa = syscall.AF_INET, a
	} else {
		a := &syscall.SockaddrInet6{Port: port}
		copy(a.Addr[:], ip.To16())
		sa = a
	}
	fd, err = syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, syscall.IPPROTO_TCP)
	if err != nil {
		return -1, nil, os.NewSyscallError("socket", err)
	}
	rest = first
	if err = syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1); err == nil {
		if err = syscall.Connect(fd, sa); errors.Is(err, syscall.EINPROGRESS) {
			err = nil
		}
	}
	if err == nil {
		// A socket still connecting takes nothing (EAGAIN): the rest waits for the
		// connection. MSG_NOSIGNAL: a refused one reports EPIPE, not a signal.
		n, werr := syscall.SendmsgN(fd, first, nil, nil, syscall.MSG_NOSIGNAL)
		switch {
		case werr == nil:
			rest = first[n:]
		case !errors.Is(werr, syscall.EAGAIN):
			err = werr
		}
	}
	if err != nil {
		syscall.Close(fd)
		return -1, nil, os.NewSyscallError("connect", err)
	}
	if len(rest) == 0 {
		rest = nil
	}
	return fd, rest, nil
}

// selfConnected reports whether fd's two ends are the same address.
func selfConnected(fd int) bool {
	local, err := syscall.Getsockname(fd)
	if err != nil {
		return false
	}
	remote, err := syscall.Getpeername(fd)
	if err != nil {
		return false
	}
	switch l := local.(type) {
	case *syscall.SockaddrInet4:
		r, ok := remote.(*syscall.SockaddrInet4)
		return ok && l.Port == r.Port && l.Addr == r.Addr
	case *syscall.SockaddrInet6:
		r, ok := remote.(*syscall.SockaddrInet6)
		return ok && l.Port == r.Port && l.Addr == r.Addr
	}
	return false
}

// connectDone reports whether fd's connect has ended: false while it goes on, an
// error when it failed (ECONNREFUSED when nothing listens).
func connectDone(fd int) (bool, error) {
	if n, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ERROR); err != nil {
		return false, os.NewSyscallError("getsockopt", err)
	} else if n != 0 {
		return false, os.NewSyscallError("connect", syscall.Errno(n))
	}
	_, err := syscall.Getpeername(fd)
	return !errors.Is(err, syscall.ENOTCONN), nil
}
