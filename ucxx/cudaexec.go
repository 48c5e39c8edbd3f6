package ucxx

// CUDA execution: what a scheduler needs to run work on GPUs itself, with the driver
// API (cudaexec.c): streams of its own, events that time and order work across
// streams, modules loaded from PTX or cubin and kernels launched from them, copies
// and word stores queued on streams. Everything here acts in the calling thread's
// current context: run it inside CUDAContext.Use, which locks the goroutine to its
// thread and makes the context current for the call.

// #cgo noescape ucxx_cudaexec_launch
// #cgo nocallback ucxx_cudaexec_launch
// #cgo nocallback ucxx_cudaexec_event_record
// #cgo nocallback ucxx_cudaexec_stream_wait_event
// #cgo nocallback ucxx_cudaexec_copy_async
// #include <stdlib.h>
// #include "cudaexec.h"
import "C"

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"
)

// loadExec resolves the execution entry points, after the driver itself (CUDA).
func loadExec() error {
	var msg [256]C.char
	if C.ucxx_cudaexec_load(&msg[0], C.size_t(len(msg))) != 0 {
		return fmt.Errorf("ucxx: load CUDA driver: %s", C.GoString(&msg[0]))
	}
	return nil
}

// Use runs f on the calling goroutine's OS thread, locked to it for the call, with c
// current; the thread's previous context (or none) is current again after. The CUDA
// calls f makes act in c.
//
// Errors: f's, or a *CUDAError from making c current or restoring the previous one.
func (c CUDAContext) Use(f func() error) error {
	c.check("Use")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var prev C.CUcontext
	if err := cudaErr("cuCtxGetCurrent", C.ucxx_cuda_ctx_get_current(&prev)); err != nil {
		return err
	}
	if prev != c.ctx {
		if err := cudaErr("cuCtxSetCurrent", C.ucxx_cuda_ctx_set_current(c.ctx)); err != nil {
			return err
		}
		defer C.ucxx_cuda_ctx_set_current(prev)
	}
	return f()
}

// CUDAStream is a stream created by NewStream: non-blocking (it does not wait for the
// legacy default stream). The zero value is no stream.
type CUDAStream struct {
	s C.CUstream
}

// NewStream creates a non-blocking stream in the current context.
//
// Errors: a *CUDAError from cuStreamCreate.
func (d *CUDADriver) NewStream() (CUDAStream, error) {
	d.check()
	var s CUDAStream
	if err := cudaErr("cuStreamCreate", C.ucxx_cudaexec_stream_create(&s.s)); err != nil {
		return CUDAStream{}, err
	}
	return s, nil
}

// Handle is the stream's CUstream, as __cuda_array_interface__ and the stream
// arguments of this package take it.
func (s CUDAStream) Handle() uintptr { return uintptr(s.s) }

// Destroy releases the stream; work queued on it still runs to its end.
func (s CUDAStream) Destroy() error {
	return cudaErr("cuStreamDestroy", C.ucxx_cudaexec_stream_destroy(s.s))
}

// Done reports whether every piece of work queued on the stream has finished. Work
// that failed is reported as its error.
func (s CUDAStream) Done() (bool, error) {
	switch r := C.ucxx_cudaexec_stream_query(s.s); r {
	case C.CUDA_SUCCESS:
		return true, nil
	case C.CUDA_ERROR_NOT_READY:
		return false, nil
	default:
		return false, cudaErr("cuStreamQuery", r)
	}
}

// Sync blocks the calling thread until the stream's work has finished.
func (s CUDAStream) Sync() error {
	return cudaErr("cuStreamSynchronize", C.ucxx_cudaexec_stream_sync(s.s))
}

// NewEvent creates an event in the current context, not recorded yet (Done reports
// true until it is); with timing, Elapsed can measure between two such events.
//
// Errors: a *CUDAError from cuEventCreate.
func (d *CUDADriver) NewEvent(timing bool) (CUDAEvent, error) {
	d.check()
	var e CUDAEvent
	t := C.int(0)
	if timing {
		t = 1
	}
	if err := cudaErr("cuEventCreate", C.ucxx_cudaexec_event_create(t, &e.ev)); err != nil {
		return CUDAEvent{}, err
	}
	return e, nil
}

