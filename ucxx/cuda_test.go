package ucxx

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// The tests that need a GPU skip on a machine without the driver or a device; the rest
// check what holds everywhere: errors, zero values, and that nothing loads CUDA early.

// needCUDA returns the driver, or skips the test where there is none.
func needCUDA(t *testing.T) *CUDADriver {
	t.Helper()
	d, err := CUDA()
	if errors.Is(err, ErrNoCUDA) {
		t.Skipf("no CUDA: %v", err)
	}
	if err != nil {
		t.Fatalf("CUDA: %v", err)
	}
	return d
}

// heldGate retains device 0's primary context and maps a pinned host word for it,
// both undone at the test's end: a stream queued to wait until the word is at least 1
// (StreamWaitAtLeast at dev) is held until the test stores 1 into word.
func heldGate(t *testing.T, d *CUDADriver) (c CUDAContext, dev uintptr, word *atomic.Uint64) {
	t.Helper()
	c, err := d.RetainPrimary(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Release() })
	page := CAllocPage(8)
	t.Cleanup(func() { CFree(page) })
	if err := c.Use(func() (err error) { dev, err = d.MapHost(uintptr(page), 8); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Use(func() error { return d.UnmapHost(uintptr(page)) }) })
	return c, dev, (*atomic.Uint64)(page)
}

// onThread runs f on a goroutine locked to an OS thread of its own and waits for it.
// The goroutine never unlocks, so the thread exits with it, taking along whatever
// context f made current there.
func onThread(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		f()
	}()
	<-done
}

// withContext runs f on a thread of its own with device's primary context current,
// and releases the context after.
func withContext(t *testing.T, d *CUDADriver, device int, f func(c CUDAContext)) {
	t.Helper()
	c, err := d.RetainPrimary(device)
	if err != nil {
		t.Fatalf("RetainPrimary(%d): %v", device, err)
	}
	defer func() {
		if err := c.Release(); err != nil {
			t.Errorf("Release: %v", err)
		}
	}()
	onThread(func() {
		if err := c.MakeCurrent(); err != nil {
			t.Errorf("MakeCurrent: %v", err)
			return
		}
		f(c)
	})
}

