package notifier

import (
	"errors"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// newTestQueue makes a queue that is closed and freed when the test ends.
func newTestQueue(t testing.TB, capacity int) *Queue {
	t.Helper()
	q, err := New(capacity)
	if err != nil {
		t.Fatalf("New(%d): %v", capacity, err)
	}
	t.Cleanup(q.Free)
	return q
}

// comp is the completion a test pushes for sequence number i: every field derives
// from i, so a torn or misplaced entry shows.
func comp(i uint64) Completion {
	return Completion{ID: i, Status: -int64(i % 7), Length: i * 3, Tag: ^i}
}

func checkComp(t *testing.T, got Completion, i uint64) {
	t.Helper()
	if want := comp(i); got != want {
		t.Fatalf("entry %d: got %+v, want %+v", i, got, want)
	}
}

func TestCapacityAndLayout(t *testing.T) {
	for _, tc := range []struct{ ask, want int }{
		{-1, 2}, {0, 2}, {1, 2}, {2, 2}, {3, 4}, {5, 8}, {8, 8}, {9, 16}, {1000, 1024},
	} {
		q := newTestQueue(t, tc.ask)
		if got := q.Capacity(); got != tc.want {
			t.Errorf("New(%d).Capacity() = %d, want %d", tc.ask, got, tc.want)
		}
		if got, want := q.Size(), EntriesOffset+tc.want*int(unsafe.Sizeof(Completion{})); got != want {
			t.Errorf("New(%d).Size() = %d, want %d", tc.ask, got, want)
		}
		// The capacity word is part of the layout an in-place consumer reads.
		if got := *(*uint64)(unsafe.Pointer(&q.mem[CapacityOffset])); got != uint64(tc.want) {
			t.Errorf("New(%d): capacity word %d, want %d", tc.ask, got, tc.want)
		}
	}

	q := newTestQueue(t, 5)
	if a := q.Address(); a == 0 || a%uintptr(os.Getpagesize()) != 0 || a != uintptr(unsafe.Pointer(&q.mem[0])) {
		t.Errorf("Address() = %#x: want the page-aligned start of the ring", a)
	}
	if unsafe.Sizeof(Completion{}) != 32 {
		t.Fatalf("Completion is %d bytes; the layout says 32", unsafe.Sizeof(Completion{}))
	}
	fd := q.FD()
	if fd < 0 {
		t.Fatalf("FD() = %d", fd)
	}
	flags, _, errno := syscall.RawSyscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFL, 0)
	if errno != 0 {
		t.Fatalf("fcntl(FD()): %v", errno)
	}
	if flags&syscall.O_NONBLOCK == 0 {
		t.Errorf("FD() is blocking; an event loop needs it non-blocking")
	}

	// An in-place consumer sees head and the entries at the documented offsets.
	if n := q.Push([]Completion{comp(1), comp(2)}); n != 2 {
		t.Fatalf("Push: %d", n)
	}
	if head := *(*uint64)(unsafe.Pointer(&q.mem[HeadOffset])); head != 2 {
		t.Errorf("head word = %d after two pushes", head)
	}
	if e := *(*Completion)(unsafe.Pointer(&q.mem[EntriesOffset+32])); e != comp(2) {
		t.Errorf("second entry in place = %+v, want %+v", e, comp(2))
	}
}

func TestRingWrapAround(t *testing.T) {
	q := newTestQueue(t, 8)
	rng := rand.New(rand.NewPCG(1, 2))
	var in, out uint64 // next value to push, next value expected
	const total = 5000
	batch := make([]Completion, 13)
	dst := make([]Completion, 11)
	for iter := 0; out < total; iter++ {
		if iter > 10*total {
			t.Fatalf("no progress: pushed %d, popped %d", in, out)
		}
		// Push an uneven batch; the ring takes what fits.
		want := 1 + rng.IntN(len(batch))
		for i := range want {
			batch[i] = comp(in + uint64(i))
		}
		free := q.Capacity() - q.Pending()
		n := q.Push(batch[:want])
		if n != min(want, free) {
			t.Fatalf("Push(%d) with %d free wrote %d", want, free, n)
		}
		in += uint64(n)
		if q.Pending() != int(in-out) {
			t.Fatalf("Pending() = %d, want %d", q.Pending(), in-out)
		}
		// Pop an uneven, unrelated amount.
		m := q.Pop(dst[:rng.IntN(len(dst)+1)])
		for i := range m {
			checkComp(t, dst[i], out+uint64(i))
		}
		out += uint64(m)
	}
	if in < 100*uint64(q.Capacity()) {
		t.Fatalf("only %d entries went through: the ring did not wrap often", in)
	}
}

