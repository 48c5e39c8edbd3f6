package core

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/notifier"
)

// newEventFD makes a non-blocking eventfd, as New does for the pool, closed at cleanup.
func newEventFD(t testing.TB) notifier.EventFD {
	t.Helper()
	fd, err := notifier.NewEventFD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fd.Close() })
	return fd
}

// readEventFD reads the counter without blocking: ok is false when nothing was written.
func readEventFD(t testing.TB, fd notifier.EventFD) (value uint64, ok bool) {
	t.Helper()
	var buf [8]byte
	n, err := syscall.Read(int(fd), buf[:])
	if errors.Is(err, syscall.EAGAIN) {
		return 0, false
	}
	if err != nil || n != 8 {
		t.Fatalf("read eventfd: %d, %v", n, err)
	}
	return binary.NativeEndian.Uint64(buf[:]), true
}

func TestPoolWakeProtocol(t *testing.T) {
	p := &pool{wakeFD: newEventFD(t)}

	// While the progress thread is busy, submitting costs no system call.
	p.push(submission{id: 1})
	if v, ok := readEventFD(t, p.wakeFD); ok {
		t.Fatalf("push while not sleeping wrote the wake eventfd (%d)", v)
	}
	p.swap(nil)

	if !p.prepareSleep() {
		t.Fatal("prepareSleep on an empty pool returned false")
	}
	p.push(submission{id: 2})
	if v, ok := readEventFD(t, p.wakeFD); !ok || v != 1 {
		t.Fatalf("push while sleeping: eventfd read %d, %v; want 1, true", v, ok)
	}
	if p.sleeping.Load() != 0 {
		t.Fatal("the waking push left sleeping set")
	}
	// One wake-up per sleep: the next push finds sleeping clear.
	p.push(submission{id: 3})
	if v, ok := readEventFD(t, p.wakeFD); ok {
		t.Fatalf("second push in the same sleep wrote the eventfd again (%d)", v)
	}
	p.awake()
	if got := p.swap(nil); len(got) != 2 || got[0].id != 2 || got[1].id != 3 {
		t.Fatalf("swap = %+v; want ids 2, 3", got)
	}

	// The eventfd write and epoll agree: drainWake empties the counter.
	if !p.prepareSleep() {
		t.Fatal("prepareSleep on an empty pool returned false")
	}
	p.push(submission{id: 4})
	p.drainWake()
	if v, ok := readEventFD(t, p.wakeFD); ok {
		t.Fatalf("drainWake left %d in the counter", v)
	}
}

func TestPrepareSleepNonEmpty(t *testing.T) {
	p := &pool{wakeFD: newEventFD(t)}
	p.push(submission{id: 1})
	if p.prepareSleep() {
		t.Fatal("prepareSleep returned true with a submission queued")
	}
	if p.sleeping.Load() != 0 {
		t.Fatal("prepareSleep refused but left sleeping set")
	}
	// So the next push does not kick: the progress thread is about to dispatch anyway.
	p.push(submission{id: 2})
	if _, ok := readEventFD(t, p.wakeFD); ok {
		t.Fatal("push after a refused prepareSleep wrote the eventfd")
	}
	if got := p.swap(nil); len(got) != 2 {
		t.Fatalf("swap returned %d submissions, want 2", len(got))
	}
}

// TestPoolClosesOnlyWhenEmpty: the stop closes the pool only once its last dispatch
// took everything (a submission pushed after that dispatch is dispatched, not lost),
// and a push after the close is refused, queueing nothing.
func TestPoolClosesOnlyWhenEmpty(t *testing.T) {
	p := &pool{wakeFD: newEventFD(t)}
	if !p.push(submission{id: 1}) {
		t.Fatal("push refused before the close")
	}
	if p.closeIfEmpty() {
		t.Fatal("the pool closed over a queued submission")
	}
	if got := p.swap(nil); len(got) != 1 || got[0].id != 1 {
		t.Fatalf("swap after a refused close: %d submissions", len(got))
	}
	if !p.closeIfEmpty() {
		t.Fatal("an empty pool did not close")
	}
	if p.push(submission{id: 2}) {
		t.Fatal("push accepted after the close")
	}
	if got := p.swap(nil); len(got) != 0 {
		t.Fatalf("a refused push queued %d submissions", len(got))
	}
}

