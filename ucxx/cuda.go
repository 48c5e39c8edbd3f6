package ucxx

// CUDA support needs no CUDA at build time and none at run time until asked for:
// CUDA() opens libcuda.so.1 on first use (cuda.c); nothing else in this package loads
// it. UCX itself may: with its CUDA transports installed (the libucx-cu* wheels) and a
// driver present, ucp_init loads libcuda.so.1 (seen on H100 and H200 machines).

// #cgo LDFLAGS: -ldl
// #cgo noescape ucxx_cuda_pointer_info
// #cgo nocallback ucxx_cuda_pointer_info
// #cgo noescape ucxx_cuda_record_event
// #cgo nocallback ucxx_cuda_record_event
// #cgo nocallback ucxx_cuda_event_query
// #include <ucs/memory/memory_type.h>
// #include "cuda.h"
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// Memory types for the memType argument of TagSend, TagRecv and AmSend, beside
// MemoryUnknown: telling UCX spares it its own detection of the buffer.
const (
	MemoryHost        = int(C.UCS_MEMORY_TYPE_HOST)
	MemoryCUDA        = int(C.UCS_MEMORY_TYPE_CUDA)
	MemoryCUDAManaged = int(C.UCS_MEMORY_TYPE_CUDA_MANAGED)
)

// ErrNoCUDA: no usable CUDA driver. libcuda.so.1 cannot be opened (no NVIDIA driver),
// or it is the toolkit's stub, or the driver sees no device. errors.Is matches it.
var ErrNoCUDA = errors.New("ucxx: no CUDA driver or device")

// CUDA result codes that callers may want to test CUDAError.Code against.
const (
	CUDAErrorInvalidValue   = int(C.CUDA_ERROR_INVALID_VALUE)
	CUDAErrorOutOfMemory    = int(C.CUDA_ERROR_OUT_OF_MEMORY)
	CUDAErrorNoDevice       = int(C.CUDA_ERROR_NO_DEVICE)
	CUDAErrorInvalidDevice  = int(C.CUDA_ERROR_INVALID_DEVICE)
	CUDAErrorInvalidContext = int(C.CUDA_ERROR_INVALID_CONTEXT)
	CUDAErrorNotSupported   = int(C.CUDA_ERROR_NOT_SUPPORTED)
)

// CUDAError is a failed CUDA driver call: which call, and the CUresult it returned.
type CUDAError struct {
	Op   string // the driver call, e.g. "cuMemAlloc"
	Code int    // the CUresult
	Name string // the driver's name for Code, e.g. "CUDA_ERROR_OUT_OF_MEMORY"; "" if it has none
}

func (e *CUDAError) Error() string {
	name := e.Name
	if name == "" {
		name = "CUDA error"
	}
	return fmt.Sprintf("ucxx: %s: %s (%d)", e.Op, name, e.Code)
}

// Is makes errors.Is(err, ErrNoCUDA) hold for the results that mean "no usable
// driver or device" (CUDA_ERROR_NO_DEVICE, CUDA_ERROR_STUB_LIBRARY).
func (e *CUDAError) Is(target error) bool {
	return target == ErrNoCUDA && (e.Code == int(C.CUDA_ERROR_NO_DEVICE) || e.Code == int(C.CUDA_ERROR_STUB_LIBRARY))
}

// cudaErr returns nil for CUDA_SUCCESS and a *CUDAError naming op otherwise.
func cudaErr(op string, r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	e := &CUDAError{Op: op, Code: int(r)}
	if name := C.ucxx_cuda_error_name(r); name != nil {
		e.Name = C.GoString(name)
	}
	return e
}

// CUDADriver is the loaded CUDA driver. There is one per process, from CUDA; its
// methods may be called from any goroutine (the driver API is thread-safe). Those that
// allocate, free or copy act in the calling OS thread's current context: see
// CUDAContext.MakeCurrent.
type CUDADriver struct{}

// check turns use of a nil driver (CUDA's result on error) into a clear panic instead
// of a call through an unresolved entry point.
func (d *CUDADriver) check() {
	if d == nil {
		panic("ucxx: use of a nil *CUDADriver (CUDA returned an error)")
	}
}