func TestPushWhenFull(t *testing.T) {
	q := newTestQueue(t, 8)
	batch := make([]Completion, 12)
	for i := range batch {
		batch[i] = comp(uint64(i))
	}
	if n := q.Push(batch); n != 8 {
		t.Fatalf("Push(12) into an empty ring of 8 wrote %d", n)
	}
	if n := q.Push(batch[8:]); n != 0 {
		t.Fatalf("Push into a full ring wrote %d", n)
	}
	dst := make([]Completion, 3)
	if n := q.Pop(dst); n != 3 {
		t.Fatalf("Pop: %d", n)
	}
	for i := range 3 {
		checkComp(t, dst[i], uint64(i))
	}
	if n := q.Push(batch[8:]); n != 3 {
		t.Fatalf("Push(4) after popping 3 wrote %d", n)
	}
	if n := q.Push(batch[11:]); n != 0 {
		t.Fatalf("Push into a full ring wrote %d", n)
	}
	dst = make([]Completion, 16)
	if n := q.Pop(dst); n != 8 {
		t.Fatalf("Pop of a full ring: %d", n)
	}
	for i := range 8 {
		checkComp(t, dst[i], uint64(3+i))
	}
	if n := q.Push(batch[11:]); n != 1 {
		t.Fatalf("Push of the last entry: %d", n)
	}
	if n := q.Pop(dst); n != 1 {
		t.Fatalf("Pop: %d", n)
	}
	checkComp(t, dst[0], 11)
	if n := q.Pop(dst); n != 0 {
		t.Fatalf("Pop of an empty ring: %d", n)
	}
}

func TestWakeUpsCoalesce(t *testing.T) {
	q := newTestQueue(t, 64)
	for i := range 20 {
		if n := q.Push([]Completion{comp(uint64(i))}); n != 1 {
			t.Fatalf("Push: %d", n)
		}
		q.Notify()
	}
	// One eventfd write for all twenty notifications: its counter is 1.
	var buf [8]byte
	if n, err := syscall.Read(q.FD(), buf[:]); err != nil || n != 8 {
		t.Fatalf("read eventfd: %d, %v", n, err)
	}
	if v := *(*uint64)(unsafe.Pointer(&buf[0])); v != 1 {
		t.Fatalf("eventfd counter %d after 20 Notify calls, want 1 (coalesced)", v)
	}
	// Put the wake-up back as it was, then consume it the normal way.
	one := uint64(1)
	if _, err := syscall.Write(q.FD(), (*[8]byte)(unsafe.Pointer(&one))[:]); err != nil {
		t.Fatal(err)
	}
	if r, err := q.Wait(time.Second); r != Ready || err != nil {
		t.Fatalf("Wait = %v, %v; want Ready", r, err)
	}
	if r, err := q.Wait(20 * time.Millisecond); r != Timeout || err != nil {
		t.Fatalf("second Wait = %v, %v; want Timeout (no extra wake-up pending)", r, err)
	}
	dst := make([]Completion, 64)
	if n := q.Pop(dst); n != 20 {
		t.Fatalf("Pop: %d, want 20", n)
	}
	// Notifying with nothing new pending wakes nobody.
	q.Notify()
	if r, err := q.Wait(20 * time.Millisecond); r != Timeout || err != nil {
		t.Fatalf("Wait after drain = %v, %v; want Timeout", r, err)
	}
	// The next push after draining wakes the consumer again.
	q.Push([]Completion{comp(20)})
	q.Notify()
	q.Notify()
	if r, err := q.Wait(time.Second); r != Ready || err != nil {
		t.Fatalf("Wait after new push = %v, %v; want Ready", r, err)
	}
	if r, _ := q.Wait(20 * time.Millisecond); r != Timeout {
		t.Fatalf("Wait = %v; want Timeout", r)
	}
}

