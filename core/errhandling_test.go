package core

import (
	"bytes"
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// What UCX 1.22 does, found by trying UCX_TLS values (ucxx.TestErrHandlingModes holds
// the raw-layer half):
//
//   - A connection through a listener needs "tcp" in UCX_TLS, whatever the error
//     handling: UCX's TCP connection manager only connects from a network device that
//     is enabled, and with UCX_TLS=sm,self none is ("device lo is not enabled").
//   - With TLS "sm,self,tcp" and no error handling, the data lanes are sysv, posix and
//     cma; the only TCP lane left is the connection manager's ({"tcp", ""}). With
//     error handling the same TLS gives TCP on lo for everything: posix, sysv and self
//     have no peer failure handler, and cma no active-message lane.
//   - With TLS "sm,self", a connection through a listener fails with
//     StatusUnreachable either way: with error handling through UCX's error callback,
//     without it through the tag handshake's stream operations, which UCX fails on
//     an endpoint it marked failed even when it calls no error handler. A
//     worker-address endpoint fails at once (ucp_ep_create) with error handling, and
//     works over shared memory without it.
//   - Without error handling, UCX also fails sends on an endpoint whose peer it saw
//     go (the connection manager's TCP socket), but receives are posted on the worker
//     and wait: nothing tells the engine, so no EventEndpointError is reported.
//   - Without error handling UCX tracks no request per endpoint, so a force close does
//     not end a rendezvous send the peer has not received (with error handling it
//     fails with StatusCanceled): the send ends when the peer receives it.

// shmTLS is the UCX_TLS with which a listener connection carries its data over shared
// memory (with error handling only if UCX_MM_ERROR_HANDLING=y, as UCXDefaults has it).
const shmTLS = "sm,self,tcp"

var noErrHandling = EndpointOptions{NoErrorHandling: true}

// shmEngine is an engine on UCX_TLS tls; mm is UCX_MM_ERROR_HANDLING, "" for UCXDefaults'.
func shmEngine(t *testing.T, tls, mm string) *Engine {
	t.Helper()
	opts := map[string]string{"TLS": tls}
	if mm != "" {
		opts["MM_ERROR_HANDLING"] = mm
	}
	// QuietAfter 1 ms: idle waits block (the process's default after a second), so a
	// close that UCX ends with no event must be polled for (TestNoErrorHandlingClose's
	// peer-stalled case ended a second late when it was not).
	return newTestEngine(t, Options{UCXOptions: opts, QuietAfter: time.Millisecond})
}

// pairWith is pair with endpoint options on both sides.
func pairWith(t *testing.T, client, server *Engine, opts EndpointOptions) (cep, sep uint64, cc, sc *collector) {
	t.Helper()
	lh, port, err := server.ListenWith("127.0.0.1", 0, opts)
	if err != nil {
		t.Fatalf("ListenWith: %v", err)
	}
	t.Cleanup(func() { server.CloseListener(lh) })
	cc, sc = newCollector(t, client), newCollector(t, server)
	id, err := client.ConnectWith("127.0.0.1", port, 5*time.Second, opts)
	if err != nil {
		t.Fatalf("ConnectWith: %v", err)
	}
	comp := cc.wait(id, 10*time.Second)
	if comp.Status != 0 {
		t.Fatalf("ConnectWith completed with status %d (%v)", comp.Status, ucxx.Status(comp.Status))
	}
	acc := sc.wait(EventListenerAccept|lh, 10*time.Second)
	return comp.Length, acc.Length, cc, sc
}

// epMode returns the error handling mode and the transports of endpoint h, read on
// the progress thread.
func epMode(t *testing.T, e *Engine, h uint64) (ucxx.ErrHandling, []ucxx.Transport) {
	t.Helper()
	var (
		mode ucxx.ErrHandling
		ts   []ucxx.Transport
		err  error
	)
	if cerr := e.onThread(func() {
		ep := e.eps.get(h)
		if ep == nil || ep.u == nil {
			err = ErrEndpointClosed
			return
		}
		mode = ep.u.ErrHandling()
		ts, err = ep.u.Transports()
	}); cerr != nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("endpoint %d: %v", h, err)
	}
	return mode, ts
}

// Shared-memory transports in UCX's names.
func isSharedMemory(tr ucxx.Transport) bool {
	return slices.Contains([]string{"posix", "sysv", "cma", "xpmem", "knem"}, tr.Name)
}