var cudaOnce struct {
	sync.Once
	d   *CUDADriver
	err error
}

// CUDA returns the CUDA driver, loading libcuda.so.1 and calling cuInit(0) on first
// use; later calls return the same result at the cost of an atomic load.
//
// Errors: an error matching ErrNoCUDA when there is no driver, only the stub library,
// or no device; a *CUDAError from cuInit otherwise; an error naming the missing entry
// point when the driver is too old.
func CUDA() (*CUDADriver, error) {
	cudaOnce.Do(func() { cudaOnce.d, cudaOnce.err = loadCUDA() })
	return cudaOnce.d, cudaOnce.err
}

func loadCUDA() (*CUDADriver, error) {
	var msg [512]C.char
	switch C.ucxx_cuda_load(&msg[0], C.size_t(len(msg))) {
	case 0:
	case 1:
		return nil, fmt.Errorf("%w (%s)", ErrNoCUDA, C.GoString(&msg[0]))
	default:
		return nil, fmt.Errorf("ucxx: load CUDA driver: %s", C.GoString(&msg[0]))
	}
	if err := loadExec(); err != nil {
		return nil, err
	}
	if err := loadManaged(); err != nil {
		return nil, err
	}
	if err := cudaErr("cuInit", C.ucxx_cuda_init()); err != nil {
		return nil, err
	}
	return &CUDADriver{}, nil
}

// CUDAInUse reports whether the process has loaded the CUDA driver and initialised it
// itself (the CUDA runtime does at its first call), loading and initialising nothing:
// CUDA() calls cuInit, after which a forked child cannot use CUDA, so code that runs
// in every process asks this first.
func CUDAInUse() bool { return C.ucxx_cuda_in_use() == 1 }