func TestNotifyWithNothingPending(t *testing.T) {
	q := newTestQueue(t, 8)
	q.Notify()
	if r, err := q.Wait(20 * time.Millisecond); r != Timeout || err != nil {
		t.Fatalf("Wait = %v, %v; want Timeout", r, err)
	}
	if r, err := q.Wait(0); r != Timeout || err != nil {
		t.Fatalf("Wait(0) = %v, %v; want Timeout", r, err)
	}
}

// waitInSyscall waits until thread tid sleeps in epoll_wait, so a test exercises the
// path that wakes a blocked waiter rather than the one that never blocks. Where /proc
// does not say, it returns at once: the test stays correct, only less sharp.
func waitInSyscall(t *testing.T, tid int) {
	t.Helper()
	path := "/proc/self/task/" + strconv.Itoa(tid) + "/syscall"
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Logf("cannot tell whether Wait blocked: %v", err)
			return
		}
		nr, _, _ := strings.Cut(string(b), " ")
		if nr == strconv.Itoa(syscall.SYS_EPOLL_WAIT) || nr == strconv.Itoa(syscall.SYS_EPOLL_PWAIT) {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("thread %d never blocked in epoll_wait", tid)
}

func TestCloseUnblocksWait(t *testing.T) {
	q, err := New(8)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Free()
	q.Push([]Completion{comp(1), comp(2)}) // pushed, not notified

	type result struct {
		r   WaitResult
		err error
	}
	tids := make(chan int, 1)
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tids <- syscall.Gettid()
		r, err := q.Wait(-1)
		done <- result{r, err}
	}()
	waitInSyscall(t, <-tids)
	if err := q.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case res := <-done:
		if res.r != Closed || res.err != nil {
			t.Fatalf("blocked Wait returned %v, %v; want Closed, nil", res.r, res.err)
		}
	case <-time.After(time.Second):
		t.Fatal("Close did not unblock Wait within 1 s")
	}

	if err := q.Close(); !errors.Is(err, os.ErrClosed) || !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v; want an error wrapping os.ErrClosed", err)
	}
	if r, err := q.Wait(time.Second); r != Closed || err != nil {
		t.Fatalf("Wait after Close = %v, %v; want Closed at once", r, err)
	}
	dst := make([]Completion, 8)
	if n := q.Pop(dst); n != 2 {
		t.Fatalf("Pop after Close: %d entries, want the 2 pushed before", n)
	}
	checkComp(t, dst[0], 1)
	checkComp(t, dst[1], 2)

	q.Free()
	q.Free() // harmless
	if r, err := q.Wait(time.Second); r != Closed || !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait after Free = %v, %v; want Closed, ErrClosed", r, err)
	}
}

// TestCloseAfterFree: Close on a freed queue should return ErrClosed like a second
// Close, as Wait after Free does. It dereferences the unmapped ring instead.
func TestCloseAfterFree(t *testing.T) {
	q, err := New(8)
	if err != nil {
		t.Fatal(err)
	}
	q.Free()
	if err := q.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Close after Free = %v; want ErrClosed", err)
	}
}

