package core

import (
	"runtime"
	"testing"
	"time"
)

// BenchmarkConnect: one connection per op from a client engine to a listener on
// loopback, timed from Connect until its completion (UCX's wire-up and the tag
// handshake), then closed (not timed).
func BenchmarkConnect(b *testing.B) { benchConnect(b, false) }

// BenchmarkConnectWarmedUp is BenchmarkConnect with both engines warmed up
// (Engine.WarmUp) before the first connection: its max-us is then the first
// connection's cost past protocol selection for the connection manager's endpoint
// configurations.
func BenchmarkConnectWarmedUp(b *testing.B) { benchConnect(b, true) }

func benchConnect(b *testing.B, warmUp bool) {
	server, client := newTestEngine(b, Options{}), newTestEngine(b, Options{})
	if warmUp {
		for _, e := range []*Engine{server, client} {
			id, err := e.WarmUp("127.0.0.1")
			if err != nil {
				b.Fatal(err)
			}
			if c := newCollector(b, e).wait(id, 10*time.Second); c.Status != 0 {
				b.Fatalf("WarmUp: status %d", c.Status)
			}
		}
	}
	_, port, err := server.Listen("127.0.0.1", 0)
	if err != nil {
		b.Fatal(err)
	}
	cc := newCollector(b, client)
	var worst time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		id, err := client.Connect("127.0.0.1", port, 5*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		comp := cc.wait(id, 10*time.Second)
		if comp.Status != 0 {
			b.Fatalf("Connect: status %d", comp.Status)
		}
		worst = max(worst, time.Since(start))
		b.StopTimer()
		cid, _ := client.CloseEndpoint(comp.Length, time.Second)
		cc.wait(cid, 5*time.Second)
		b.StartTimer()
	}
	b.ReportMetric(float64(worst.Microseconds()), "max-us")
}

// BenchmarkConnectAddress: for comparison with BenchmarkConnect, one pair of
// endpoints per op made from the engines' worker addresses (ConnectAddress each way,
// no connection manager), timed until an 8-byte message has gone each way, then
// closed (not timed). Fresh engines: max-us includes the first pair's protocol
// selection, for the one endpoint configuration each side makes.
func BenchmarkConnectAddress(b *testing.B) {
	x, y := newTestEngine(b, Options{}), newTestEngine(b, Options{})
	xc, yc := newCollector(b, x), newCollector(b, y)
	xaddr, err := x.WorkerAddress()
	if err != nil {
		b.Fatal(err)
	}
	yaddr, err := y.WorkerAddress()
	if err != nil {
		b.Fatal(err)
	}
	msg, buf := []byte("12345678"), make([]byte, 8)
	oneWay := func(from *Engine, fc *collector, fep uint64, to *Engine, tc *collector, tep uint64, tag uint64) {
		rid, err := to.TagRecv(tep, addr(buf), 8, tag, ^uint64(0), 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		sid, err := from.TagSend(fep, addr(msg), 8, tag, 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		if c := fc.wait(sid, 5*time.Second); c.Status != 0 {
			b.Fatalf("send: status %d", c.Status)
		}
		if c := tc.wait(rid, 5*time.Second); c.Status != 0 {
			b.Fatalf("recv: status %d", c.Status)
		}
	}
	var worst time.Duration
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		yep, err := y.ConnectAddress(xaddr)
		if err != nil {
			b.Fatal(err)
		}
		xep, err := x.ConnectAddress(yaddr)
		if err != nil {
			b.Fatal(err)
		}
		tag := uint64(i + 1)
		oneWay(y, yc, yep, x, xc, xep, tag)
		oneWay(x, xc, xep, y, yc, yep, tag)
		worst = max(worst, time.Since(start))
		b.StopTimer()
		xid, _ := x.CloseEndpoint(xep, time.Second)
		yid, _ := y.CloseEndpoint(yep, time.Second)
		xc.wait(xid, 5*time.Second)
		yc.wait(yid, 5*time.Second)
		b.StartTimer()
	}
	b.ReportMetric(float64(worst.Microseconds()), "max-us")
	runtime.KeepAlive(msg)
	runtime.KeepAlive(buf)
}
