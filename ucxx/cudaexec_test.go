package ucxx

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"unsafe"
)

// addOnePTX is testdata/add_one.ptx: a kernel, in PTX, that adds 1 to each of n
// 32-bit words at data (add_one(data, n)).
func addOnePTX(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/add_one.ptx")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCUDAExec: a kernel from PTX launched on a stream of ours, held back by another
// stream it waits for through an event, which itself waits on a host word the test
// releases; timing events measure it; a stream stores a word the host reads.
func TestCUDAExec(t *testing.T) {
	d := needCUDA(t)
	c, gateDev, gate := heldGate(t, d)
	const n = 1000
	err := c.Use(func() error {
		mod, err := d.LoadModule(addOnePTX(t))
		if err != nil {
			return err
		}
		defer mod.Unload()
		fn, err := mod.Function("add_one")
		if err != nil {
			return err
		}
		if _, err := mod.Function("no_such_kernel"); err == nil {
			t.Error("a kernel the module lacks was found")
		}
		a, err := d.NewStream()
		if err != nil {
			return err
		}
		defer a.Destroy()
		b, err := d.NewStream()
		if err != nil {
			return err
		}
		defer b.Destroy()
		data, err := d.MemAlloc(4 * n)
		if err != nil {
			return err
		}
		defer d.MemFree(data)
		host := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(host[4*i:], uint32(i))
		}
		if err := d.CopyToDevice(data, host); err != nil {
			return err
		}
		start, err := d.NewEvent(true)
		if err != nil {
			return err
		}
		defer start.Destroy()
		stop, err := d.NewEvent(true)
		if err != nil {
			return err
		}
		defer stop.Destroy()
		// a: wait for the gate, then add one; b: wait for a's event, then add one.
		if err := d.StreamWaitAtLeast(a.Handle(), gateDev, 1); err != nil {
			return err
		}
		if err := start.Record(a.Handle()); err != nil {
			return err
		}
		shape := LaunchShape{Grid: [3]uint32{(n + 255) / 256, 1, 1}, Block: [3]uint32{256, 1, 1}}
		if err := fn.Launch(shape, a.Handle(), []uint64{uint64(data), n}); err != nil {
			return err
		}
		if err := stop.Record(a.Handle()); err != nil {
			return err
		}
		if err := d.StreamWaitEvent(b.Handle(), stop); err != nil {
			return err
		}
		if err := fn.Launch(shape, b.Handle(), []uint64{uint64(data), n}); err != nil {
			return err
		}
		if err := d.StreamWriteWord(b.Handle(), gateDev, 7); err != nil {
			return err
		}
		if done, err := b.Done(); err != nil || done {
			t.Errorf("stream b done %v (%v) while the stream it waits for is held", done, err)
		}
		gate.Store(1)
		if err := b.Sync(); err != nil {
			return err
		}
		if err := d.CopyFromDevice(host, data); err != nil {
			return err
		}
		for i := range n {
			if v := binary.LittleEndian.Uint32(host[4*i:]); v != uint32(i)+2 {
				t.Fatalf("word %d: %d, want %d", i, v, i+2)
			}
		}
		if took, err := Elapsed(start, stop); err != nil || took <= 0 {
			t.Errorf("Elapsed: %v, %v", took, err)
		}
		if v := gate.Load(); v != 7 {
			t.Errorf("the word the stream stored: %d, want 7", v)
		}
		if err := fn.Launch(shape, b.Handle(), make([]uint64, MaxKernelArgs+1)); err == nil {
			t.Error("a launch with too many arguments was taken")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStreamWordOps: one batch of waits and stores holds its stream until every awaited
// word has reached its value, then stores in order; more ops than one driver call
// takes go in several; the host sees the stores only after the last gate opens.
func TestStreamWordOps(t *testing.T) {
	d := needCUDA(t)
	c, err := d.RetainPrimary(0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	const words = MaxStreamWordOps + 6 // two gates, the rest stores: two driver calls
	mem := CAllocPage(8 * words)
	defer CFree(mem)
	w := func(i int) *uint64 { return (*uint64)(unsafe.Add(mem, 8*i)) }
	err = c.Use(func() error {
		dev, err := d.MapHost(uintptr(mem), 8*words)
		if err != nil {
			return err
		}
		defer d.UnmapHost(uintptr(mem))
		s, err := d.NewStream()
		if err != nil {
			return err
		}
		defer s.Destroy()
		ops := []StreamWordOp{{Wait: true, Addr: dev, Value: 3}, {Wait: true, Addr: dev + 8, Value: 1}}
		for i := 2; i < words; i++ {
			ops = append(ops, StreamWordOp{Addr: dev + uintptr(8*i), Value: uint64(100 + i)})
		}
		var scratch []uint64
		if n, err := d.StreamWordOps(s.Handle(), ops, &scratch); err != nil || n != len(ops) {
			return fmt.Errorf("StreamWordOps queued %d of %d: %v", n, len(ops), err)
		}
		atomic.StoreUint64(w(0), 2) // below the wait's value: still held
		atomic.StoreUint64(w(1), 1)
		if done, err := s.Done(); err != nil || done {
			t.Errorf("stream done %v (%v) while a wait's word is below its value", done, err)
		}
		if v := atomic.LoadUint64(w(2)); v != 0 {
			t.Errorf("a store ran before the waits: word 2 is %d", v)
		}
		atomic.StoreUint64(w(0), 5) // at least the value: released
		if err := s.Sync(); err != nil {
			return err
		}
		for i := 2; i < words; i++ {
			if v := atomic.LoadUint64(w(i)); v != uint64(100+i) {
				t.Errorf("word %d: %d, want %d", i, v, 100+i)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
