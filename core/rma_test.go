package core

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// One-sided transfers and semaphores over a loopback pair: the server registers
// memory and packs keys, the client unpacks them and puts, gets and signals.

type rmaPair struct {
	client, server *Engine
	cep, sep       uint64
	cc, sc         *collector
}

func newRMAPair(t *testing.T) *rmaPair {
	t.Helper()
	p := &rmaPair{client: newTestEngine(t, Options{OneSided: true}), server: newTestEngine(t, Options{OneSided: true})}
	p.cep, p.sep, p.cc, p.sc = pair(t, p.client, p.server)
	return p
}

// share registers buf on the server and unpacks its packed key on the client.
func (p *rmaPair) share(t *testing.T, buf []byte) (region uint64, key RemoteKeyInfo) {
	t.Helper()
	region, err := p.server.RegisterMemory(addr(buf), uint64(len(buf)), MemHost)
	if err != nil {
		t.Fatal(err)
	}
	packed, err := p.server.PackRegion(region, addr(buf), uint64(len(buf)))
	if err != nil {
		t.Fatal(err)
	}
	key, err = p.client.UnpackKey(p.cep, addr(packed), len(packed))
	if err != nil {
		t.Fatal(err)
	}
	if key.Semaphore || key.Length != uint64(len(buf)) || key.Address != uint64(addr(buf)) {
		t.Fatalf("unpacked %+v for %d bytes at %#x", key, len(buf), addr(buf))
	}
	return region, key
}

func (p *rmaPair) ok(t *testing.T, id uint64, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if c := p.cc.wait(id, 10*time.Second); c.Status != 0 {
		t.Fatalf("%s: %v", what, ucxx.Status(c.Status))
	}
}

func TestPutGetFlush(t *testing.T) {
	p := newRMAPair(t)
	target := make([]byte, 1<<20)
	_, key := p.share(t, target)

	msg := bytes.Repeat([]byte("put!"), 1000)
	id, err := p.client.Put(p.cep, Transfer{Key: key.ID, Offset: 4096, Addr: addr(msg), Size: uint64(len(msg)), MemType: MemHost}, 0)
	p.ok(t, id, err, "put")
	id, err = p.client.Flush(p.cep)
	p.ok(t, id, err, "flush")
	if !bytes.Equal(target[4096:4096+len(msg)], msg) {
		t.Fatal("the put's bytes are not in the target after the flush")
	}

	got := make([]byte, len(msg))
	id, err = p.client.Get(p.cep, Transfer{Key: key.ID, Offset: 4096, Addr: addr(got), Size: uint64(len(got)), MemType: MemHost}, 0)
	p.ok(t, id, err, "get")
	if !bytes.Equal(got, msg) {
		t.Fatal("get read other bytes")
	}

	// A local buffer registered on the client side, used by region id.
	big := bytes.Repeat([]byte{7}, 1<<20)
	local, err := p.client.RegisterMemory(addr(big), uint64(len(big)), MemHost)
	if err != nil {
		t.Fatal(err)
	}
	id, err = p.client.Put(p.cep, Transfer{Key: key.ID, Addr: addr(big), Size: uint64(len(big)), MemType: MemHost, Region: local}, 0)
	p.ok(t, id, err, "put from a registered buffer")
	id, err = p.client.Flush(p.cep)
	p.ok(t, id, err, "flush")
	if !bytes.Equal(target, big) {
		t.Fatal("1 MiB put differs")
	}
}

func TestPutMany(t *testing.T) {
	p := newRMAPair(t)
	target := make([]byte, 64<<10)
	_, key := p.share(t, target)
	const n = 16
	srcs := make([][]byte, n)
	desc := make([]byte, n*TransferDescriptorSize)
	for i := range srcs {
		srcs[i] = bytes.Repeat([]byte{byte(i + 1)}, 4096)
		w := desc[i*TransferDescriptorSize:]
		binary.LittleEndian.PutUint64(w, key.ID)
		binary.LittleEndian.PutUint64(w[8:], uint64(i*4096))
		binary.LittleEndian.PutUint64(w[16:], uint64(addr(srcs[i])))
		binary.LittleEndian.PutUint64(w[24:], 4096)
		binary.LittleEndian.PutUint64(w[32:], uint64(MemHost))
	}
	id, err := p.client.PutMany(p.cep, addr(desc), n)
	p.ok(t, id, err, "put_many")
	id, err = p.client.Flush(p.cep)
	p.ok(t, id, err, "flush")
	for i := range n {
		if !bytes.Equal(target[i*4096:(i+1)*4096], srcs[i]) {
			t.Fatalf("transfer %d not in place", i)
		}
	}
}