func TestCUDAErrorText(t *testing.T) {
	err := error(&CUDAError{Op: "cuMemAlloc", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY"})
	if got, want := err.Error(), "ucxx: cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (2)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := (&CUDAError{Op: "cuInit", Code: 12345}).Error(), "ucxx: cuInit: CUDA error (12345)"; got != want {
		t.Errorf("Error() without a name = %q, want %q", got, want)
	}
	var ce *CUDAError
	if !errors.As(err, &ce) || ce.Code != CUDAErrorOutOfMemory {
		t.Errorf("errors.As(%v) = %+v", err, ce)
	}
	if errors.Is(err, ErrNoCUDA) {
		t.Errorf("out of memory matches ErrNoCUDA")
	}
	for _, code := range []int{CUDAErrorNoDevice, 34} {
		if err := error(&CUDAError{Op: "cuInit", Code: code}); !errors.Is(err, ErrNoCUDA) {
			t.Errorf("cuInit result %d does not match ErrNoCUDA", code)
		}
	}
}

func TestCUDAZeroValues(t *testing.T) {
	var e CUDAEvent
	if done, err := e.Done(); !done || err != nil {
		t.Errorf("zero event Done = %v, %v; want true, nil", done, err)
	}
	if err := e.Wait(); err != nil {
		t.Errorf("zero event Wait = %v", err)
	}
	if err := e.Destroy(); err != nil {
		t.Errorf("zero event Destroy = %v", err)
	}
	mustPanic := func(what string, f func()) {
		t.Helper()
		defer func() {
			r := recover()
			if s, ok := r.(string); !ok || !strings.HasPrefix(s, "ucxx: ") {
				t.Errorf("%s: recovered %v; want a panic starting with \"ucxx: \"", what, r)
			}
		}()
		f()
	}
	var c CUDAContext
	mustPanic("zero context MakeCurrent", func() { c.MakeCurrent() })
	mustPanic("zero context Release", func() { c.Release() })
	mustPanic("zero context RecordEvent", func() { c.RecordEvent(StreamLegacy) })
	mustPanic("zero context MemFree", func() { c.MemFree(0) })
	var d *CUDADriver
	mustPanic("nil driver Pointer", func() { d.Pointer(0) })
	if MemoryHost != 0 || MemoryCUDA != 1 || MemoryCUDAManaged != 2 {
		t.Errorf("memory types %d %d %d; want UCX's 0 1 2", MemoryHost, MemoryCUDA, MemoryCUDAManaged)
	}
}

// Importing the package loads no CUDA; CUDA() does, where there is a driver. Checked
// in a fresh process, since other tests here load it.
func TestCUDALoadedOnlyOnUse(t *testing.T) {
	if os.Getenv("UCXX_CUDA_LOAD_CHILD") == "1" {
		return // the child's work is TestCUDALoadChild
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCUDALoadChild$", "-test.v")
	cmd.Env = append(os.Environ(), "UCXX_CUDA_LOAD_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("--- PASS: TestCUDALoadChild")) {
		t.Fatalf("child did not run its test:\n%s", out)
	}
	t.Logf("child:\n%s", out)
}

func TestCUDALoadChild(t *testing.T) {
	if os.Getenv("UCXX_CUDA_LOAD_CHILD") != "1" {
		t.Skip("run by TestCUDALoadedOnlyOnUse")
	}
	loaded := func() bool {
		maps, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Fatalf("read maps: %v", err)
		}
		return bytes.Contains(maps, []byte("/libcuda.so"))
	}
	if loaded() {
		t.Fatal("libcuda is loaded before CUDA() was called")
	}
	// UCX itself may load it, when its CUDA transports are installed and a driver is
	// there: not this package's doing, but worth knowing.
	ctx, err := NewContext(nil, 0)
	if err != nil {
		t.Fatalf("NewContext: %v", err)
	}
	w, err := ctx.NewWorker(false)
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	byUCX := loaded()
	t.Logf("libcuda loaded by UCX's context and worker: %v", byUCX)
	w.Close()
	ctx.Close()
	_, err = CUDA()
	switch {
	case errors.Is(err, ErrNoCUDA):
		t.Logf("CUDA: %v", err)
		if loaded() && !byUCX {
			t.Error("libcuda is loaded although CUDA() reported ErrNoCUDA")
		}
	case err != nil:
		t.Fatalf("CUDA: %v", err)
	default:
		if !loaded() {
			t.Error("CUDA() succeeded with no libcuda in the process")
		}
	}
	_, err2 := CUDA()
	if (err == nil) != (err2 == nil) {
		t.Errorf("second CUDA() = %v after %v", err2, err)
	}
}

func TestCUDADevices(t *testing.T) {
	d := needCUDA(t)
	n, err := d.DeviceCount()
	if err != nil || n < 1 {
		t.Fatalf("DeviceCount = %d, %v", n, err)
	}
	t.Logf("%d CUDA devices", n)
	for dev := 0; dev < n; dev++ {
		bus, err := d.PCIBusID(dev)
		// "dddd:bb:dd.f": four hex digits of domain at least, then bus, device, function.
		dom, rest, _ := strings.Cut(bus, ":")
		if err != nil || len(dom) < 4 || len(rest) != len("bb:dd.f") || rest[2] != ':' || rest[5] != '.' {
			t.Errorf("PCIBusID(%d) = %q, %v", dev, bus, err)
		}
		t.Logf("device %d: PCI %s", dev, bus)
	}
	var ce *CUDAError
	if _, err := d.PCIBusID(n); !errors.As(err, &ce) {
		t.Errorf("PCIBusID(%d) of %d devices: %v; want a CUDA error", n, n, err)
	}
	_, err = d.RetainPrimary(n)
	if !errors.As(err, &ce) || (ce.Code != CUDAErrorInvalidDevice && ce.Code != CUDAErrorInvalidValue) {
		t.Errorf("RetainPrimary(%d) of %d devices: %v; want CUDA_ERROR_INVALID_DEVICE", n, n, err)
	}
}

// TestCUDAPrimaryContextSyncMemops: a retained primary context carries the flags UCX's
// cuda_copy would set on it at its first send (cuda.h says why they are set here).
func TestCUDAPrimaryContextSyncMemops(t *testing.T) {
	d := needCUDA(t)
	c, err := d.RetainPrimary(0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	f, err := c.Flags()
	var ce *CUDAError
	if errors.As(err, &ce) && ce.Code == CUDAErrorNotSupported {
		t.Skipf("the driver has no cuCtxGetFlags: %v", err)
	}
	if err != nil || f&CtxSyncMemops == 0 {
		t.Fatalf("primary context flags %#x, %v; want %#x set", f, err, CtxSyncMemops)
	}
}

func TestCUDAMemoryAndPointers(t *testing.T) {
	d := needCUDA(t)
	n, _ := d.DeviceCount()
	for dev := 0; dev < n; dev++ {
		withContext(t, d, dev, func(c CUDAContext) {
			if c.Device() != dev {
				t.Errorf("Device() = %d, want %d", c.Device(), dev)
			}
			free, total, err := d.MemInfo()
			if err != nil || total == 0 || free > total {
				t.Errorf("device %d: MemInfo = %d, %d, %v", dev, free, total, err)
			}
			const size = 1 << 20
			p, err := d.MemAlloc(size)
			if err != nil {
				t.Errorf("device %d: MemAlloc: %v", dev, err)
				return
			}
			defer func() {
				if err := d.MemFree(p); err != nil {
					t.Errorf("MemFree: %v", err)
				}
			}()
			for _, addr := range []uintptr{p, p + size/2, p + size - 1} {
				got, err := d.Pointer(addr)
				want := CUDAPointer{IsCUDA: true, Device: dev}
				if err != nil || got != want || got.MemType() != MemoryCUDA {
					t.Errorf("Pointer(device %d memory %#x) = %+v, %v; want %+v", dev, addr, got, err, want)
				}
			}

			src := make([]byte, size)
			for i := range src {
				src[i] = byte(i*7 + dev)
			}
			if err := d.CopyToDevice(p, src); err != nil {
				t.Errorf("CopyToDevice: %v", err)
				return
			}
			dst := make([]byte, size)
			if err := d.CopyFromDevice(dst, p); err != nil {
				t.Errorf("CopyFromDevice: %v", err)
				return
			}
			if !bytes.Equal(src, dst) {
				t.Errorf("device %d: data differs after a round trip", dev)
			}

			// A thread with no context: the documented answers are the right one or
			// CUDA_ERROR_INVALID_CONTEXT (then callers fall back to MemoryUnknown).
			onThread(func() {
				got, err := d.Pointer(p)
				var ce *CUDAError
				switch {
				case err == nil && got == CUDAPointer{IsCUDA: true, Device: dev}:
					t.Logf("Pointer without a current context: %+v", got)
				case errors.As(err, &ce) && ce.Code == CUDAErrorInvalidContext:
					t.Logf("Pointer without a current context: %v", err)
				default:
					t.Errorf("Pointer(device memory) without a current context = %+v, %v", got, err)
				}
			})
		})
	}

	// Host memory of every kind is host, with or without a context.
	host := make([]byte, 64)
	cmem := CMalloc(64)
	defer CFree(cmem)
	check := func(where string) {
		for _, addr := range []uintptr{uintptr(unsafe.Pointer(&host[0])), uintptr(cmem), 0} {
			got, err := d.Pointer(addr)
			if err != nil || got != (CUDAPointer{Device: -1}) || got.MemType() != MemoryHost {
				t.Errorf("%s: Pointer(host %#x) = %+v, %v", where, addr, got, err)
			}
		}
	}
	withContext(t, d, 0, func(CUDAContext) { check("with a context") })
	onThread(func() { check("without a context") })
	runtime.KeepAlive(host)
}

func TestCUDAMemErrors(t *testing.T) {
	d := needCUDA(t)
	withContext(t, d, 0, func(CUDAContext) {
		_, err := d.MemAlloc(1 << 62)
		var ce *CUDAError
		if !errors.As(err, &ce) || ce.Op != "cuMemAlloc" || !strings.HasPrefix(ce.Name, "CUDA_ERROR_") {
			t.Errorf("MemAlloc(4 EiB) = %v; want a named CUDA error from cuMemAlloc", err)
		}
		t.Logf("MemAlloc(4 EiB): %v", err)
	})
	onThread(func() {
		_, err := d.MemAlloc(1 << 20)
		var ce *CUDAError
		if !errors.As(err, &ce) || ce.Code != CUDAErrorInvalidContext {
			t.Errorf("MemAlloc without a current context = %v; want CUDA_ERROR_INVALID_CONTEXT", err)
		}
		if _, err := d.RecordEvent(StreamLegacy); !errors.As(err, &ce) || ce.Op != "cuEventCreate" || ce.Code != CUDAErrorInvalidContext {
			t.Errorf("RecordEvent without a current context = %v; want CUDA_ERROR_INVALID_CONTEXT from cuEventCreate", err)
		}
	})
}

// awaitEvent polls Done until the event is done, as the progress thread would.
func awaitEvent(t *testing.T, e CUDAEvent, what string) bool {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		done, err := e.Done()
		if err != nil {
			t.Errorf("%s: Done: %v", what, err)
			return false
		}
		if done {
			return true
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: not done after 10 s", what)
			return false
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// checkFill checks that the last 4 KiB of the n bytes at p all hold want.
func checkFill(t *testing.T, d *CUDADriver, p uintptr, n uint64, want byte, what string) {
	t.Helper()
	tail := make([]byte, 4096)
	if err := d.CopyFromDevice(tail, p+uintptr(n)-uintptr(len(tail))); err != nil {
		t.Errorf("%s: CopyFromDevice: %v", what, err)
		return
	}
	for i, b := range tail {
		if b != want {
			t.Errorf("%s: byte %d is %#x, want %#x", what, i, b, want)
			return
		}
	}
}

func TestCUDAEvents(t *testing.T) {
	d := needCUDA(t)
	withContext(t, d, 0, func(c CUDAContext) {
		free, _, err := d.MemInfo()
		if err != nil {
			t.Errorf("MemInfo: %v", err)
			return
		}
		// Large enough that the fill is likely still running when the event is first
		// queried (logged, not required).
		n := min(uint64(1)<<30, free/4) &^ 4095
		p, err := d.MemAlloc(n)
		if err != nil {
			t.Errorf("MemAlloc(%d): %v", n, err)
			return
		}
		defer d.MemFree(p)

		for _, s := range []struct {
			name   string
			stream uintptr
			value  byte
		}{{"legacy", StreamLegacy, 0xab}, {"per-thread", StreamPerThread, 0xcd}} {
			if err := d.memsetAsync(p, s.value, n, s.stream); err != nil {
				t.Errorf("%s: memsetAsync: %v", s.name, err)
				continue
			}
			e, err := d.RecordEvent(s.stream)
			if err != nil {
				t.Errorf("%s: RecordEvent: %v", s.name, err)
				continue
			}
			first, err := e.Done()
			t.Logf("%s stream: Done right after a %d MiB fill = %v, %v", s.name, n>>20, first, err)
			if awaitEvent(t, e, s.name) {
				checkFill(t, d, p, n, s.value, s.name)
			}
			if err := e.Wait(); err != nil {
				t.Errorf("%s: Wait on a done event: %v", s.name, err)
			}
			if err := e.Destroy(); err != nil {
				t.Errorf("%s: Destroy: %v", s.name, err)
			}
		}

		// Recorded here, polled on another thread that has the context current (the
		// progress thread's situation), and waited for here.
		if err := d.memsetAsync(p, 0x11, n, StreamLegacy); err != nil {
			t.Errorf("memsetAsync: %v", err)
			return
		}
		e, err := d.RecordEvent(StreamLegacy)
		if err != nil {
			t.Errorf("RecordEvent: %v", err)
			return
		}
		onThread(func() {
			if err := c.MakeCurrent(); err != nil {
				t.Errorf("MakeCurrent on the polling thread: %v", err)
				return
			}
			awaitEvent(t, e, "polled on another thread")
		})
		// And on a thread with no context at all: logged, the progress thread has one.
		onThread(func() {
			done, err := e.Done()
			t.Logf("Done on a thread without a context: %v, %v", done, err)
		})
		if err := e.Wait(); err != nil {
			t.Errorf("Wait: %v", err)
		}
		if err := e.Destroy(); err != nil {
			t.Errorf("Destroy: %v", err)
		}

		// An event destroyed while its work still runs.
		if err := d.memsetAsync(p, 0x22, n, StreamLegacy); err == nil {
			if e, err := d.RecordEvent(StreamLegacy); err != nil {
				t.Errorf("RecordEvent: %v", err)
			} else if err := e.Destroy(); err != nil {
				t.Errorf("Destroy before done: %v", err)
			}
		}
		checkFill(t, d, p, n, 0x22, "after an early Destroy") // the copy orders after the fill
	})
}

// CUDAContext's RecordEvent and MemFree work from a thread with no context and leave
// it so, and from a thread with the context current they leave that current.
func TestCUDAContextSwitching(t *testing.T) {
	d := needCUDA(t)
	c, err := d.RetainPrimary(0)
	if err != nil {
		t.Fatalf("RetainPrimary: %v", err)
	}
	defer c.Release()
	alloc := func() uintptr {
		var p uintptr
		onThread(func() {
			if err := c.MakeCurrent(); err != nil {
				t.Errorf("MakeCurrent: %v", err)
				return
			}
			if p, err = d.MemAlloc(1 << 16); err != nil {
				t.Errorf("MemAlloc: %v", err)
			}
		})
		return p
	}
	use := func(where string, wantCurrent unsafe.Pointer) {
		checkCurrent := func(after string) {
			if cur, err := currentContext(); err != nil || cur != wantCurrent {
				t.Errorf("%s: current context after %s = %p, %v; want %p", where, after, cur, err, wantCurrent)
			}
		}
		if e, err := c.RecordEvent(StreamLegacy); err != nil {
			t.Errorf("%s: RecordEvent: %v", where, err)
		} else {
			checkCurrent("RecordEvent")
			if err := e.Wait(); err != nil {
				t.Errorf("%s: Wait: %v", where, err)
			}
			if err := e.Destroy(); err != nil {
				t.Errorf("%s: Destroy: %v", where, err)
			}
		}
		if p := alloc(); p != 0 {
			if err := c.MemFree(p); err != nil {
				t.Errorf("%s: MemFree: %v", where, err)
			}
			checkCurrent("MemFree")
			var ce *CUDAError
			if err := c.MemFree(p); !errors.As(err, &ce) || ce.Op != "cuMemFree" {
				t.Errorf("%s: second MemFree = %v; want a cuMemFree error", where, err)
			}
			checkCurrent("a failed MemFree")
		}
	}
	onThread(func() { use("no context", nil) })
	onThread(func() {
		if err := c.MakeCurrent(); err != nil {
			t.Errorf("MakeCurrent: %v", err)
			return
		}
		use("context current", unsafe.Pointer(c.ctx))
	})
}

// With two or more devices, memory of each is reported on its own device whichever
// context is current.
func TestCUDAPointerDevices(t *testing.T) {
	d := needCUDA(t)
	n, _ := d.DeviceCount()
	if n < 2 {
		t.Skipf("%d CUDA device(s); need 2", n)
	}
	// Every context is held for the whole test: the last release of a primary context
	// destroys it with its memory.
	ctxs := make([]CUDAContext, n)
	for dev := range ctxs {
		c, err := d.RetainPrimary(dev)
		if err != nil {
			t.Fatalf("RetainPrimary(%d): %v", dev, err)
		}
		defer c.Release()
		ctxs[dev] = c
	}
	// inContext runs f on a thread of its own with c current.
	inContext := func(c CUDAContext, f func()) {
		onThread(func() {
			if err := c.MakeCurrent(); err != nil {
				t.Errorf("MakeCurrent(device %d): %v", c.Device(), err)
				return
			}
			f()
		})
	}
	ptrs := make([]uintptr, n)
	for dev, c := range ctxs {
		inContext(c, func() {
			p, err := d.MemAlloc(4096)
			if err != nil {
				t.Errorf("device %d: MemAlloc: %v", dev, err)
			}
			ptrs[dev] = p
		})
	}
	inContext(ctxs[0], func() {
		for dev, p := range ptrs {
			if p == 0 {
				continue
			}
			if got, err := d.Pointer(p); err != nil || !got.IsCUDA || got.Device != dev {
				t.Errorf("Pointer(memory of device %d) with device 0 current = %+v, %v", dev, got, err)
			}
		}
	})
	for dev, p := range ptrs {
		if p != 0 {
			inContext(ctxs[dev], func() {
				if err := d.MemFree(p); err != nil {
					t.Errorf("device %d: MemFree: %v", dev, err)
				}
			})
		}
	}
}

// TestPrimeCUDA: after PrimeCUDA, UCX's memory-type cache holds a device allocation
// with its system device (a second call finds it there and changes nothing), for a
// slice inside it too; host memory is left alone.
func TestPrimeCUDA(t *testing.T) {
	d := needCUDA(t)
	newWorker(t) // a context with UCX's CUDA components: the cache exists
	c, err := d.RetainPrimary(0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	var p uintptr
	if err := c.Use(func() (err error) { p, err = d.MemAlloc(1 << 20); return err }); err != nil {
		t.Fatal(err)
	}
	defer c.Use(func() error { return d.MemFree(p) })
	info, err := d.Pointer(p)
	if err != nil || !info.IsCUDA {
		t.Fatalf("Pointer(device memory) = %+v, %v", info, err)
	}
	first, err := d.PrimeCUDA(p+4096, 1000, info)
	if err != nil {
		t.Fatal(err)
	}
	again, err := d.PrimeCUDA(p, 1<<20, info)
	if err != nil || again {
		t.Fatalf("second PrimeCUDA of the allocation = %v, %v; want false (cached by the first, which said %v)", again, err, first)
	}
	host := make([]byte, 64)
	if changed, err := d.PrimeCUDA(uintptr(unsafe.Pointer(&host[0])), 64, CUDAPointer{Device: -1}); changed || err != nil {
		t.Fatalf("PrimeCUDA(host memory) = %v, %v", changed, err)
	}
}

// TestManagedPrefetch: a managed allocation prefetched to device 0 on a stream is
// reported there once the stream is done, and its bytes stay what the host wrote.
func TestManagedPrefetch(t *testing.T) {
	d := needCUDA(t)
	c, err := d.RetainPrimary(0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	const n = 1 << 20
	err = c.Use(func() error {
		p, err := d.MemAllocManaged(n)
		if err != nil {
			return err
		}
		defer d.MemFree(p)
		want := make([]byte, n)
		for i := range want {
			want[i] = byte(i)
		}
		CopyBetween(p, uintptr(unsafe.Pointer(&want[0])), n) // managed memory: the host writes it
		if where, err := d.LastPrefetch(p, n); err != nil || where != PrefetchNone {
			t.Errorf("LastPrefetch before any prefetch = %d, %v; want %d", where, err, PrefetchNone)
		}
		s, err := d.NewStream()
		if err != nil {
			return err
		}
		defer s.Destroy()
		if err := d.PrefetchAsync(p, n, 0, s.Handle()); err != nil {
			return err
		}
		if err := s.Sync(); err != nil {
			return err
		}
		if where, err := d.LastPrefetch(p, n); err != nil || where != 0 {
			t.Errorf("LastPrefetch after a prefetch to device 0 = %d, %v", where, err)
		}
		got := make([]byte, n)
		CopyFrom(got, p)
		if !bytes.Equal(got, want) {
			t.Fatal("the bytes changed in the prefetch")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestManagedAdviseAccessedBy: a managed range advised accessed by device 0 reports
// device 0 among its accessors, a range never advised reports none, and device memory
// refuses the advice.
func TestManagedAdviseAccessedBy(t *testing.T) {
	d := needCUDA(t)
	const n = 1 << 21
	withContext(t, d, 0, func(CUDAContext) {
		p, err := d.MemAllocManaged(2 * n)
		if err != nil {
			t.Errorf("MemAllocManaged: %v", err)
			return
		}
		defer d.MemFree(p)
		if got, err := d.AccessedBy(p, n, 4); err != nil || len(got) != 0 {
			t.Errorf("AccessedBy before any advice = %v, %v; want none", got, err)
		}
		if err := d.AdviseAccessedBy(p, n, 0); err != nil {
			t.Errorf("AdviseAccessedBy: %v", err)
			return
		}
		if got, err := d.AccessedBy(p, n, 4); err != nil || len(got) != 1 || got[0] != 0 {
			t.Errorf("AccessedBy after the advice for device 0 = %v, %v; want [0]", got, err)
		}
		if got, err := d.AccessedBy(p+n, n, 4); err != nil || len(got) != 0 {
			t.Errorf("AccessedBy of the half not advised = %v, %v; want none", got, err)
		}
		dev, err := d.MemAlloc(n)
		if err != nil {
			t.Errorf("MemAlloc: %v", err)
			return
		}
		defer d.MemFree(dev)
		if err := d.AdviseAccessedBy(dev, n, 0); err == nil {
			t.Error("AdviseAccessedBy on device memory: no error")
		}
	})
}

// TestCUDAMarkStream: a stream held by a wait on a host word gets an event that is
// done once the word is written; a stream with nothing queued gets the zero event.
func TestCUDAMarkStream(t *testing.T) {
	d := needCUDA(t)
	c, gateDev, gate := heldGate(t, d)
	err := c.Use(func() error {
		s, err := d.NewStream()
		if err != nil {
			return err
		}
		defer s.Destroy()
		if err := d.StreamWaitAtLeast(s.Handle(), gateDev, 1); err != nil {
			return err
		}
		held, err := c.MarkStream(s.Handle())
		if err != nil {
			return err
		}
		if held.IsZero() {
			t.Error("MarkStream of a held stream gave the zero event")
		} else if done, err := held.Done(); done || err != nil {
			t.Errorf("the held stream's event done %v (%v) before the gate opened", done, err)
		}
		gate.Store(1)
		if !held.IsZero() && awaitEvent(t, held, "held stream") {
			if err := held.Destroy(); err != nil {
				t.Errorf("Destroy: %v", err)
			}
		}
		if err := s.Sync(); err != nil {
			return err
		}
		for _, stream := range []uintptr{s.Handle(), StreamLegacy} {
			idle, err := c.MarkStream(stream)
			if err != nil {
				return err
			}
			if !idle.IsZero() {
				t.Errorf("MarkStream of idle stream %#x gave an event", stream)
				idle.Destroy()
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