// roundTrip sends size bytes from client to server and back, iters times, and checks
// what came back. (No timing here: the collector's waits dominate it.)
func roundTrip(t *testing.T, client *Engine, cep uint64, cc *collector, server *Engine, sep uint64, sc *collector, size, iters int) {
	t.Helper()
	ci, si := endpointInfo(t, client, cep), endpointInfo(t, server, sep)
	msg, mid, out := make([]byte, size), make([]byte, size), make([]byte, size)
	for i := range msg {
		msg[i] = byte(i*7 + 1)
	}
	for range iters {
		for _, hop := range []struct {
			from, to      *Engine
			fromEP, toEP  uint64
			fc, tc        *collector
			sendTag, rtag uint64
			src, dst      []byte
		}{
			{client, server, cep, sep, cc, sc, ci.SendTag, si.RecvTag, msg, mid},
			{server, client, sep, cep, sc, cc, si.SendTag, ci.RecvTag, mid, out},
		} {
			rid, err := hop.to.TagRecv(hop.toEP, addr(hop.dst), uint64(size), hop.rtag, ^uint64(0), 0, 0)
			if err != nil {
				t.Fatalf("TagRecv: %v", err)
			}
			sid, err := hop.from.TagSend(hop.fromEP, addr(hop.src), uint64(size), hop.sendTag, 0, 0)
			if err != nil {
				t.Fatalf("TagSend: %v", err)
			}
			if c := hop.fc.wait(sid, 5*time.Second); c.Status != 0 {
				t.Fatalf("send of %d bytes: status %d", size, c.Status)
			}
			if c := hop.tc.wait(rid, 5*time.Second); c.Status != 0 || c.Length != uint64(size) {
				t.Fatalf("recv of %d bytes: %+v", size, c)
			}
		}
	}
	if !bytes.Equal(out, msg) {
		t.Fatalf("%d bytes came back different", size)
	}
	runtime.KeepAlive(msg)
	runtime.KeepAlive(mid)
	runtime.KeepAlive(out)
}

// TestEchoOverSharedMemory: a listener connection between two engines (two UCP
// contexts, as two processes would have) carries its data over shared memory, with
// error handling too under UCXDefaults; with error handling and UCX's own
// MM_ERROR_HANDLING=n the same UCX_TLS gives TCP.
func TestEchoOverSharedMemory(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts EndpointOptions
		mm   string
		shm  bool
	}{
		{"no-error-handling", noErrHandling, "", true},
		{"error-handling", EndpointOptions{}, "", true},
		{"error-handling/MM_ERROR_HANDLING=n", EndpointOptions{}, "n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := shmEngine(t, shmTLS, tc.mm), shmEngine(t, shmTLS, tc.mm)
			cep, sep, cc, sc := pairWith(t, client, server, tc.opts)
			for _, size := range []int{8, 1 << 20} {
				roundTrip(t, client, cep, cc, server, sep, sc, size, 3)
			}

			for _, end := range []struct {
				name string
				e    *Engine
				h    uint64
			}{{"client", client, cep}, {"server", server, sep}} {
				mode, ts := epMode(t, end.e, end.h)
				t.Logf("%s: mode %v, transports %v", end.name, mode, ts)
				if want := tc.opts.errHandling(); mode != want {
					t.Errorf("%s endpoint: mode %v, want %v", end.name, mode, want)
				}
				shm := slices.ContainsFunc(ts, isSharedMemory)
				tcpData := slices.ContainsFunc(ts, func(tr ucxx.Transport) bool { return tr.Name == "tcp" && tr.Device != "" })
				// With error handling UCX keeps a TCP lane beside shared memory (for
				// keepalive); without, none.
				if tc.shm && (!shm || tcpData && tc.opts.NoErrorHandling) {
					t.Errorf("%s: transports %v; want shared memory (and no TCP data lane without error handling)", end.name, ts)
				}
				// Without MM_ERROR_HANDLING the shared-memory FIFOs (posix, sysv) have no
				// peer failure handler; CMA has one and may carry one-sided transfers
				// (UCXDefaults' CMA_MEMORY_INVALIDATE), the messages go over TCP.
				mm := slices.ContainsFunc(ts, func(tr ucxx.Transport) bool { return tr.Name == "posix" || tr.Name == "sysv" })
				if !tc.shm && (mm || !tcpData) {
					t.Errorf("%s: transports %v; want TCP for the messages (shared memory without MM_ERROR_HANDLING has no peer failure handler)", end.name, ts)
				}
			}

			closeID, err := client.CloseEndpoint(cep, 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if c := cc.wait(closeID, 5*time.Second); c.Status != 0 {
				t.Fatalf("close: %+v", c)
			}
			if tc.opts.NoErrorHandling {
				closeID, _ = server.CloseEndpoint(sep, 2*time.Second)
				sc.wait(closeID, 5*time.Second)
			}
			waitIdle(t, client)
			waitIdle(t, server)
		})
	}
}

