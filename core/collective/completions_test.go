package collective

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestRecvHoldsItsBuffer: a receive's buffer that only the request refers to lives
// until the message lands. The engine takes addresses, which the garbage collector
// does not see: a buffer collected under a request is memory UCX writes after Go has
// reused it (AddressSanitizer caught a bootstrap send reading a collected buffer).
func TestRecvHoldsItsBuffer(t *testing.T) {
	comms := formed(t, 2)
	want := bytes.Repeat([]byte("held"), 1024)
	collected := make(chan struct{}, 1)
	received := make(chan error, 1)
	go func() {
		b := make([]byte, len(want))
		runtime.AddCleanup(&b[0], func(ch chan struct{}) { ch <- struct{}{} }, collected)
		n, err := comms[1].Recv(0, 3, b) // nothing here refers to b after the call
		if err == nil && n != len(want) {
			err = fmt.Errorf("received %d bytes, want %d", n, len(want))
		}
		received <- err
	}()
	// Collect repeatedly while the receive waits: its buffer must survive.
	for range 20 {
		runtime.GC()
		runtime.Gosched()
		select {
		case <-collected:
			t.Fatal("the receive's buffer was collected while the receive was posted")
		default:
		}
	}
	if err := comms[0].Send(1, 3, want); err != nil {
		t.Fatal(err)
	}
	if err := <-received; err != nil {
		t.Fatal(err)
	}
	// Once the receive ended, nothing holds the buffer: it is collected (this proves
	// the check above can see a collection).
	deadline := time.After(10 * time.Second)
	for {
		runtime.GC()
		select {
		case <-collected:
			return
		case <-deadline:
			t.Fatal("the receive's buffer was never collected after the receive ended")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