// Record marks the end of the work queued on stream so far; recording again moves the
// mark. The event's context must be the stream's.
func (e CUDAEvent) Record(stream uintptr) error {
	return cudaErr("cuEventRecord", C.ucxx_cudaexec_event_record(e.ev, C.uintptr_t(stream)))
}

// StreamWaitEvent makes work queued on stream after this call wait, on the device, for
// the event's work: the host does not wait. The event may belong to another stream of
// any context.
func (d *CUDADriver) StreamWaitEvent(stream uintptr, e CUDAEvent) error {
	d.check()
	return cudaErr("cuStreamWaitEvent", C.ucxx_cudaexec_stream_wait_event(C.uintptr_t(stream), e.ev))
}

// Elapsed is the time between two done events made with timing.
//
// Errors: a *CUDAError (CUDA_ERROR_NOT_READY while one is not done,
// CUDA_ERROR_INVALID_HANDLE for an event without timing).
func Elapsed(start, stop CUDAEvent) (time.Duration, error) {
	var ms C.float
	if err := cudaErr("cuEventElapsedTime", C.ucxx_cudaexec_event_elapsed(&ms, start.ev, stop.ev)); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// CUDAModule is code loaded into a context: its kernels are CUDAFunctions.
type CUDAModule struct {
	m C.CUmodule
}

// LoadModule loads a PTX or cubin image into the current context (cuModuleLoadData;
// the driver compiles PTX for the device). The image is copied for the call.
//
// Errors: a *CUDAError (CUDA_ERROR_INVALID_PTX, CUDA_ERROR_INVALID_IMAGE, ...).
func (d *CUDADriver) LoadModule(image []byte) (CUDAModule, error) {
	d.check()
	buf := C.CBytes(append(append([]byte(nil), image...), 0)) // PTX must end with a NUL
	defer C.free(buf)
	var m CUDAModule
	if err := cudaErr("cuModuleLoadData", C.ucxx_cudaexec_module_load(buf, &m.m)); err != nil {
		return CUDAModule{}, err
	}
	return m, nil
}

// Function returns the module's kernel named name (its extern "C" name).
//
// Errors: a *CUDAError (CUDA_ERROR_NOT_FOUND).
func (m CUDAModule) Function(name string) (CUDAFunction, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var f CUDAFunction
	if err := cudaErr("cuModuleGetFunction", C.ucxx_cudaexec_module_function(m.m, cname, &f.f)); err != nil {
		return CUDAFunction{}, err
	}
	return f, nil
}

// Unload unloads the module, in the current context; its functions are gone with it.
func (m CUDAModule) Unload() error {
	return cudaErr("cuModuleUnload", C.ucxx_cudaexec_module_unload(m.m))
}

// CUDAFunction is a kernel of a loaded module.
type CUDAFunction struct {
	f C.CUfunction
}

// LaunchShape is a kernel launch's grid and block, in each of x, y and z, and its
// dynamic shared memory.
type LaunchShape struct {
	Grid, Block [3]uint32
	SharedBytes uint32
}

// MaxKernelArgs is the most arguments Launch passes.
const MaxKernelArgs = C.UCXX_MAX_KERNEL_ARGS

// Launch queues the kernel on stream with args, one 8-byte slot per parameter in its
// order (a pointer or 8-byte scalar as is; a 4-byte scalar in the low half), read
// during the call.
//
// Errors: a *CUDAError from cuLaunchKernel (CUDA_ERROR_INVALID_VALUE for more than
// MaxKernelArgs arguments or a bad shape).
func (f CUDAFunction) Launch(shape LaunchShape, stream uintptr, args []uint64) error {
	if len(args) > MaxKernelArgs {
		return cudaErr("cuLaunchKernel", C.CUDA_ERROR_INVALID_VALUE)
	}
	var a *C.uint64_t
	if len(args) > 0 {
		a = (*C.uint64_t)(unsafe.Pointer(&args[0]))
	}
	g, b := shape.Grid, shape.Block
	r := C.ucxx_cudaexec_launch(f.f, C.uint(g[0]), C.uint(g[1]), C.uint(g[2]), C.uint(b[0]), C.uint(b[1]), C.uint(b[2]),
		C.uint(shape.SharedBytes), C.uintptr_t(stream), a, C.int(len(args)))
	runtime.KeepAlive(args)
	return cudaErr("cuLaunchKernel", r)
}

// MaxPackedParams is the most parameter bytes LaunchPacked passes: the driver's
// limit on a kernel's parameters on every device.
const MaxPackedParams = 4096

// LaunchPacked queues the kernel on stream with its parameters packed in params,
// laid out as the kernel declares them (C's struct layout), read during the call: a
// kernel taking one struct by value receives params as that struct.
//
// Errors: a *CUDAError from cuLaunchKernel (CUDA_ERROR_INVALID_VALUE for an empty or
// larger than MaxPackedParams buffer, or one the kernel's parameters do not fit).
func (f CUDAFunction) LaunchPacked(shape LaunchShape, stream uintptr, params []byte) error {
	if len(params) == 0 || len(params) > MaxPackedParams {
		return cudaErr("cuLaunchKernel", C.CUDA_ERROR_INVALID_VALUE)
	}
	g, b := shape.Grid, shape.Block
	r := C.ucxx_cudaexec_launch_packed(f.f, C.uint(g[0]), C.uint(g[1]), C.uint(g[2]), C.uint(b[0]), C.uint(b[1]), C.uint(b[2]),
		C.uint(shape.SharedBytes), C.uintptr_t(stream), unsafe.Pointer(&params[0]), C.size_t(len(params)))
	runtime.KeepAlive(params)
	return cudaErr("cuLaunchKernel", r)
}

// CopyAsync queues on stream a copy of n bytes from src to dst, each host or device
// memory of any device (unified addressing). Host memory that is not pinned is copied
// synchronously with respect to the host.
func (d *CUDADriver) CopyAsync(dst, src uintptr, n uint64, stream uintptr) error {
	d.check()
	return cudaErr("cuMemcpyAsync", C.ucxx_cudaexec_copy_async(C.CUdeviceptr(dst), C.CUdeviceptr(src), C.size_t(n), C.uintptr_t(stream)))
}

// StreamWriteWord queues on stream a store of value into the 64-bit word at device
// address dev (host memory mapped by MapHost, or device memory): a host thread or
// another stream waiting on the word sees it once the stream's work before it is done.
//
// Errors: a *CUDAError (CUDA_ERROR_NOT_SUPPORTED where the driver lacks the entry
// point).
func (d *CUDADriver) StreamWriteWord(stream uintptr, dev uintptr, value uint64) error {
	d.check()
	return cudaErr("cuStreamWriteValue64", C.ucxx_cudaexec_stream_write(C.uintptr_t(stream), C.CUdeviceptr(dev), C.uint64_t(value)))
}

// StreamWordOp is one operation on a 64-bit word (host memory mapped by MapHost, or
// device memory) that StreamWordOps queues: with Wait, a wait on the device until the
// word is at least Value (StreamWaitAtLeast's); else a store of Value
// (StreamWriteWord's).
type StreamWordOp struct {
	Wait  bool
	Addr  uintptr
	Value uint64
}

// MaxStreamWordOps is the most operations one driver call of StreamWordOps queues.
const MaxStreamWordOps = C.UCXX_MAX_STREAM_MEM_OPS

// StreamWordOps queues ops on stream, in order, as StreamWaitAtLeast and StreamWriteWord
// would one by one, in one driver call per MaxStreamWordOps (cuStreamBatchMemOp),
// and returns how many it queued (all of them unless it failed). scratch is reused
// for the call's arguments (3 words an op; nil: allocated). The stream's context must
// be current on the calling thread.
//
// Errors: a *CUDAError (CUDA_ERROR_NOT_SUPPORTED where the driver lacks the entry
// point: queue the rest one by one then).
func (d *CUDADriver) StreamWordOps(stream uintptr, ops []StreamWordOp, scratch *[]uint64) (queued int, err error) {
	d.check()
	var local []uint64
	if scratch == nil {
		scratch = &local
	}
	for len(ops) > 0 {
		k := min(len(ops), MaxStreamWordOps)
		words := (*scratch)[:0]
		for _, op := range ops[:k] {
			w := uint64(0)
			if op.Wait {
				w = 1
			}
			words = append(words, w, uint64(op.Addr), op.Value)
		}
		*scratch = words
		r := C.ucxx_cudaexec_stream_mem_ops(C.uintptr_t(stream), (*C.uint64_t)(unsafe.Pointer(&words[0])), C.int(k))
		if err := cudaErr("cuStreamBatchMemOp", r); err != nil {
			return queued, err
		}
		ops, queued = ops[k:], queued+k
	}
	return queued, nil
}