// TestSharedMemoryOnlyTLS: with UCX_TLS=sm,self and UCX's own MM_ERROR_HANDLING=n,
// error handling rules out every transport; without it, a worker-address endpoint
// works, and so does a listener's connection of ViaAddress, while one of ViaManager
// cannot be made (no network device for UCX's connection manager).
func TestSharedMemoryOnlyTLS(t *testing.T) {
	const tls = "sm,self"
	client, server := shmEngine(t, tls, "n"), shmEngine(t, tls, "n")
	cc, sc := newCollector(t, client), newCollector(t, server)
	byAddressNoErr := EndpointOptions{NoErrorHandling: true, Via: ViaAddress}
	t.Run("listener/address/no-error-handling", func(t *testing.T) {
		lh, port, err := server.ListenWith("127.0.0.1", 0, byAddressNoErr)
		if err != nil {
			t.Fatalf("ListenWith: %v", err)
		}
		defer server.CloseListener(lh)
		id, err := client.ConnectWith("127.0.0.1", port, 5*time.Second, byAddressNoErr)
		if err != nil {
			t.Fatal(err)
		}
		cep, sep := cc.wait(id, 6*time.Second), sc.wait(EventListenerAccept|lh, 6*time.Second)
		if cep.Status != 0 || sep.Status != 0 {
			t.Fatalf("connect: %+v, accept: %+v", cep, sep)
		}
		exchange(t, client, cep.Length, cc, server, sep.Length, sc, []byte("over shared memory"))
		for _, side := range []struct {
			e *Engine
			c *collector
			h uint64
		}{{client, cc, cep.Length}, {server, sc, sep.Length}} {
			closeID, _ := side.e.CloseEndpoint(side.h, 2*time.Second)
			side.c.wait(closeID, 5*time.Second)
		}
		waitIdle(t, client)
		waitIdle(t, server)
	})
	for _, tc := range []struct {
		name string
		opts EndpointOptions
	}{
		{"listener/error-handling", EndpointOptions{Via: ViaManager}},
		{"listener/no-error-handling", EndpointOptions{NoErrorHandling: true, Via: ViaManager}},
		{"listener/address/error-handling", EndpointOptions{Via: ViaAddress}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lh, port, err := server.ListenWith("127.0.0.1", 0, tc.opts)
			if err != nil {
				t.Fatalf("ListenWith: %v", err)
			}
			defer server.CloseListener(lh)
			const timeout = 5 * time.Second
			start := time.Now()
			id, err := client.ConnectWith("127.0.0.1", port, timeout, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			c := cc.wait(id, timeout+time.Second)
			elapsed := time.Since(start)
			if c.Status != int64(ucxx.StatusUnreachable) || elapsed >= timeout {
				t.Fatalf("connect: %+v after %v; want StatusUnreachable before the timeout", c, elapsed)
			}
			t.Logf("failed after %v: %v", elapsed.Round(time.Millisecond), ucxx.Status(c.Status))
			noCompletion(t, sc, EventListenerAccept|lh)
			waitIdle(t, client)
			waitIdle(t, server)
		})
	}

	address, err := server.WorkerAddress()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("address/error-handling", func(t *testing.T) {
		if _, err := client.ConnectAddressWith(address, EndpointOptions{}); ucxx.StatusOf(err) != ucxx.StatusUnreachable {
			t.Fatalf("ConnectAddress: %v; want StatusUnreachable", err)
		}
		waitIdle(t, client)
	})
	t.Run("address/no-error-handling", func(t *testing.T) {
		h, err := client.ConnectAddressWith(address, noErrHandling)
		if err != nil {
			t.Fatalf("ConnectAddressWith: %v", err)
		}
		for _, size := range []int{8, 1 << 20} {
			msg := bytes.Repeat([]byte{byte(size)}, size)
			out := make([]byte, size)
			const tag = 0x5eed
			rid, err := server.TagRecv(0, addr(out), uint64(size), tag, ^uint64(0), 0, 0) // on the worker
			if err != nil {
				t.Fatal(err)
			}
			sid, err := client.TagSend(h, addr(msg), uint64(size), tag, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if c := cc.wait(sid, 5*time.Second); c.Status != 0 {
				t.Fatalf("send: %+v", c)
			}
			if c := sc.wait(rid, 5*time.Second); c.Status != 0 || !bytes.Equal(out, msg) {
				t.Fatalf("recv of %d bytes: %+v", size, c)
			}
			runtime.KeepAlive(msg)
			runtime.KeepAlive(out)
		}
		mode, ts := epMode(t, client, h)
		t.Logf("transports %v", ts)
		if mode != ucxx.ErrHandlingNone || !slices.ContainsFunc(ts, isSharedMemory) {
			t.Fatalf("mode %v, transports %v; want none and shared memory", mode, ts)
		}
		closeID, err := client.CloseEndpoint(h, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		cc.wait(closeID, 3*time.Second)
		waitIdle(t, client)
	})
}

// TestNoErrorHandlingClose: without error handling nothing reports the peer's close
// or death, so our close and abort must end on their own: each within its deadline,
// cancelling the receives pending on the endpoint, with no endpoint error event.
func TestNoErrorHandlingClose(t *testing.T) {
	// recvPending posts a receive on ep that nothing will answer, and waits until the
	// progress thread has posted it.
	recvPending := func(t *testing.T, e *Engine, ep uint64, buf []byte) uint64 {
		t.Helper()
		rid, err := e.TagRecv(ep, addr(buf), uint64(len(buf)), endpointInfo(t, e, ep).RecvTag, ^uint64(0), 0, 0)
		if err != nil {
			t.Fatalf("TagRecv: %v", err)
		}
		if _, err := e.Stats(); err != nil {
			t.Fatal(err)
		}
		return rid
	}
	// closeWithin closes ep gracefully and checks that the close completes in time and
	// cancels the pending receive rid.
	closeWithin := func(t *testing.T, e *Engine, c *collector, ep, rid uint64, timeout time.Duration) {
		t.Helper()
		start := time.Now()
		id, err := e.CloseEndpoint(ep, timeout)
		if err != nil {
			t.Fatal(err)
		}
		if comp := c.wait(id, timeout+time.Second); comp.Status != 0 {
			t.Fatalf("close: %+v", comp)
		}
		t.Logf("close answered after %v", time.Since(start).Round(time.Microsecond))
		if comp := c.wait(rid, time.Second); comp.Status != int64(ucxx.StatusCanceled) {
			t.Fatalf("receive pending at close: %+v; want StatusCanceled", comp)
		}
		noCompletion(t, c, EventEndpointError|ep)
	}
	buf := make([]byte, 64)
	defer runtime.KeepAlive(buf)

	t.Run("both-sides", func(t *testing.T) {
		client, server := shmEngine(t, shmTLS, ""), shmEngine(t, shmTLS, "")
		cep, sep, cc, sc := pairWith(t, client, server, noErrHandling)
		exchange(t, client, cep, cc, server, sep, sc, []byte("before the close"))
		crid, srid := recvPending(t, client, cep, buf[:32]), recvPending(t, server, sep, buf[32:])
		closeWithin(t, client, cc, cep, crid, 2*time.Second)
		waitIdle(t, client)
		// The server is not told: its receive stays pending until it closes too.
		time.Sleep(200 * time.Millisecond)
		noCompletion(t, sc, srid)
		noCompletion(t, sc, EventEndpointError|sep)
		closeWithin(t, server, sc, sep, srid, 2*time.Second)
		waitIdle(t, server)
	})
	t.Run("abort", func(t *testing.T) {
		client, server := shmEngine(t, shmTLS, ""), shmEngine(t, shmTLS, "")
		cep, sep, cc, sc := pairWith(t, client, server, noErrHandling)
		exchange(t, client, cep, cc, server, sep, sc, []byte("before the abort"))
		rid := recvPending(t, client, cep, buf)
		if err := client.AbortEndpoint(cep); err != nil {
			t.Fatal(err)
		}
		if c := cc.wait(rid, 2*time.Second); c.Status != int64(ucxx.StatusCanceled) {
			t.Fatalf("recv on an aborted endpoint: %+v; want StatusCanceled", c)
		}
		if _, err := client.TagSend(cep, addr(buf), 8, 0, 0, 0); !errors.Is(err, ErrEndpointClosed) {
			t.Fatalf("send after abort: %v; want ErrEndpointClosed", err)
		}
		waitIdle(t, client)
		noCompletion(t, cc, EventEndpointError|cep)
		// The peer is not told either; its own close ends as usual.
		time.Sleep(100 * time.Millisecond)
		noCompletion(t, sc, EventEndpointError|sep)
		id, _ := server.CloseEndpoint(sep, time.Second)
		sc.wait(id, 2*time.Second)
		waitIdle(t, server)
	})
	t.Run("peer-shut-down", func(t *testing.T) {
		client, server := shmEngine(t, shmTLS, ""), shmEngine(t, shmTLS, "")
		cep, sep, cc, sc := pairWith(t, client, server, noErrHandling)
		exchange(t, client, cep, cc, server, sep, sc, []byte("before the shutdown"))
		rid := recvPending(t, client, cep, buf)
		if err := server.Shutdown(2 * time.Second); err != nil {
			t.Fatalf("server Shutdown: %v", err)
		}
		// Not detected: no error event, the receive waits.
		time.Sleep(300 * time.Millisecond)
		noCompletion(t, cc, rid)
		noCompletion(t, cc, EventEndpointError|cep)
		closeWithin(t, client, cc, cep, rid, time.Second)
		waitIdle(t, client)
	})
	t.Run("peer-stalled", func(t *testing.T) {
		// A rendezvous send the peer does not fetch: the close waits for it until its
		// deadline, then forces, which does not end the send (see the top of this
		// file); the send ends once the peer receives it.
		client, server := shmEngine(t, shmTLS, ""), shmEngine(t, shmTLS, "")
		cep, sep, cc, sc := pairWith(t, client, server, noErrHandling)
		release := holdProgress(t, server)
		msg := make([]byte, 1<<20)
		sid, err := client.TagSend(cep, addr(msg), uint64(len(msg)), endpointInfo(t, client, cep).SendTag, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		rid := recvPending(t, client, cep, buf)
		const timeout = 200 * time.Millisecond
		closeWithin(t, client, cc, cep, rid, timeout)
		release()
		out := make([]byte, len(msg))
		srid, err := server.TagRecv(sep, addr(out), uint64(len(out)), endpointInfo(t, server, sep).RecvTag, ^uint64(0), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if c := sc.wait(srid, 5*time.Second); c.Status != 0 || c.Length != uint64(len(msg)) {
			t.Fatalf("peer's receive of the send in flight at close: %+v", c)
		}
		c := cc.wait(sid, 5*time.Second)
		t.Logf("send in flight at close: status %d (%v)", c.Status, ucxx.Status(c.Status))
		waitIdle(t, client)
		id, _ := server.CloseEndpoint(sep, time.Second)
		sc.wait(id, 2*time.Second)
		waitIdle(t, server)
		runtime.KeepAlive(msg)
		runtime.KeepAlive(out)
	})
}

// TestReleaseEndpointDeliversWhatWasSent: an endpoint the application drops after its
// sends completed is closed gracefully: the peer receives every message, the last a
// rendezvous one, and then sees the connection end.
func TestReleaseEndpointDeliversWhatWasSent(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, sep, cc, sc := pair(t, client, server)
	sizes := []int{8, 64, 4096, 1 << 20}
	bufs := make([][]byte, len(sizes))
	for i, n := range sizes {
		bufs[i] = bytes.Repeat([]byte{byte(i + 1)}, n)
		id, err := server.TagSend(sep, addr(bufs[i]), uint64(n), 7, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Only eager sends complete before the peer receives; the rendezvous one is
		// still in flight when the endpoint is released.
		if n < 1<<20 {
			if c := sc.wait(id, 5*time.Second); c.Status != 0 {
				t.Fatalf("send %d: status %d", i, c.Status)
			}
		}
	}
	if err := server.ReleaseEndpoint(sep, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for i, n := range sizes {
		got := make([]byte, n)
		id, err := client.TagRecv(cep, addr(got), uint64(n), 7, ^uint64(0), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if c := cc.wait(id, 5*time.Second); c.Status != 0 || c.Length != uint64(n) || !bytes.Equal(got, bufs[i]) {
			t.Fatalf("message %d: status %d, length %d of %d, intact %v", i, c.Status, c.Length, n, bytes.Equal(got, bufs[i]))
		}
	}
	runtime.KeepAlive(bufs)
}

// TestEndpointInfoAfterThePeerBrokeIt: an endpoint whose peer broke it before the
// application asked for its tags (in loop mode a whole connection can end before the
// connecting coroutine resumes) still reports them, so receives can drain what the
// peer sent; an unknown handle, or one the application closed, is ErrEndpointClosed
// (EndpointInfo once returned empty tags and no error for it).
func TestEndpointInfoAfterThePeerBrokeIt(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, sep, cc, _ := pair(t, client, server)
	want := endpointInfo(t, client, cep)
	if err := server.AbortEndpoint(sep); err != nil {
		t.Fatal(err)
	}
	if c := cc.wait(EventEndpointError|cep, 10*time.Second); c.Status == 0 {
		t.Fatal("the client's endpoint did not fail")
	}
	for deadline := time.Now().Add(10 * time.Second); ; { // UCX's close of it has no event
		info := endpointInfo(t, client, cep)
		if info.SendTag != want.SendTag || info.RecvTag != want.RecvTag {
			t.Fatalf("tags %#x/%#x after the peer broke it, want %#x/%#x", info.SendTag, info.RecvTag, want.SendTag, want.RecvTag)
		}
		if info.UCPHandle == 0 {
			break // closed by UCX, remembered as dead
		}
		if time.Now().After(deadline) {
			t.Fatal("UCX did not close the broken endpoint")
		}
		runtime.Gosched()
	}
	if err := client.AbortEndpoint(cep); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, client)
	for _, h := range []uint64{cep, 1 << 40} {
		if info, err := client.EndpointInfo(h); !errors.Is(err, ErrEndpointClosed) {
			t.Errorf("EndpointInfo(%#x) of a closed or unknown endpoint: %+v, %v; want ErrEndpointClosed", h, info, err)
		}
	}
}

// TestSendOnAnEndpointItsPeerBrokeSaysWhy: work submitted on an endpoint its peer
// broke fails with the status it broke with, also once UCX has closed it (it once
// failed as closed then, as if the application had closed it); once the application
// closes it, the endpoint is closed.
func TestSendOnAnEndpointItsPeerBrokeSaysWhy(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, sep, cc, _ := pair(t, client, server)
	if err := server.AbortEndpoint(sep); err != nil {
		t.Fatal(err)
	}
	broke := ucxx.Status(cc.wait(EventEndpointError|cep, 10*time.Second).Status)
	if broke == ucxx.StatusOK {
		t.Fatal("the client's endpoint did not fail")
	}
	for deadline := time.Now().Add(10 * time.Second); endpointInfo(t, client, cep).UCPHandle != 0; {
		if time.Now().After(deadline) { // UCX's close of it has no event
			t.Fatal("UCX did not close the broken endpoint")
		}
		runtime.Gosched()
	}
	buf := make([]byte, 8)
	_, err := client.TagSend(cep, uintptr(unsafe.Pointer(&buf[0])), 8, 1, ucxx.MemoryHost, 0)
	if ucxx.StatusOf(err) != broke || errors.Is(err, ErrEndpointClosed) {
		t.Errorf("send on an endpoint its peer broke (%v), after UCX closed it: %v", broke, err)
	}
	if st := client.EndpointStatus(cep); st != broke {
		t.Errorf("EndpointStatus = %v, want %v", st, broke)
	}
	if err := client.AbortEndpoint(cep); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, client)
	if _, err := client.TagSend(cep, uintptr(unsafe.Pointer(&buf[0])), 8, 1, ucxx.MemoryHost, 0); !errors.Is(err, ErrEndpointClosed) {
		t.Errorf("send on an endpoint the application closed: %v, want ErrEndpointClosed", err)
	}
	if st := client.EndpointStatus(cep); st != ucxx.StatusCanceled {
		t.Errorf("EndpointStatus after the close = %v, want StatusCanceled", st)
	}
}
