// C side of ucxx's CUDA driver access: libcuda.so.1 opened at run time.
//
// No CUDA header or library is needed to build: the few driver API types, values and
// entry points used here are declared below, with the numeric values of the CUDA
// driver API (cuda.h). ucxx_cuda_load opens the driver with dlopen and resolves every
// entry point; until it has succeeded, no other function here may be called.
//
// The driver API is thread-safe. Functions that allocate, free or copy need a current
// context on the calling thread (cuCtxSetCurrent); pointer and event queries need none
// (seen with the CUDA 13 driver on H200: cuda_test.go logs it).
#ifndef UCXX_CUDA_H
#define UCXX_CUDA_H

#include <stddef.h>
#include <stdint.h>

// Types, ABI-compatible with cuda.h (the handles are opaque pointers there too).
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUevent;
typedef void *CUstream;
typedef unsigned long long CUdeviceptr;

// CUresult values (cudaError_enum).
#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_STUB_LIBRARY 34
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_INVALID_DEVICE 101
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_NOT_READY 600

// CUctx_flags: CU_CTX_SYNC_MEMOPS (synchronous memory operations on the context's
// allocations, which UCX's cuda_copy requires and sets itself).
#define CU_CTX_SYNC_MEMOPS 0x80

// CUpointer_attribute values.
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_POINTER_ATTRIBUTE_IS_MANAGED 8
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define CU_POINTER_ATTRIBUTE_RANGE_START_ADDR 11
#define CU_POINTER_ATTRIBUTE_RANGE_SIZE 12

// CUmemorytype values.
#define CU_MEMORYTYPE_HOST 1
#define CU_MEMORYTYPE_DEVICE 2

// cuMemHostRegister flags, CUstreamWaitValue_flags, and the result of a missing
// optional entry point.
#define CU_MEMHOSTREGISTER_PORTABLE 1
#define CU_MEMHOSTREGISTER_DEVICEMAP 2
#define CU_STREAM_WAIT_VALUE_GEQ 0
#define CUDA_ERROR_NOT_SUPPORTED 801

// CUevent_flags value.
#define CU_EVENT_DISABLE_TIMING 2

// The implicit streams, as __cuda_array_interface__ v3 numbers them too.
#define CU_STREAM_LEGACY ((CUstream)0x1)
#define CU_STREAM_PER_THREAD ((CUstream)0x2)

// ucxx_cuda_load opens libcuda.so.1 (RTLD_NOW | RTLD_LOCAL) and resolves the entry
// points. It returns 0 on success, 1 when the library cannot be opened, 2 when an entry
// point is missing; err receives a description. Call it once (Go's sync.Once does); the
// library stays loaded for the life of the process.
int ucxx_cuda_load(char *err, size_t errlen);

// The wrappers below return the driver's CUresult. Where a wrapper makes more than one
// driver call, *op names the call that failed.
CUresult ucxx_cuda_init(void);
CUresult ucxx_cuda_device_count(int *count);
// ucxx_cuda_pci_bus_id writes the PCI bus id of device ordinal ("dddd:bb:dd.f") into
// buf, NUL-terminated.
CUresult ucxx_cuda_pci_bus_id(int ordinal, char *buf, int len, const char **op);
const char *ucxx_cuda_error_name(CUresult r); // NULL for a code the driver does not know

// Primary contexts: retain takes cuDeviceGet's handle for ordinal and a reference on
// its primary context, and gives the context the flags UCX's cuda_copy gives it the
// first time UCX meets memory of it, cuCtxSetFlags(CU_CTX_SYNC_MEMOPS), unless it has
// them already (where the driver has cuCtxSetFlags, CUDA 12.1 on). UCX's call waits for
// the device; made by the progress thread while a stream waits for that thread (a
// kernel behind a receive's done word) it never returned (H200s, UCX 1.22). UCX makes
// the same call when it opens its memory domain, against that risk, on the context
// current then; the progress thread has none. Made here, before this library queues
// work on the context, UCX's later calls find the flags as they want them.
// ucxx_cuda_ctx_flags reads the context's flags (CUDA_ERROR_NOT_SUPPORTED without
// cuCtxGetFlags).
CUresult ucxx_cuda_primary_retain(int ordinal, CUdevice *dev, CUcontext *ctx, const char **op);
CUresult ucxx_cuda_primary_release(CUdevice dev);
CUresult ucxx_cuda_ctx_flags(CUcontext ctx, unsigned int *flags);
CUresult ucxx_cuda_ctx_set_current(CUcontext ctx);
CUresult ucxx_cuda_ctx_get_current(CUcontext *ctx);
// ucxx_cuda_primary_active sets *active to 1 when device ordinal's primary context is
// active (someone holds it: the CUDA runtime once the application used the device),
// creating nothing (cuDevicePrimaryCtxGetState).
CUresult ucxx_cuda_primary_active(int ordinal, int *active);

