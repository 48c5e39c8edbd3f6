package core

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
)

// TestConcurrentProducers: several application goroutines submit sends on one engine
// at once, as Python threads would. Every message arrives exactly once, intact, and
// in order per sender (each sender has its own tag).
func TestConcurrentProducers(t *testing.T) {
	const producers, perProducer = 8, 250
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, sep, cc, sc := pair(t, client, server)
	ci := endpointInfo(t, client, cep)
	si := endpointInfo(t, server, sep)

	// Receives first, one tag per producer, posted in each producer's order.
	bufs := make([][]byte, producers*perProducer)
	rids := make([]uint64, len(bufs))
	for p := range producers {
		for k := range perProducer {
			i := p*perProducer + k
			bufs[i] = make([]byte, 16)
			var err error
			if rids[i], err = server.TagRecv(sep, addr(bufs[i]), 16, si.RecvTag+uint64(p), ^uint64(0), 0, 0); err != nil {
				t.Fatal(err)
			}
		}
	}

	msgs := make([][]byte, len(bufs))
	for i := range msgs {
		msgs[i] = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, uint64(i)), ^uint64(i))
	}
	sids := make([]uint64, len(bufs))
	g, ctx := errgroup.WithContext(context.Background())
	for p := range producers {
		g.Go(func() error {
			for k := range perProducer {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				i := p*perProducer + k
				id, err := client.TagSend(cep, addr(msgs[i]), 16, ci.SendTag+uint64(p), 0, 0)
				if err != nil {
					return fmt.Errorf("producer %d message %d: %w", p, k, err)
				}
				sids[i] = id
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for i := range sids {
		if c := cc.wait(sids[i], 10*time.Second); c.Status != 0 {
			t.Fatalf("send %d: status %d", i, c.Status)
		}
	}
	for i := range rids {
		if c := sc.wait(rids[i], 10*time.Second); c.Status != 0 || c.Length != 16 {
			t.Fatalf("recv %d: %+v", i, c)
		}
		if got := binary.LittleEndian.Uint64(bufs[i]); got != uint64(i) || binary.LittleEndian.Uint64(bufs[i][8:]) != ^uint64(i) {
			t.Fatalf("buffer %d holds message %d", i, got)
		}
	}
}
