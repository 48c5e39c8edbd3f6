package core

import (
	"testing"
	"time"
)

// BenchmarkConnect: one connection per op from a client engine to a listener on
// loopback, timed from Connect until its completion (UCX's wire-up and the tag
// handshake), then closed (not timed).
func BenchmarkConnect(b *testing.B) {
	server, client := newTestEngine(b, Options{}), newTestEngine(b, Options{})
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
