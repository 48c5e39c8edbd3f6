// C side of ucxx's CUDA execution: streams, events with timing, cross-stream waits,
// modules and kernel launches, asynchronous copies, and stream writes of a word. The
// entry points are resolved from libcuda.so.1 by ucxx_cudaexec_load, after
// ucxx_cuda_load (cuda.h) succeeded; no other function here may be called before.
//
// Every function here acts in the calling thread's current context (the Go side makes
// it current: CUDAContext.Use).
#ifndef UCXX_CUDAEXEC_H
#define UCXX_CUDAEXEC_H

#include "cuda.h"

typedef void *CUmodule;
typedef void *CUfunction;

// CUstream_flags, CUevent_flags.
#define CU_STREAM_NON_BLOCKING 1
#define CU_EVENT_DEFAULT 0

// The most kernel arguments ucxx_cudaexec_launch passes.
#define UCXX_MAX_KERNEL_ARGS 64

// ucxx_cudaexec_load resolves the entry points; 0 on success, 2 when one is missing
// (err names it). Call it once.
int ucxx_cudaexec_load(char *err, size_t errlen);

CUresult ucxx_cudaexec_stream_create(CUstream *out);
CUresult ucxx_cudaexec_stream_destroy(CUstream s);
CUresult ucxx_cudaexec_stream_query(CUstream s);
CUresult ucxx_cudaexec_stream_sync(CUstream s);
// ucxx_cudaexec_event_create creates an event, with timing when timing is not 0.
CUresult ucxx_cudaexec_event_create(int timing, CUevent *out);
CUresult ucxx_cudaexec_event_record(CUevent ev, uintptr_t s);
CUresult ucxx_cudaexec_event_elapsed(float *ms, CUevent start, CUevent stop);
// ucxx_cudaexec_stream_wait_event makes s wait, on the device, for ev.
CUresult ucxx_cudaexec_stream_wait_event(uintptr_t s, CUevent ev);
// ucxx_cudaexec_module_load loads a PTX (NUL-terminated) or cubin image.
CUresult ucxx_cudaexec_module_load(const void *image, CUmodule *out);
CUresult ucxx_cudaexec_module_function(CUmodule m, const char *name, CUfunction *out);
CUresult ucxx_cudaexec_module_unload(CUmodule m);
// ucxx_cudaexec_launch launches f on s; args holds nargs (at most UCXX_MAX_KERNEL_ARGS)
// argument values, one 8-byte slot each, in the kernel's parameter order: a 4-byte
// parameter is read from the low half of its slot (little-endian).
CUresult ucxx_cudaexec_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                              unsigned by, unsigned bz, unsigned shared, uintptr_t s,
                              uint64_t *args, int nargs);
// ucxx_cudaexec_launch_packed launches f on s with its parameters packed in one
// buffer of size bytes, laid out as the kernel declares them (the driver copies it).
CUresult ucxx_cudaexec_launch_packed(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                     unsigned by, unsigned bz, unsigned shared, uintptr_t s,
                                     void *params, size_t size);
// ucxx_cudaexec_copy_async copies n bytes from src to dst on s (unified addressing:
// host, device or peer, either way).
CUresult ucxx_cudaexec_copy_async(CUdeviceptr dst, CUdeviceptr src, size_t n, uintptr_t s);
// ucxx_cudaexec_stream_write queues on s a store of value into the 64-bit word at the
// device address addr (CUDA_ERROR_NOT_SUPPORTED where the driver lacks it).
CUresult ucxx_cudaexec_stream_write(uintptr_t s, CUdeviceptr addr, uint64_t value);
// The most operations one ucxx_cudaexec_stream_mem_ops call queues (the driver takes
// fewer than 256 in one cuStreamBatchMemOp).
#define UCXX_MAX_STREAM_MEM_OPS 64
// ucxx_cudaexec_stream_mem_ops queues on s, in one driver call (cuStreamBatchMemOp),
// n operations on 64-bit words given as triples (wait, address, value): a wait until
// the word is at least value where wait is not 0, else a store of value.
// CUDA_ERROR_NOT_SUPPORTED where the driver lacks the entry point.
CUresult ucxx_cudaexec_stream_mem_ops(uintptr_t s, const uint64_t *triples, int n);

#endif