// ucxx_cuda_in_use reports 1 when the process has loaded libcuda.so.1 and initialised
// it (cuInit) itself, 0 otherwise; it loads and initialises nothing (dlopen with
// RTLD_NOLOAD; cuDeviceGetCount answers CUDA_ERROR_NOT_INITIALIZED before cuInit).
// Callable before ucxx_cuda_load.
int ucxx_cuda_in_use(void);

// ucxx_cuda_sym is an entry point to resolve: its name and where its address goes.
typedef struct {
    const char *name;
    void **slot;
} ucxx_cuda_sym;

// ucxx_cuda_resolve opens libcuda.so.1 (one more reference, never dropped: other users
// in the process may hold it too) into *lib and resolves the n entry points of syms.
// It returns 0, 1 when the library cannot be opened, 2 when an entry point is missing;
// err says which. *lib stays valid for optional lookups (dlsym).
int ucxx_cuda_resolve(const ucxx_cuda_sym *syms, size_t n, void **lib, char *err, size_t errlen);

// ucxx_cuda_pointer_info reports what the driver knows of addr in one
// cuPointerGetAttributes call: *memtype is a CUmemorytype (0 for memory the driver
// does not know), *managed is 1 for managed memory, *device the device ordinal.
CUresult ucxx_cuda_pointer_info(uintptr_t addr, unsigned int *memtype, unsigned int *managed,
                                int *device);

// ucxx_cuda_pointer_range reports the allocation holding addr: its first address and
// its size (both 0 for memory the driver does not know).
CUresult ucxx_cuda_pointer_range(uintptr_t addr, uintptr_t *base, size_t *size);

// Memory, in the calling thread's current context.
CUresult ucxx_cuda_mem_alloc(size_t n, CUdeviceptr *out);
CUresult ucxx_cuda_mem_free(CUdeviceptr p);
CUresult ucxx_cuda_mem_info(size_t *free_bytes, size_t *total_bytes);
CUresult ucxx_cuda_copy_htod(CUdeviceptr dst, const void *src, size_t n);
CUresult ucxx_cuda_copy_dtoh(void *dst, CUdeviceptr src, size_t n);
CUresult ucxx_cuda_memset_async(CUdeviceptr dst, unsigned char value, size_t n, uintptr_t stream);

// ucxx_cuda_record_event creates an event without timing and records it on stream.
// With ctx NULL that happens in the calling thread's current context; otherwise ctx is
// made current for the two calls and the thread's previous context is restored after.
// On failure no event exists and *out is NULL.
CUresult ucxx_cuda_record_event(CUcontext ctx, uintptr_t stream, CUevent *out, const char **op);
// ucxx_cuda_mark_stream is ucxx_cuda_record_event for a stream that may be idle: when
// cuStreamQuery says everything queued on it is done, *out is NULL and no event is made.
CUresult ucxx_cuda_mark_stream(CUcontext ctx, uintptr_t stream, CUevent *out, const char **op);
// ucxx_cuda_mem_free_in frees p with ctx current for the call, restoring the thread's
// previous context after, as ucxx_cuda_record_event does.
CUresult ucxx_cuda_mem_free_in(CUcontext ctx, CUdeviceptr p, const char **op);
// ucxx_cuda_copy_dtoh_in copies n bytes from src to host address dst with ctx current
// for the call, as ucxx_cuda_mem_free_in.
CUresult ucxx_cuda_copy_dtoh_in(CUcontext ctx, uintptr_t dst, CUdeviceptr src, size_t n, const char **op);
CUresult ucxx_cuda_event_query(CUevent ev);
CUresult ucxx_cuda_event_sync(CUevent ev);
CUresult ucxx_cuda_event_destroy(CUevent ev);

// Host memory the device reads, and streams that wait on it. These entry points are
// optional: a driver without them returns CUDA_ERROR_NOT_SUPPORTED here.
//
// ucxx_cuda_host_map pins n bytes at ptr for every context (portable, device-mapped)
// and returns in *dptr the address the current context's device sees them at.
CUresult ucxx_cuda_host_map(uintptr_t ptr, size_t n, CUdeviceptr *dptr, const char **op);
CUresult ucxx_cuda_host_unmap(uintptr_t ptr);
// ucxx_cuda_stream_wait_ge queues on stream a wait until the 64-bit word at the
// device address addr is at least value.
CUresult ucxx_cuda_stream_wait_ge(uintptr_t stream, CUdeviceptr addr, uint64_t value);

#endif
