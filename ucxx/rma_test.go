package ucxx

import (
	"bytes"
	"runtime"
	"testing"
	"time"
	"unsafe"
)

// TestOneSided: over a loopback connection of one worker, memory registered and its
// key packed, unpacked on the connecting endpoint, then put, flush and get, each
// checked in the target memory, and a fence.
func TestOneSided(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx, err := NewContext(nil, FeatureRMA)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	w, err := ctx.NewWorker(false)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.AttachEvents()
	l, err := w.Listen("127.0.0.1", 0, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, err := w.Connect("127.0.0.1", l.Port, 100)
	if err != nil {
		t.Fatal(err)
	}
	conn := progressUntil(t, w, 5*time.Second, func(ev Event) bool { return ev.Kind == EventConnRequest })
	if _, err := w.AcceptEndpoint(conn.Ptr, 200); err != nil {
		t.Fatal(err)
	}
	// A message first, so that the connection's wireup is done before a remote key is
	// unpacked on it (see UnpackRKey).
	// Pinned: UCX writes pong and reads target after the calls that take their
	// addresses, and neither may move (stack) or go (heap) before the test ends.
	var pin runtime.Pinner
	defer pin.Unpin()
	ping, pong := []byte("ping"), make([]byte, 8)
	pin.Pin(&pong[0])
	w.TagRecv(uintptr(unsafe.Pointer(&pong[0])), 8, 9, ^uint64(0), MemoryHost, 50)
	client.TagSend(uintptr(unsafe.Pointer(&ping[0])), 4, 9, MemoryHost, 51)
	progressUntil(t, w, 5*time.Second, func(ev Event) bool { return ev.Kind == EventCompletion && ev.ID == 50 })

	target := make([]byte, 4096) // the "peer's" memory: 8-aligned (Go's allocator)
	pin.Pin(&target[0])
	mh, err := ctx.MemMap(uintptr(unsafe.Pointer(&target[0])), uint64(len(target)), MemoryHost)
	if err != nil {
		t.Fatal(err)
	}
	defer mh.Unmap()
	packed, err := mh.PackRKey()
	if err != nil || len(packed) == 0 {
		t.Fatalf("PackRKey: %d bytes, %v", len(packed), err)
	}
	padded := make([]byte, len(packed)+64<<10) // UCX reads without a length
	copy(padded, packed)
	key, err := client.UnpackRKey(unsafe.Pointer(&padded[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer key.Destroy()
	base := uint64(uintptr(unsafe.Pointer(&target[0])))

	wait := func(id uint64, req unsafe.Pointer, st Status, what string) {
		t.Helper()
		if st == StatusInProgress {
			ev := progressUntil(t, w, 5*time.Second, func(ev Event) bool { return ev.Kind == EventCompletion && ev.ID == id })
			FreeRequest(ev.Ptr)
			st = ev.Status
		} else {
			w.ResetEvents()
		}
		if st != StatusOK {
			t.Fatalf("%s: %v", what, st)
		}
	}
	msg := []byte("one-sided hello")
	req, st := client.Put(uintptr(unsafe.Pointer(&msg[0])), uint64(len(msg)), nil, MemoryHost, base+100, key, 1)
	wait(1, req, st, "put")
	req, st = client.Flush(2)
	wait(2, req, st, "flush")
	if !bytes.Equal(target[100:100+len(msg)], msg) {
		t.Fatalf("target after put: %q", target[100:100+len(msg)])
	}
	got := make([]byte, len(msg))
	req, st = client.Get(uintptr(unsafe.Pointer(&got[0])), uint64(len(got)), nil, MemoryHost, base+100, key, 3)
	wait(3, req, st, "get")
	if !bytes.Equal(got, msg) {
		t.Fatalf("get: %q", got)
	}
	if err := w.Fence(); err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(msg)
	runtime.KeepAlive(got)
	runtime.KeepAlive(padded)
	runtime.KeepAlive(ping)
	runtime.KeepAlive(pong)
}

// BenchmarkMemMap: ucp_mem_map of distinct 1 MiB host buffers (touched, as an
// application's are), each op one registration; unmapped after the timer stops.
func BenchmarkMemMap(b *testing.B) {
	ctx, err := NewContext(nil, FeatureRMA)
	if err != nil {
		b.Fatal(err)
	}
	defer ctx.Close()
	const size = 1 << 20
	bufs := make([][]byte, b.N)
	for i := range bufs {
		bufs[i] = bytes.Repeat([]byte{1}, size)
	}
	handles := make([]*MemHandle, b.N)
	b.ResetTimer()
	for i := range b.N {
		if handles[i], err = ctx.MemMap(uintptr(unsafe.Pointer(&bufs[i][0])), size, MemoryHost); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	for _, h := range handles {
		h.Unmap()
	}
	runtime.KeepAlive(bufs)
}