// TestTransfersOutOfRange: a transfer past its key's range, of zero bytes, with a
// released or unknown key, or with a local region not covering the buffer, fails with
// InvalidParam and nothing moves, not even the transfers before it in a PutMany.
func TestTransfersOutOfRange(t *testing.T) {
	p := newRMAPair(t)
	target := make([]byte, 4096)
	_, key := p.share(t, target)
	src := bytes.Repeat([]byte{9}, 8192)
	other := make([]byte, 64)
	otherRegion, err := p.client.RegisterMemory(addr(other), uint64(len(other)), MemHost)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		t    Transfer
	}{
		{"past the end", Transfer{Key: key.ID, Offset: 4000, Addr: addr(src), Size: 200}},
		{"offset past the end", Transfer{Key: key.ID, Offset: 1 << 40, Addr: addr(src), Size: 1}},
		{"wrapping", Transfer{Key: key.ID, Offset: 1, Addr: addr(src), Size: ^uint64(0)}},
		{"zero bytes", Transfer{Key: key.ID, Addr: addr(src), Size: 0}},
		{"unknown key", Transfer{Key: 1 << 50, Addr: addr(src), Size: 8}},
		{"region not covering", Transfer{Key: key.ID, Addr: addr(src), Size: 8, Region: otherRegion}},
	} {
		id, err := p.client.Put(p.cep, c.t, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if st := ucxx.Status(p.cc.wait(id, 5*time.Second).Status); st != ucxx.StatusInvalidParam {
			t.Fatalf("%s: %v, want InvalidParam", c.name, st)
		}
	}
	desc := make([]byte, 2*TransferDescriptorSize)
	for i, off := range []uint64{0, 4090} { // the second is out of range
		w := desc[i*TransferDescriptorSize:]
		binary.LittleEndian.PutUint64(w, key.ID)
		binary.LittleEndian.PutUint64(w[8:], off)
		binary.LittleEndian.PutUint64(w[16:], uint64(addr(src)))
		binary.LittleEndian.PutUint64(w[24:], 100)
	}
	id, err := p.client.PutMany(p.cep, addr(desc), 2)
	if err != nil {
		t.Fatal(err)
	}
	if st := ucxx.Status(p.cc.wait(id, 5*time.Second).Status); st != ucxx.StatusInvalidParam {
		t.Fatalf("put_many with one out of range: %v", st)
	}
	id, err = p.client.Flush(p.cep)
	p.ok(t, id, err, "flush")
	if !bytes.Equal(target, make([]byte, len(target))) {
		t.Fatal("a refused transfer wrote into the target")
	}
	if _, err := p.client.PutMany(p.cep, addr(desc), 0); !errors.Is(err, ErrBadDescriptors) {
		t.Fatalf("PutMany of 0: %v", err)
	}
}

