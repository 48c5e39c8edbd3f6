package core

import (
	"bytes"
	"errors"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/notifier"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// loopDriver is a test's event loop for a loop-mode engine: a goroutine locked to its
// thread that creates the engine (so owns it), waits in epoll on the engine's PollFD
// and calls Progress when it is readable, and runs functions the test hands it (do),
// which then make their engine calls as the owner.
type loopDriver struct {
	e     *Engine
	calls chan func()
	kick  notifier.EventFD
	quit  bool // owner only
}

// newLoopEngine starts a loop-mode engine on a driver goroutine; the test's cleanup
// shuts it down on its owner.
func newLoopEngine(t testing.TB, opts Options) *loopDriver {
	t.Helper()
	opts.Mode = Loop
	kick, err := notifier.NewEventFD()
	if err != nil {
		t.Fatal(err)
	}
	d := &loopDriver{calls: make(chan func(), 16), kick: kick}
	started := make(chan error, 1)
	go d.run(opts, started)
	if err := <-started; err != nil {
		t.Fatalf("New (loop mode): %v", err)
	}
	engineOpened()
	t.Cleanup(func() {
		var err error
		d.do(func() { err = d.e.Shutdown(5 * time.Second) })
		d.do(func() { d.quit = true })
		if err != nil && err != ErrEngineClosed {
			t.Errorf("Shutdown: %v", err)
			return
		}
		d.e.FreeQueue()
		d.kick.Close()
		engineShut()
	})
	return d
}

func (d *loopDriver) run(opts Options, started chan<- error) {
	runtime.LockOSThread() // the owner is this thread; it exits with the goroutine
	e, err := New(opts)
	if err != nil {
		started <- err
		return
	}
	d.e = e
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		started <- err
		return
	}
	defer syscall.Close(epfd)
	for _, fd := range []int{e.PollFD(), int(d.kick)} {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}
		if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
			started <- err
			return
		}
	}
	started <- nil
	var evs [4]syscall.EpollEvent
	for !d.quit {
		n, err := syscall.EpollWait(epfd, evs[:], 1000)
		if err != nil && !errors.Is(err, syscall.EINTR) {
			panic(err)
		}
		for i := 0; i < n; i++ {
			if evs[i].Fd == int32(d.kick) {
				d.kick.Drain()
				for more := true; more; {
					select {
					case f := <-d.calls:
						f()
					default:
						more = false
					}
				}
			}
		}
		if _, err := e.Progress(); err != nil {
			panic(err)
		}
	}
}

// do runs f on the owner and waits for it.
func (d *loopDriver) do(f func()) {
	done := make(chan struct{})
	d.calls <- func() { f(); close(done) }
	d.kick.Signal()
	<-done
}

// Other threads use a loop-mode engine through the pool, which wakes the owner's loop:
// connect, listen and exchange messages from the test goroutine.
func TestLoopModeOffOwner(t *testing.T) {
	server, client := newLoopEngine(t, Options{}), newLoopEngine(t, Options{})
	cep, sep, cc, sc := pair(t, client.e, server.e)
	exchange(t, client.e, cep, cc, server.e, sep, sc, []byte("to the server"))
	exchange(t, server.e, sep, sc, client.e, cep, cc, []byte("and back"))
	if _, err := client.e.Progress(); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("Progress off the owner: %v, want ErrNotOwner", err)
	}
}

// The owner's own calls dispatch and progress inline: a send and, once the message is
// there, a receive end within their calls (Ticket.Done), with no completion queued.
func TestLoopModeOwnerInline(t *testing.T) {
	opts := Options{InlineWait: 50 * time.Microsecond}
	server, client := newLoopEngine(t, opts), newLoopEngine(t, opts)
	cep, sep, _, _ := pair(t, client.e, server.e)
	sendTag := endpointInfo(t, client.e, cep).SendTag
	recvTag := endpointInfo(t, server.e, sep).RecvTag
	for i := range 200 {
		msg := []byte{byte(i), 1, 2, 3, 4, 5, 6, 7}
		var st Ticket
		var err error
		client.do(func() { st, err = client.e.TagSendInline(cep, addr(msg), 8, sendTag, 0, 0) })
		if err != nil || !st.Done || st.Status != ucxx.StatusOK {
			t.Fatalf("send %d: %+v, %v; want done inline", i, st, err)
		}
		buf := make([]byte, 8)
		var rt Ticket
		deadline := time.Now().Add(5 * time.Second)
		for {
			server.do(func() { rt, err = server.e.TagRecvInline(sep, addr(buf), 8, recvTag, ^uint64(0), 0, 0) })
			if err != nil {
				t.Fatal(err)
			}
			if rt.Done {
				break
			}
			// Not there yet: the receive completes through the queue.
			sc := newCollector(t, server.e)
			rt = Ticket{Done: true, Length: sc.wait(rt.ID, time.Until(deadline)).Length}
			break
		}
		if rt.Length != 8 || !bytes.Equal(buf, msg) {
			t.Fatalf("recv %d: %+v %v, want %v", i, rt, buf, msg)
		}
	}
}