// DeviceCount returns the number of CUDA devices the driver sees.
func (d *CUDADriver) DeviceCount() (int, error) {
	d.check()
	var n C.int
	if err := cudaErr("cuDeviceGetCount", C.ucxx_cuda_device_count(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// PCIBusID returns the PCI bus id of a CUDA device, "dddd:bb:dd.f" in hex
// (cuDeviceGetPCIBusId): the key that matches a CUDA ordinal to NVML's GPUs, whose
// order CUDA follows only with CUDA_DEVICE_ORDER=PCI_BUS_ID.
//
// Errors: a *CUDAError, CUDA_ERROR_INVALID_DEVICE for an ordinal out of range.
func (d *CUDADriver) PCIBusID(device int) (string, error) {
	d.check()
	var buf [64]C.char
	var op *C.char
	if r := C.ucxx_cuda_pci_bus_id(C.int(device), &buf[0], C.int(len(buf)), &op); r != C.CUDA_SUCCESS {
		return "", cudaErr(C.GoString(op), r)
	}
	return C.GoString(&buf[0]), nil
}

// CUDAPointer is what the driver knows of an address.
type CUDAPointer struct {
	IsCUDA  bool // device memory, or managed memory (then Managed is set too)
	Managed bool // managed (unified) memory, cuMemAllocManaged's
	Device  int  // the ordinal of the device holding it; -1 when IsCUDA is false
	Pinned  bool // page-locked host memory the driver knows (cuMemHostAlloc, cuMemHostRegister)
}

// MemType returns the memory type to pass to TagSend, TagRecv or AmSend for the
// address: MemoryHost, MemoryCUDA or MemoryCUDAManaged.
func (p CUDAPointer) MemType() int {
	switch {
	case p.Managed:
		return MemoryCUDAManaged
	case p.IsCUDA:
		return MemoryCUDA
	}
	return MemoryHost
}

// Pointer reports whether addr lies in CUDA device or managed memory, and on which
// device, with one cuPointerGetAttributes call (the attributes UCX's own memory type
// detection reads). Host memory, pinned or not, and addresses the driver does not
// know are IsCUDA false with a nil error. Any thread may call it, with or without a
// current context. It does not allocate.
//
// Errors: a *CUDAError, e.g. CUDA_ERROR_INVALID_CONTEXT when the driver cannot tell;
// callers may then fall back to MemoryUnknown and let UCX decide.
func (d *CUDADriver) Pointer(addr uintptr) (CUDAPointer, error) {
	d.check()
	var memtype, managed C.uint
	var dev C.int
	r := C.ucxx_cuda_pointer_info(C.uintptr_t(addr), &memtype, &managed, &dev)
	switch {
	case r == C.CUDA_ERROR_INVALID_VALUE:
		// The single-attribute call's answer for host memory; kept for drivers whose
		// plural call answers the same.
		return CUDAPointer{Device: -1}, nil
	case r != C.CUDA_SUCCESS:
		return CUDAPointer{Device: -1}, cudaErr("cuPointerGetAttributes", r)
	case memtype == C.CU_MEMORYTYPE_HOST:
		return CUDAPointer{Device: -1, Pinned: true}, nil
	case memtype != C.CU_MEMORYTYPE_DEVICE:
		return CUDAPointer{Device: -1}, nil
	}
	return CUDAPointer{IsCUDA: true, Managed: managed != 0, Device: int(dev)}, nil
}

// CUDAContext is a reference to a device's primary context: the context the CUDA
// runtime (and so CuPy, PyTorch, Numba, RMM) uses for that device. The zero value is
// no context; its methods panic.
type CUDAContext struct {
	ctx C.CUcontext
	dev C.CUdevice
	ord int
}

// RetainPrimary takes a reference on device's primary context, creating it when no one
// holds one yet. Each RetainPrimary needs one Release.
//
// Errors: a *CUDAError from cuDeviceGet (CUDA_ERROR_INVALID_DEVICE for an ordinal out
// of range) or cuDevicePrimaryCtxRetain.
func (d *CUDADriver) RetainPrimary(device int) (CUDAContext, error) {
	d.check()
	var c CUDAContext
	var op *C.char
	if r := C.ucxx_cuda_primary_retain(C.int(device), &c.dev, &c.ctx, &op); r != C.CUDA_SUCCESS {
		return CUDAContext{}, cudaErr(C.GoString(op), r)
	}
	c.ord = device
	return c, nil
}

// PrimaryActive reports whether device's primary context is active: someone holds it
// (the CUDA runtime, once the application has used the device). It creates nothing.
//
// Errors: a *CUDAError (CUDA_ERROR_INVALID_DEVICE for an ordinal out of range).
func (d *CUDADriver) PrimaryActive(device int) (bool, error) {
	d.check()
	var active C.int
	if err := cudaErr("cuDevicePrimaryCtxGetState", C.ucxx_cuda_primary_active(C.int(device), &active)); err != nil {
		return false, err
	}
	return active != 0, nil
}

// CtxSyncMemops is CU_CTX_SYNC_MEMOPS, the context flag RetainPrimary sets (see
// ucxx_cuda_primary_retain in cuda.h for why).
const CtxSyncMemops = uint(C.CU_CTX_SYNC_MEMOPS)

// Flags returns the context's flags (cuCtxGetFlags).
func (c CUDAContext) Flags() (uint, error) {
	c.check("Flags")
	var f C.uint
	if err := cudaErr("cuCtxGetFlags", C.ucxx_cuda_ctx_flags(c.ctx, &f)); err != nil {
		return 0, err
	}
	return uint(f), nil
}

func (c CUDAContext) check(op string) {
	if c.ctx == nil {
		panic("ucxx: " + op + " on a zero CUDAContext")
	}
}

// Device returns the ordinal of the context's device.
func (c CUDAContext) Device() int { return c.ord }

// MakeCurrent binds the context to the calling OS thread (cuCtxSetCurrent), replacing
// whatever context was current there. The binding belongs to the thread, not the
// goroutine: the caller must be locked to its thread (runtime.LockOSThread) and stay
// locked while it relies on the context, as the progress thread is.
func (c CUDAContext) MakeCurrent() error {
	c.check("MakeCurrent")
	return cudaErr("cuCtxSetCurrent", C.ucxx_cuda_ctx_set_current(c.ctx))
}

// Release drops the reference RetainPrimary took. When the last reference in the
// process goes, the driver destroys the context and everything allocated in it. A
// thread that still has it current should unbind it first (no other context, or
// another one, made current).
func (c CUDAContext) Release() error {
	c.check("Release")
	return cudaErr("cuDevicePrimaryCtxRelease", C.ucxx_cuda_primary_release(c.dev))
}

// CopyToHost copies n bytes of device memory at src, allocated in this context, to
// the host address dst (memory Go does not manage), from any thread, as MemFree; it
// returns when they are there. For handing received CUDA frames to host code.
func (c CUDAContext) CopyToHost(dst uintptr, src uintptr, n uint64) error {
	c.check("CopyToHost")
	if n == 0 {
		return nil
	}
	var op *C.char
	if r := C.ucxx_cuda_copy_dtoh_in(c.ctx, C.uintptr_t(dst), C.CUdeviceptr(src), C.size_t(n), &op); r != C.CUDA_SUCCESS {
		return cudaErr(C.GoString(op), r)
	}
	return nil
}

// MemFree frees device memory allocated in this context, from any thread: c is made
// current for the call and the thread's previous context (or none) is current again
// on return. Memory lives as long as its context, so a receiver that hands device
// memory out keeps a reference on the context (RetainPrimary) until it is freed.
//
// Errors: a *CUDAError from cuMemFree (CUDA_ERROR_INVALID_VALUE for an address that
// is not an allocation of c), or from switching contexts.
func (c CUDAContext) MemFree(p uintptr) error {
	c.check("MemFree")
	var op *C.char
	if r := C.ucxx_cuda_mem_free_in(c.ctx, C.CUdeviceptr(p), &op); r != C.CUDA_SUCCESS {
		return cudaErr(C.GoString(op), r)
	}
	return nil
}

// currentContext returns the calling thread's current context, nil when there is none.
func currentContext() (unsafe.Pointer, error) {
	var ctx C.CUcontext
	if err := cudaErr("cuCtxGetCurrent", C.ucxx_cuda_ctx_get_current(&ctx)); err != nil {
		return nil, err
	}
	return unsafe.Pointer(ctx), nil
}

// MemAlloc allocates n bytes of device memory in the calling thread's current context
// and returns its device address.
//
// Errors: a *CUDAError from cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY, or
// CUDA_ERROR_INVALID_CONTEXT when no context is current.
func (d *CUDADriver) MemAlloc(n uint64) (uintptr, error) {
	d.check()
	var p C.CUdeviceptr
	if err := cudaErr("cuMemAlloc", C.ucxx_cuda_mem_alloc(C.size_t(n), &p)); err != nil {
		return 0, err
	}
	return uintptr(p), nil
}

// MemFree frees device memory from MemAlloc. A context must be current on the calling
// thread: the one it was allocated in.
func (d *CUDADriver) MemFree(p uintptr) error {
	d.check()
	return cudaErr("cuMemFree", C.ucxx_cuda_mem_free(C.CUdeviceptr(p)))
}

// MemInfo returns the free and total memory of the current context's device.
func (d *CUDADriver) MemInfo() (free, total uint64, err error) {
	d.check()
	var f, t C.size_t
	if err := cudaErr("cuMemGetInfo", C.ucxx_cuda_mem_info(&f, &t)); err != nil {
		return 0, 0, err
	}
	return uint64(f), uint64(t), nil
}

// CopyToDevice copies src to the device address dst, synchronously with respect to
// the host (src may be reused on return). It orders itself after the legacy default
// stream's work. Meant for tests and tools, not the data path. A context must be
// current on the calling thread.
func (d *CUDADriver) CopyToDevice(dst uintptr, src []byte) error {
	d.check()
	if len(src) == 0 {
		return nil
	}
	// src is Go memory lent for the call only; the copy has left it when cuMemcpyHtoD
	// returns.
	return cudaErr("cuMemcpyHtoD", C.ucxx_cuda_copy_htod(C.CUdeviceptr(dst), unsafe.Pointer(&src[0]), C.size_t(len(src))))
}

// CopyFromDevice copies len(dst) bytes from the device address src into dst, and
// returns when they are there. Like CopyToDevice, for tests and tools.
func (d *CUDADriver) CopyFromDevice(dst []byte, src uintptr) error {
	d.check()
	if len(dst) == 0 {
		return nil
	}
	return cudaErr("cuMemcpyDtoH", C.ucxx_cuda_copy_dtoh(unsafe.Pointer(&dst[0]), C.CUdeviceptr(src), C.size_t(len(dst))))
}

// memsetAsync queues a fill of n bytes at dst with value on stream (tests use it to
// keep a stream busy). A context must be current on the calling thread.
func (d *CUDADriver) memsetAsync(dst uintptr, value byte, n uint64, stream uintptr) error {
	d.check()
	return cudaErr("cuMemsetD8Async", C.ucxx_cuda_memset_async(C.CUdeviceptr(dst), C.uchar(value), C.size_t(n), C.uintptr_t(stream)))
}

// Stream values as __cuda_array_interface__ v3 gives them in its "stream" field. Any
// other value is a CUstream handle. The interface has no 0 ("stream": None means there
// is nothing to wait for: record no event then); the driver takes 0 as the legacy
// default stream too.
const (
	StreamLegacy    uintptr = 1 // the legacy default stream, CU_STREAM_LEGACY
	StreamPerThread uintptr = 2 // the calling thread's default stream, CU_STREAM_PER_THREAD
)

// CUDAEvent marks a point in a stream's work: it is done when everything queued on the
// stream before it has finished. The zero value is an event that is always done, so a
// buffer that needs no wait can carry one. An event is destroyed once, with Destroy.
//
// The intended use is ordering a send after the work that produces its buffer without
// synchronizing the device: the submitting thread records an event on the producer's
// stream (RecordEvent), and the progress thread polls Done before it posts the UCX
// operation.
type CUDAEvent struct {
	ev C.CUevent
}

// RecordEvent creates an event (timing disabled) and records it on stream, in the
// calling thread's current context. That context must be the stream's: on a thread
// that has just queued work through the CUDA runtime it is. For the implicit streams
// (StreamLegacy, StreamPerThread) the current context's stream is meant, and for
// StreamPerThread the calling thread's. Recording does not wait for anything.
//
// Errors: a *CUDAError from cuEventCreate (CUDA_ERROR_INVALID_CONTEXT when no context
// is current) or cuEventRecord (e.g. CUDA_ERROR_INVALID_HANDLE for a stream of another
// context).
func (d *CUDADriver) RecordEvent(stream uintptr) (CUDAEvent, error) {
	d.check()
	return recordEvent(nil, stream, false)
}

// RecordEvent is CUDADriver.RecordEvent in context c: c is made current on the calling
// thread for the call, and the thread's previous context (or none) is current again on
// return. Use it when the caller's thread may have no context or another device's; the
// context of a CUDA buffer's device is the primary context of Pointer's Device.
func (c CUDAContext) RecordEvent(stream uintptr) (CUDAEvent, error) {
	c.check("RecordEvent")
	return recordEvent(c.ctx, stream, false)
}

// MarkStream is RecordEvent for a stream that may have nothing queued: when
// cuStreamQuery says all its work is done already, it returns the zero event (done,
// nothing to destroy) and makes none; otherwise an event recorded there. Sending a
// buffer its producer finished with then costs one driver call instead of four
// (create, record, query, destroy), and nothing to poll.
//
// Errors: RecordEvent's, or a *CUDAError from cuStreamQuery (a stream whose work
// failed).
func (c CUDAContext) MarkStream(stream uintptr) (CUDAEvent, error) {
	c.check("MarkStream")
	return recordEvent(c.ctx, stream, true)
}

// IsZero reports whether e is the zero event (always done).
func (e CUDAEvent) IsZero() bool { return e.ev == nil }

// AwaitStream blocks the calling thread until the work queued on stream so far (in
// context c, as RecordEvent) is done: an event recorded there (MarkStream: none when
// the stream is idle already), waited for, destroyed. Not for the progress thread.
//
// Errors: MarkStream's, or a *CUDAError from cuEventSynchronize (work that failed).
func (c CUDAContext) AwaitStream(stream uintptr) error {
	ev, err := c.MarkStream(stream)
	if err != nil {
		return err
	}
	defer ev.Destroy()
	return ev.Wait()
}

// recordEvent records an event on stream in ctx (nil: the current context); with
// ifBusy, only when the stream has work queued (else the zero event).
func recordEvent(ctx C.CUcontext, stream uintptr, ifBusy bool) (CUDAEvent, error) {
	var e CUDAEvent
	var op *C.char
	var r C.CUresult
	if ifBusy {
		r = C.ucxx_cuda_mark_stream(ctx, C.uintptr_t(stream), &e.ev, &op)
	} else {
		r = C.ucxx_cuda_record_event(ctx, C.uintptr_t(stream), &e.ev, &op)
	}
	if r != C.CUDA_SUCCESS {
		return CUDAEvent{}, cudaErr(C.GoString(op), r)
	}
	return e, nil
}

// Done reports whether the work the event marks has finished (cuEventQuery). It does
// not block or allocate, and any thread may call it, with or without a current
// context; the progress thread polls it. The zero event is done.
//
// Errors: a *CUDAError, e.g. for work that failed on the device (the stream's error
// is reported here).
func (e CUDAEvent) Done() (bool, error) {
	if e.ev == nil {
		return true, nil
	}
	switch r := C.ucxx_cuda_event_query(e.ev); r {
	case C.CUDA_SUCCESS:
		return true, nil
	case C.CUDA_ERROR_NOT_READY:
		return false, nil
	default:
		return false, cudaErr("cuEventQuery", r)
	}
}

// EventsDone reports whether every event is done (false at the first that is not),
// or the first error one reports (Done's).
func EventsDone(evs []CUDAEvent) (bool, error) {
	for _, e := range evs {
		if ok, err := e.Done(); err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// Wait blocks the calling thread until the event is done (cuEventSynchronize). Not for
// the progress thread, which must not block: it polls Done.
func (e CUDAEvent) Wait() error {
	if e.ev == nil {
		return nil
	}
	return cudaErr("cuEventSynchronize", C.ucxx_cuda_event_sync(e.ev))
}

// Destroy releases the event. It may be called before the event is done (the driver
// frees it once it is). Destroying the zero event does nothing; destroying an event
// twice is undefined, as it is in CUDA.
func (e CUDAEvent) Destroy() error {
	if e.ev == nil {
		return nil
	}
	return cudaErr("cuEventDestroy", C.ucxx_cuda_event_destroy(e.ev))
}

// MapHost pins n bytes of host memory at addr for every context and returns the
// address the current context's device reads them at (cuMemHostRegister, device
// mapped, then cuMemHostGetDevicePointer). A context must be current on the calling
// thread. Unmap with UnmapHost.
//
// Errors: a *CUDAError (CUDA_ERROR_NOT_SUPPORTED where the driver lacks the entry
// points; CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED for memory mapped already).
func (d *CUDADriver) MapHost(addr uintptr, n uint64) (uintptr, error) {
	d.check()
	var dptr C.CUdeviceptr
	var op *C.char
	if r := C.ucxx_cuda_host_map(C.uintptr_t(addr), C.size_t(n), &dptr, &op); r != C.CUDA_SUCCESS {
		return 0, cudaErr(C.GoString(op), r)
	}
	return uintptr(dptr), nil
}

// UnmapHost undoes MapHost.
func (d *CUDADriver) UnmapHost(addr uintptr) error {
	d.check()
	return cudaErr("cuMemHostUnregister", C.ucxx_cuda_host_unmap(C.uintptr_t(addr)))
}

// StreamWaitAtLeast queues on stream a wait, on the device, until the 64-bit word at
// device address devAddr is at least value (cuStreamWaitValue64, GEQ). The host does
// not wait. The stream's context must be current on the calling thread.
func (d *CUDADriver) StreamWaitAtLeast(stream uintptr, devAddr uintptr, value uint64) error {
	d.check()
	return cudaErr("cuStreamWaitValue64", C.ucxx_cuda_stream_wait_ge(C.uintptr_t(stream), C.CUdeviceptr(devAddr), C.uint64_t(value)))
}