// TestPoolConcurrentProducers runs the pool the way the engine does: producers push,
// one consumer swaps and, when it finds nothing, sleeps in epoll on the wake eventfd
// with no timeout. Producers stop at the end of each round until the consumer has
// everything, so the consumer goes to sleep with producers about to push many times
// over; a lost wake-up leaves it asleep and the test fails at its deadline.
func TestPoolConcurrentProducers(t *testing.T) {
	const producers, perProducer, rounds = 8, 10000, 20
	const perRound = perProducer / rounds
	p := &pool{wakeFD: newEventFD(t)}
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(epfd)
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(p.wakeFD)}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, int(p.wakeFD), &ev); err != nil {
		t.Fatal(err)
	}

	roundDone := make([]chan struct{}, rounds)
	for i := range roundDone {
		roundDone[i] = make(chan struct{})
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for pr := range producers {
		wg.Go(func() {
			for r := range rounds {
				for seq := r * perRound; seq < (r+1)*perRound; seq++ {
					p.push(submission{op: opTagSend, id: uint64(pr)<<32 | uint64(seq)})
				}
				select {
				case <-roundDone[r]:
				case <-stop:
					return
				}
			}
		})
	}

	consumerErr := make(chan error, 1)
	sleeps := 0
	go func() {
		next := make([]uint64, producers) // next expected seq of each producer
		var spare []submission
		var evs [1]syscall.EpollEvent
		total, round := 0, 0
		for total < producers*perProducer {
			batch := p.swap(spare)
			for _, s := range batch {
				pr, seq := s.id>>32, s.id&(1<<32-1)
				if pr >= producers || seq != next[pr] {
					close(stop)
					consumerErr <- fmt.Errorf("got producer %d seq %d; want seq %d", pr, seq, next[min(pr, producers-1)])
					return
				}
				next[pr]++
			}
			total += len(batch)
			for round < rounds && total >= (round+1)*producers*perRound {
				close(roundDone[round])
				round++
			}
			spare = batch
			if len(batch) > 0 || !p.prepareSleep() {
				continue
			}
			sleeps++
			for {
				_, err := syscall.EpollWait(epfd, evs[:], -1)
				if !errors.Is(err, syscall.EINTR) {
					break
				}
			}
			p.drainWake()
			p.awake()
			select {
			case <-stop:
				consumerErr <- fmt.Errorf("stopped with %d of %d received", total, producers*perProducer)
				return
			default:
			}
		}
		consumerErr <- nil
	}()

	select {
	case err := <-consumerErr:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(4 * time.Second):
		close(stop)
		queued := !p.empty()
		p.kick() // unblock the consumer
		t.Errorf("consumer not done within 4 s (submissions queued while it slept: %v): a lost wake-up", queued)
		<-consumerErr
	}
	wg.Wait()
	if !p.empty() {
		t.Error("submissions left in the pool")
	}
	t.Logf("the consumer slept %d times", sleeps)
}