// TestFreeWhileWaiting: Free on one goroutine while another waits, blocked in Wait or
// calling it again and again (as a consumer that outlived a shutdown that gave up
// does), or while one waits blocked and another empties the eventfd (ConsumeWake,
// which may take Free's kick): each waiter wakes with ErrClosed, Free returns, and
// nobody reads the unmapped ring. Before Free waited for its readers, this faulted
// (SIGSEGV) within a few hundred rounds.
func TestFreeWhileWaiting(t *testing.T) {
	for round := range 3000 {
		q, err := New(8)
		if err != nil {
			t.Fatal(err)
		}
		mode := round % 3 // 0: one blocked Wait; 1: Wait(0) again and again; 2: a blocked Wait and ConsumeWake
		left := make(chan error, 1)
		go func() {
			for {
				timeout := time.Duration(0)
				if mode != 1 {
					timeout = -1
				}
				_, err := q.Wait(timeout)
				if errors.Is(err, ErrClosed) {
					left <- nil
					return
				}
				if err != nil {
					left <- err
					return
				}
			}
		}()
		stop := make(chan struct{})
		consumed := make(chan struct{})
		go func() {
			defer close(consumed)
			for mode == 2 {
				select {
				case <-stop:
					return
				default:
					q.ConsumeWake()
				}
			}
		}()
		freed := make(chan struct{})
		go func() { q.Free(); close(freed) }()
		select {
		case err := <-left:
			if err != nil {
				t.Fatalf("round %d: Wait racing Free: %v", round, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d (mode %d): a Wait did not wake when Free ran", round, mode)
		}
		select {
		case <-freed:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d (mode %d): Free did not return", round, mode)
		}
		close(stop)
		<-consumed
		if q.ConsumeWake() {
			t.Fatal("ConsumeWake after Free reported a wake-up")
		}
		if err := q.Close(); !errors.Is(err, ErrClosed) {
			t.Fatalf("Close after Free = %v; want ErrClosed", err)
		}
	}
}

func TestConcurrentProducerConsumer(t *testing.T) {
	const n = 200000
	q := newTestQueue(t, 1024)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	var producerErr, consumerErr error
	go func() { // producer: uneven batches, retrying the part that did not fit
		defer wg.Done()
		rng := rand.New(rand.NewPCG(3, 4))
		batch := make([]Completion, 48)
		next := uint64(0)
		for next < n {
			k := min(uint64(1+rng.IntN(len(batch))), n-next)
			for i := range k {
				batch[i] = comp(next + i)
			}
			pending := batch[:k]
			for len(pending) > 0 {
				w := q.Push(pending)
				pending = pending[w:]
				q.Notify()
				if len(pending) > 0 {
					select {
					case <-stop:
						producerErr = errors.New("stopped while the ring was full")
						return
					default:
						runtime.Gosched()
					}
				}
			}
			next += k
		}
	}()
	go func() { // consumer: sleeps in Wait, drains the ring on each Ready
		defer wg.Done()
		dst := make([]Completion, 300)
		next := uint64(0)
		for next < n {
			r, err := q.Wait(-1)
			if err != nil || r == Closed {
				consumerErr = errors.New("stopped: a wake-up was lost or the test timed out at " + strconv.FormatUint(next, 10))
				return
			}
			for {
				m := q.Pop(dst)
				if m == 0 {
					break
				}
				for i := range m {
					if want := comp(next + uint64(i)); dst[i] != want {
						consumerErr = errors.New("out of order: got id " + strconv.FormatUint(dst[i].ID, 10) + ", want " + strconv.FormatUint(want.ID, 10))
						return
					}
				}
				next += uint64(m)
			}
		}
	}()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(4 * time.Second):
		close(stop)
		q.Close() // unblocks the consumer
		<-finished
		t.Fatalf("not finished within 4 s (producer: %v, consumer: %v)", producerErr, consumerErr)
	}
	if producerErr != nil || consumerErr != nil {
		t.Fatalf("producer: %v, consumer: %v", producerErr, consumerErr)
	}
	if p := q.Pending(); p != 0 {
		t.Fatalf("%d entries left over", p)
	}
}

// TestConcurrentPushPanics trips the race detector's stand-in: a Push that finds
// another Push in progress panics. Two real goroutines overlap only by chance, so
// another Push in progress is simulated by holding the producer count.
func TestConcurrentPushPanics(t *testing.T) {
	q := newTestQueue(t, 8)
	q.producer.Store(1) // a Push is running elsewhere
	defer func() {
		r := recover()
		msg, _ := r.(string)
		if !strings.HasPrefix(msg, "notifier: ") {
			t.Fatalf("concurrent Push: recovered %v; want a panic starting with \"notifier: \"", r)
		}
		if q.Pending() != 0 {
			t.Fatalf("the refused Push wrote %d entries", q.Pending())
		}
	}()
	q.Push([]Completion{comp(1)})
	t.Fatal("concurrent Push did not panic")
}

// BenchmarkPushPop moves batches of 64 through the ring with no wake-up. It is
// memory traffic only: copying 64×32 bytes in and out and four atomic loads/stores
// per batch dominate; there are no system calls and no allocations.
func BenchmarkPushPop(b *testing.B) {
	q := newTestQueue(b, 1024)
	batch := make([]Completion, 64)
	for i := range batch {
		batch[i] = comp(uint64(i))
	}
	dst := make([]Completion, 64)
	b.ReportAllocs()
	b.SetBytes(int64(len(batch)) * int64(unsafe.Sizeof(Completion{})))
	for b.Loop() {
		if q.Push(batch) != 64 || q.Pop(dst) != 64 {
			b.Fatal("short batch")
		}
	}
}

// BenchmarkPushNotifyWaitPop adds the wake-up to each batch: the eventfd write in
// Notify, epoll_wait and the eventfd read in Wait. The three system calls dominate,
// by far, the copying that BenchmarkPushPop measures.
func BenchmarkPushNotifyWaitPop(b *testing.B) {
	q := newTestQueue(b, 1024)
	batch := make([]Completion, 64)
	dst := make([]Completion, 64)
	b.ReportAllocs()
	for b.Loop() {
		q.Push(batch)
		q.Notify()
		if r, _ := q.Wait(time.Second); r != Ready {
			b.Fatalf("Wait = %v", r)
		}
		if q.Pop(dst) != 64 {
			b.Fatal("short batch")
		}
	}
}

// BenchmarkChanPushPop is the simplest alternative: a buffered channel carrying the
// same batches one completion at a time. Its per-item lock and copy dominate.
func BenchmarkChanPushPop(b *testing.B) {
	ch := make(chan Completion, 1024)
	batch := make([]Completion, 64)
	dst := make([]Completion, 64)
	b.ReportAllocs()
	b.SetBytes(int64(len(batch)) * int64(unsafe.Sizeof(Completion{})))
	for b.Loop() {
		for _, c := range batch {
			ch <- c
		}
		for i := range dst {
			dst[i] = <-ch
		}
	}
}

// TestConsumeWakeKeepsLaterKicks: after a consumer acknowledges a wake-up with
// ConsumeWake, the next push must kick the eventfd again. Clearing the wake flag
// before emptying the eventfd (the order a consumer might naively pick) loses this
// kick when a push lands in between, and the consumer then sleeps forever.
func TestConsumeWakeKeepsLaterKicks(t *testing.T) {
	q, err := New(8)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Free()
	buf := make([]Completion, 8)
	for round := 0; round < 100; round++ {
		q.Push([]Completion{{ID: uint64(round)}})
		q.Notify()
		if !q.ConsumeWake() {
			t.Fatalf("round %d: no wake-up pending after Push+Notify", round)
		}
		if n := q.Pop(buf); n != 1 || buf[0].ID != uint64(round) {
			t.Fatalf("round %d: popped %d entries", round, n)
		}
	}
	// The interleaving that loses a wake-up when the flag is cleared first: a push and
	// its kick land after the clear and before the eventfd is emptied.
	q.Push([]Completion{{ID: 1000}})
	q.Notify() // wake 0->1, kick
	if !q.ConsumeWake() {
		t.Fatal("no wake-up pending")
	}
	q.Pop(buf)
	q.Push([]Completion{{ID: 1001}})
	q.Notify()
	if r, _ := q.Wait(time.Second); r != Ready {
		t.Fatalf("Wait after ConsumeWake and a new push = %v; want Ready", r)
	}
	if q.Pending() != 1 {
		t.Fatalf("pending = %d; want 1", q.Pending())
	}
}