// A connect the owner starts ends without further calls of the owner: a connect to a
// port nobody listens on fails (UCX's error, or the deadline's timer).
func TestLoopModeDeadline(t *testing.T) {
	d := newLoopEngine(t, Options{})
	c := newCollector(t, d.e)
	var id uint64
	var err error
	d.do(func() { id, err = d.e.Connect("127.0.0.1", 1, 300*time.Millisecond) })
	if err != nil {
		t.Fatal(err)
	}
	if comp := c.wait(id, 5*time.Second); comp.Status == 0 {
		t.Fatalf("connect to a closed port succeeded: %+v", comp)
	}
}

// Shutdown off the owner is served by the owner's loop, as any other call.
func TestLoopModeShutdownOffOwner(t *testing.T) {
	d := newLoopEngine(t, Options{})
	if _, err := d.e.WorkerAddress(); err != nil {
		t.Fatal(err)
	}
	if err := d.e.Shutdown(5 * time.Second); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	select {
	case <-d.e.done:
	default:
		t.Fatal("Shutdown returned before the engine stopped")
	}
}

// TestShutdownAfterOwnerThreadEnded: a loop-mode engine whose owner's thread has ended
// (a Python event loop's thread that finished before the interpreter's exit handler
// runs) stops from another thread, inline, instead of waiting out its timeout for a
// loop that is gone (ErrShutdownTimeout, with nothing stopped).
func TestShutdownAfterOwnerThreadEnded(t *testing.T) {
	made := make(chan *Engine, 1)
	failed := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		e, err := New(Options{Mode: Loop})
		if err != nil {
			failed <- err
			return
		}
		made <- e
	}()
	var e *Engine
	select {
	case e = <-made:
	case err := <-failed:
		t.Fatalf("New (loop mode): %v", err)
	}
	engineOpened()
	defer engineShut()
	// The thread's end has no event to wait on: look for it, within a bound.
	for deadline := time.Now().Add(10 * time.Second); !e.ownerGone(); {
		if time.Now().After(deadline) {
			t.Fatal("the owner's thread did not end")
		}
		runtime.Gosched()
	}
	if err := e.Shutdown(5 * time.Second); err != nil {
		t.Fatalf("Shutdown after the owner's thread ended: %v", err)
	}
	if e.ownerGone() {
		t.Fatal("the stop did not run on the calling thread")
	}
	e.FreeQueue()
}

// TestLoopModeHoldsUnexpectedWhenIdle: in loop mode too, a message nobody receives
// leaves UCX's unbounded unexpected queue for the engine's bounded store while the
// owner is idle (unexpected.go).
func TestLoopModeHoldsUnexpectedWhenIdle(t *testing.T) {
	server, client := newLoopEngine(t, Options{}), newLoopEngine(t, Options{})
	cep, _, _, _ := pair(t, client.e, server.e)
	sendTag := endpointInfo(t, client.e, cep).SendTag
	msg := []byte("unasked!")
	var st Ticket
	var err error
	client.do(func() { st, err = client.e.TagSendInline(cep, addr(msg), 8, sendTag, 0, 0) })
	if err != nil {
		t.Fatal(err)
	}
	if !st.Done {
		st = Ticket{Done: true, Status: ucxx.Status(newCollector(t, client.e).wait(st.ID, 5*time.Second).Status)}
	}
	if st.Status != ucxx.StatusOK {
		t.Fatalf("send: %v", st.Status)
	}
	held := func() (n int) {
		server.do(func() { n = len(server.e.unexpected.held) })
		return n
	}
	for deadline := time.Now().Add(5 * time.Second); held() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the unasked message stayed in UCX's queue")
		}
		runtime.Gosched()
	}
}