func TestRegistrationCache(t *testing.T) {
	e := newTestEngine(t, Options{OneSided: true})
	buf := make([]byte, 1<<20)
	a, err := e.RegisterMemory(addr(buf), uint64(len(buf)), MemHost)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.RegisterMemory(addr(buf[4096:]), 8192, MemHost) // within: a hit
	if err != nil || b != a {
		t.Fatalf("register within = %d, %v; want the region %d", b, err, a)
	}
	if n, _ := e.RegionCount(); n != 1 {
		t.Fatalf("%d regions, want 1", n)
	}
	if _, err := e.PackRegion(a, addr(buf[len(buf)-8:]), 16); !errors.Is(err, ErrBadRange) {
		t.Fatalf("pack past the region: %v", err)
	}
	for range 2 {
		if err := e.ReleaseMemory(a); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := e.RegionCount(); n != 0 {
		t.Fatalf("%d regions after the last release, want 0", n)
	}
	if err := e.ReleaseMemory(a); !errors.Is(err, ErrNoRegion) {
		t.Fatalf("release of a released region: %v", err)
	}
	if _, err := e.RegisterMemory(addr(buf), 0, MemHost); !errors.Is(err, ErrBadRange) {
		t.Fatalf("register 0 bytes: %v", err)
	}
}

func TestPackedKeyParsing(t *testing.T) {
	good := appendPackedKey(nil, packedKey{kind: keyRegion, memType: MemHost, addr: 4096, length: 100, rkey: []byte{1, 2, 3}})
	if k, err := parsePackedKey(good); err != nil || k.addr != 4096 || k.length != 100 || !bytes.Equal(k.rkey, []byte{1, 2, 3}) {
		t.Fatalf("parse good key: %+v, %v", k, err)
	}
	bad := map[string]func(b []byte) []byte{
		"short":             func(b []byte) []byte { return b[:20] },
		"magic":             func(b []byte) []byte { b[0] = 'X'; return b },
		"kind":              func(b []byte) []byte { b[4] = 9; return b },
		"memory type":       func(b []byte) []byte { b[5] = 7; return b },
		"padding":           func(b []byte) []byte { b[6] = 1; return b },
		"wrapping range":    func(b []byte) []byte { binary.LittleEndian.PutUint64(b[16:], ^uint64(0)); return b },
		"rkey length long":  func(b []byte) []byte { binary.LittleEndian.PutUint32(b[24:], 4); return b },
		"rkey length short": func(b []byte) []byte { binary.LittleEndian.PutUint32(b[24:], 2); return b },
		"rkey missing":      func(b []byte) []byte { binary.LittleEndian.PutUint32(b[24:], 0); return b[:packedKeyHeader] },
		"semaphore of 16":   func(b []byte) []byte { b[4] = byte(keySemaphore); binary.LittleEndian.PutUint64(b[16:], 16); return b },
		"oversized":         func(b []byte) []byte { return append(b, make([]byte, MaxPackedKey)...) },
	}
	for name, mutate := range bad {
		if _, err := parsePackedKey(mutate(append([]byte(nil), good...))); !errors.Is(err, ErrBadKey) {
			t.Errorf("%s: %v, want ErrBadKey", name, err)
		}
	}
}

// FuzzPackedKey: no input crashes the parser, and one it accepts re-encodes to
// itself.
func FuzzPackedKey(f *testing.F) {
	f.Add(appendPackedKey(nil, packedKey{kind: keyRegion, memType: MemHost, addr: 4096, length: 100, rkey: []byte{1, 2, 3}}))
	f.Add(appendPackedKey(nil, packedKey{kind: keySemaphore, memType: MemHost, addr: 64, length: 8, rkey: []byte{9}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := parsePackedKey(b)
		if err != nil {
			return
		}
		if again := appendPackedKey(nil, k); !bytes.Equal(again, b) {
			t.Fatalf("accepted key re-encodes differently")
		}
	})
}

func TestSemaphores(t *testing.T) {
	p := newRMAPair(t)
	sem, err := p.server.NewSemaphore(p.sep)
	if err != nil {
		t.Fatal(err)
	}
	packed, err := p.server.PackSemaphore(sem)
	if err != nil {
		t.Fatal(err)
	}
	key, err := p.client.UnpackKey(p.cep, addr(packed), len(packed))
	if err != nil || !key.Semaphore {
		t.Fatalf("unpack semaphore key: %+v, %v", key, err)
	}
	// A wait posted first completes when the signal lands; one for a value reached
	// already completes at once.
	w1, err := p.server.WaitSemaphore(sem, 3)
	if err != nil {
		t.Fatal(err)
	}
	noCompletion(t, p.sc, w1)
	id, err := p.client.Signal(p.cep, key.ID, 1)
	p.ok(t, id, err, "signal 1")
	id, err = p.client.Signal(p.cep, key.ID, 2)
	p.ok(t, id, err, "signal 2")
	if c := p.sc.wait(w1, 5*time.Second); c.Status != 0 || c.Length != 3 {
		t.Fatalf("wait for 3: %+v", c)
	}
	w2, _ := p.server.WaitSemaphore(sem, 2)
	if c := p.sc.wait(w2, 5*time.Second); c.Status != 0 || c.Length != 3 {
		t.Fatalf("wait for a value reached: %+v", c)
	}
	if v, err := p.server.SemaphoreValue(sem); err != nil || v != 3 {
		t.Fatalf("value %d, %v", v, err)
	}

	// Put with signal: data put before a signal is in place when the wait ends.
	target := make([]byte, 256<<10)
	_, dkey := p.share(t, target)
	src := bytes.Repeat([]byte{0x5a}, len(target))
	w3, _ := p.server.WaitSemaphore(sem, 4)
	id, err = p.client.Put(p.cep, Transfer{Key: dkey.ID, Addr: addr(src), Size: uint64(len(src)), MemType: MemHost}, 0)
	if err != nil {
		t.Fatal(err)
	}
	sid, err := p.client.Signal(p.cep, key.ID, 1)
	p.ok(t, id, nil, "put before the signal")
	p.ok(t, sid, err, "signal after the put")
	if c := p.sc.wait(w3, 5*time.Second); c.Status != 0 {
		t.Fatalf("wait after put: %+v", c)
	}
	if !bytes.Equal(target, src) {
		t.Fatal("the wait ended before the put before the signal landed")
	}

	// A cancelled wait ends Canceled; a semaphore key used as a region's is refused.
	w4, _ := p.server.WaitSemaphore(sem, 100)
	if err := p.server.Cancel(w4); err != nil {
		t.Fatal(err)
	}
	if st := ucxx.Status(p.sc.wait(w4, 5*time.Second).Status); st != ucxx.StatusCanceled {
		t.Fatalf("cancelled wait: %v", st)
	}
	id, _ = p.client.Put(p.cep, Transfer{Key: key.ID, Addr: addr(src), Size: 8, MemType: MemHost}, 0)
	if st := ucxx.Status(p.cc.wait(id, 5*time.Second).Status); st != ucxx.StatusInvalidParam {
		t.Fatalf("put through a semaphore's key: %v", st)
	}

	// The endpoint failing ends a pending wait with its status.
	w5, _ := p.server.WaitSemaphore(sem, 100)
	if err := p.client.AbortEndpoint(p.cep); err != nil {
		t.Fatal(err)
	}
	if st := ucxx.Status(p.sc.wait(w5, 10*time.Second).Status); st == ucxx.StatusOK {
		t.Fatal("a wait on a semaphore whose peer went away succeeded")
	}
}

// TestSemaphoreWaitEndsOnRelease: releasing a semaphore ends its waits Canceled, and
// its id is gone.
func TestSemaphoreWaitEndsOnRelease(t *testing.T) {
	p := newRMAPair(t)
	sem, err := p.server.NewSemaphore(p.sep)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := p.server.WaitSemaphore(sem, 1)
	if err := p.server.ReleaseSemaphore(sem); err != nil {
		t.Fatal(err)
	}
	if st := ucxx.Status(p.sc.wait(w, 5*time.Second).Status); st != ucxx.StatusCanceled {
		t.Fatalf("wait on a released semaphore: %v", st)
	}
	if _, err := p.server.SemaphoreValue(sem); !errors.Is(err, ErrNoSemaphore) {
		t.Fatalf("value of a released semaphore: %v", err)
	}
}

// TestShutdownEndsSemaphoreWaits: a wait pending at shutdown ends Canceled (its
// endpoint's teardown ends it), and the shutdown does not wait for it.
func TestShutdownEndsSemaphoreWaits(t *testing.T) {
	p := newRMAPair(t)
	sem, err := p.server.NewSemaphore(p.sep)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := p.server.WaitSemaphore(sem, 1)
	start := time.Now()
	if err := p.server.Shutdown(5 * time.Second); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("shutdown took %v with a semaphore wait pending", took)
	}
	if st := ucxx.Status(p.sc.wait(w, 5*time.Second).Status); st != ucxx.StatusCanceled {
		t.Fatalf("wait pending at shutdown: %v", st)
	}
}

// BenchmarkRegisterMemory: RegisterMemory of distinct 1 MiB host buffers from one
// goroutine (each a trip to the progress thread and back), released after the timer.
func BenchmarkRegisterMemory(b *testing.B) {
	e := newTestEngine(b, Options{})
	const size = 1 << 20
	bufs := make([][]byte, b.N)
	for i := range bufs {
		bufs[i] = bytes.Repeat([]byte{1}, size)
	}
	ids := make([]uint64, b.N)
	b.ResetTimer()
	for i := range b.N {
		var err error
		if ids[i], err = e.RegisterMemory(addr(bufs[i]), size, MemHost); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	for _, id := range ids {
		e.ReleaseMemory(id)
	}
}

// A peer's signal with the key of a semaphore released meanwhile (in flight at the
// release, or late) lands in a page that stays in quarantine: it does not move a
// semaphore made after the release, and it touches no other memory. (Before, the
// page went back to the heap, and the next semaphore's counter was that same page.)
func TestSignalAfterReleaseDoesNotReachALaterSemaphore(t *testing.T) {
	p := newRMAPair(t)
	old, err := p.server.NewSemaphore(p.sep)
	if err != nil {
		t.Fatal(err)
	}
	packed, err := p.server.PackSemaphore(old)
	if err != nil {
		t.Fatal(err)
	}
	key, err := p.client.UnpackKey(p.cep, addr(packed), len(packed))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.server.ReleaseSemaphore(old); err != nil {
		t.Fatal(err)
	}
	// Heap memory allocated after the release, filled: none of it may be the
	// released counter's page, and the late signal must leave it as it is.
	var heap []unsafe.Pointer
	defer func() {
		for _, h := range heap {
			ucxx.CFree(h)
		}
	}()
	for range 16 {
		var h unsafe.Pointer // on the progress thread, which freed the page: malloc's arena of that thread
		if err := p.server.onThread(func() { h = ucxx.CMalloc(4000) }); err != nil {
			t.Fatal(err)
		}
		b := unsafe.Slice((*byte)(h), 4000)
		for i := range b {
			b[i] = 0xEE
		}
		if a := uint64(uintptr(h)); key.Address >= a && key.Address < a+4000 {
			t.Fatalf("heap memory allocated after the release covers the released counter at %#x", key.Address)
		}
		heap = append(heap, h)
	}
	var later []uint64
	for range 4 {
		s, err := p.server.NewSemaphore(p.sep)
		if err != nil {
			t.Fatal(err)
		}
		later = append(later, s)
	}
	id, err := p.client.Signal(p.cep, key.ID, 5)
	if err != nil {
		t.Fatal(err)
	}
	// UCX may refuse the put (a transport that checks keys) or make it: either way
	// it must have landed, or never will, once the endpoint is flushed.
	st := ucxx.Status(p.cc.wait(id, 10*time.Second).Status)
	fid, err := p.client.Flush(p.cep)
	p.ok(t, fid, err, "flush")
	t.Logf("late signal: %v", st)
	for i, h := range heap {
		if b := unsafe.Slice((*byte)(h), 4000); bytes.Count(b, []byte{0xEE}) != len(b) {
			t.Fatalf("heap buffer %d changed under the late signal", i)
		}
	}
	for _, s := range later {
		if v, err := p.server.SemaphoreValue(s); err != nil || v != 0 {
			t.Fatalf("a semaphore made after the release reads %d (%v): the late signal landed in it", v, err)
		}
	}
}

// Released counter pages wait in quarantine and are reused, zeroed, only once
// quarantineDepth were released after them; the rest are freed at releaseAll.
func TestCounterQuarantine(t *testing.T) {
	inner := &countingPages{}
	q := newQuarantinedPages(inner, quarantineAge(DefaultKeepaliveTimeout))
	if a := quarantineAge(time.Hour); a != 2*time.Hour {
		t.Fatalf("quarantine age for a keepalive of an hour: %v", a)
	}
	if a := quarantineAge(-1); a != 2*DefaultKeepaliveTimeout {
		t.Fatalf("quarantine age with keepalive off: %v", a)
	}
	now := time.Now()
	q.now = func() time.Time { return now }
	var pages []unsafe.Pointer
	for range quarantineDepth + 3 {
		pages = append(pages, q.alloc())
	}
	for _, pg := range pages {
		*(*uint64)(pg) = 7
		q.free(pg)
	}
	if inner.freed != 0 || inner.made != quarantineDepth+3 {
		t.Fatalf("made %d, freed %d before releaseAll", inner.made, inner.freed)
	}
	// Past the depth, not yet the age: a new page.
	now = now.Add(q.age - time.Second)
	if pg := q.alloc(); slices.Contains(pages, pg) || inner.made != quarantineDepth+4 {
		t.Fatalf("alloc before the age reused %p (made %d)", pg, inner.made)
	}
	now = now.Add(time.Second)
	if pg := q.alloc(); pg != pages[0] || *(*uint64)(pg) != 0 || inner.made != quarantineDepth+4 {
		t.Fatalf("alloc past the depth and the age: %p (want the oldest, %p), word %d, made %d", pg, pages[0], *(*uint64)(pg), inner.made)
	}
	if pg := q.alloc(); pg != pages[1] || inner.made != quarantineDepth+4 {
		t.Fatalf("alloc with the depth released after the oldest: %p, want %p (made %d)", pg, pages[1], inner.made)
	}
	if pg := q.alloc(); pg != pages[2] || inner.made != quarantineDepth+4 {
		t.Fatalf("alloc with the depth released after the oldest: %p, want %p (made %d)", pg, pages[2], inner.made)
	}
	if pg := q.alloc(); slices.Contains(pages, pg) || inner.made != quarantineDepth+5 {
		t.Fatalf("alloc with fewer than the depth released after the oldest reused %p (made %d)", pg, inner.made)
	}
	q.releaseAll()
	if inner.freed != quarantineDepth {
		t.Fatalf("releaseAll freed %d, want %d", inner.freed, quarantineDepth)
	}
}

// countingPages is counterPages over C pages that counts what it makes and frees.
type countingPages struct {
	cudaCounterPages
	made, freed int
}

func (c *countingPages) alloc() unsafe.Pointer {
	c.made++
	return c.cudaCounterPages.alloc()
}

func (c *countingPages) free(page unsafe.Pointer) {
	c.freed++
	c.cudaCounterPages.free(page)
}