// TestBatchedDispatchOrder submits every receive, then every send, while the progress
// threads are held, so each side is dispatched as one batch. UCX matches receives of
// one tag in the order they were posted and messages of one endpoint in the order they
// were sent, so message i lands in buffer i only if each batch kept submission order.
func TestBatchedDispatchOrder(t *testing.T) {
	client, server := newTestEngine(t, Options{}), newTestEngine(t, Options{})
	cep, sep, cc, sc := pair(t, client, server)
	ci, err := client.EndpointInfo(cep)
	if err != nil {
		t.Fatal(err)
	}
	si, err := server.EndpointInfo(sep)
	if err != nil {
		t.Fatal(err)
	}

	const n = 256
	size := func(i int) int {
		if i%16 == 15 {
			return 64 << 10 // rendezvous
		}
		return 8 + i%24
	}
	msgs, bufs := make([][]byte, n), make([][]byte, n)
	for i := range n {
		msgs[i] = bytes.Repeat([]byte{byte(i)}, size(i))
		binary.LittleEndian.PutUint64(msgs[i], uint64(i))
		bufs[i] = make([]byte, 64<<10)
	}

	releaseServer := holdProgress(t, server)
	rids := make([]uint64, n)
	for i := range n {
		if rids[i], err = server.TagRecv(sep, addr(bufs[i]), uint64(len(bufs[i])), si.RecvTag, ^uint64(0), 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	releaseClient := holdProgress(t, client)
	sids := make([]uint64, n)
	for i := range n {
		if sids[i], err = client.TagSend(cep, addr(msgs[i]), uint64(len(msgs[i])), ci.SendTag, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	releaseServer()
	releaseClient()

	for i := range n {
		if c := cc.wait(sids[i], 5*time.Second); c.Status != 0 {
			t.Fatalf("send %d: status %d", i, c.Status)
		}
	}
	for i := range n {
		c := sc.wait(rids[i], 5*time.Second)
		if c.Status != 0 {
			t.Fatalf("recv %d: status %d", i, c.Status)
		}
		got := bufs[i][:c.Length]
		if !bytes.Equal(got, msgs[i]) {
			j := -1
			if len(got) >= 8 {
				j = int(binary.LittleEndian.Uint64(got))
			}
			t.Fatalf("buffer %d holds message %d (%d bytes): dispatch reordered the batch", i, j, c.Length)
		}
	}
	runtime.KeepAlive(msgs)
	runtime.KeepAlive(bufs)
}

// BenchmarkPoolPushSwap is the submission path alone: one push per operation, one swap
// per 64 as the progress thread would take them. The mutex dominates; in steady state
// the two alternating slices mean no allocation.
func BenchmarkPoolPushSwap(b *testing.B) {
	p := &pool{wakeFD: -1} // never sleeping, so never written
	spare := make([]submission, 0, 64)
	p.items = make([]submission, 0, 64)
	s := submission{op: opTagSend, ep: 1, addr: 0x1000, size: 8, tag: 42}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.id = uint64(i)
		p.push(s)
		if i++; i%64 == 0 {
			spare = p.swap(spare)
			clear(spare) // as dispatch does
		}
	}
}

// BenchmarkChanPushSwap is the simplest alternative: a buffered channel of
// submissions, drained 64 at a time. Its lock per send and per receive dominates.
func BenchmarkChanPushSwap(b *testing.B) {
	ch := make(chan submission, 64)
	s := submission{op: opTagSend, ep: 1, addr: 0x1000, size: 8, tag: 42}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.id = uint64(i)
		ch <- s
		if i++; i%64 == 0 {
			for range 64 {
				<-ch
			}
		}
	}
}

// BenchmarkSubmitDispatch is one 8-byte message end to end: a receive posted on the
// server, a send on the client, both completions read from the queues. Two progress
// threads and the consumer hand off through eventfds and epoll, and UCX moves the bytes
// over loopback; those wake-ups and system calls dominate, not the Go code, which
// allocates nothing per message (0 allocs/op).
func BenchmarkSubmitDispatch(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"blocking", Options{}},
		{"polling", Options{Mode: Polling}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if tc.opts.Mode == Polling && runtime.NumCPU() < 3 {
				b.Skipf("two spinning progress threads and the consumer need 3 CPUs; %d here", runtime.NumCPU())
			}
			client, server := newTestEngine(b, tc.opts), newTestEngine(b, tc.opts)
			cep, sep, cc, sc := pair(b, client, server)
			ci, err := client.EndpointInfo(cep)
			if err != nil {
				b.Fatal(err)
			}
			msg, buf := make([]byte, 8), make([]byte, 8)
			b.ReportAllocs()
			for b.Loop() {
				rid, err := server.TagRecv(sep, addr(buf), 8, ci.SendTag, ^uint64(0), 0, 0)
				if err != nil {
					b.Fatal(err)
				}
				sid, err := client.TagSend(cep, addr(msg), 8, ci.SendTag, 0, 0)
				if err != nil {
					b.Fatal(err)
				}
				if c := cc.wait(sid, 5*time.Second); c.Status != 0 {
					b.Fatalf("send: status %d", c.Status)
				}
				if c := sc.wait(rid, 5*time.Second); c.Status != 0 || c.Length != 8 {
					b.Fatalf("recv: %+v", c)
				}
			}
			runtime.KeepAlive(msg)
			runtime.KeepAlive(buf)
		})
	}
}
