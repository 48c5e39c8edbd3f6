#include <stdlib.h>
#include "cuda.h"

#include <dlfcn.h>
#include <stdio.h>

// The driver's entry points, resolved once by ucxx_cuda_load and read-only after. The
// versioned names are the ones cuda.h maps the plain names to (cuMemAlloc is
// cuMemAlloc_v2, and so on); the plain names of those are old ABIs.
static struct {
    CUresult (*cuInit)(unsigned int flags);
    CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
    CUresult (*cuDeviceGetCount)(int *count);
    CUresult (*cuDeviceGetPCIBusId)(char *bus_id, int len, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev);
    CUresult (*cuDevicePrimaryCtxGetState)(CUdevice dev, unsigned int *flags, int *active);
    CUresult (*cuCtxSetCurrent)(CUcontext ctx);
    CUresult (*cuCtxGetCurrent)(CUcontext *ctx);
    CUresult (*cuPointerGetAttributes)(unsigned int n, int *attrs, void **data, CUdeviceptr ptr);
    CUresult (*cuMemAlloc)(CUdeviceptr *p, size_t n);
    CUresult (*cuMemFree)(CUdeviceptr p);
    CUresult (*cuMemGetInfo)(size_t *free_bytes, size_t *total_bytes);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void *src, size_t n);
    CUresult (*cuMemcpyDtoH)(void *dst, CUdeviceptr src, size_t n);
    CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t n, CUstream s);
    CUresult (*cuEventCreate)(CUevent *ev, unsigned int flags);
    CUresult (*cuEventRecord)(CUevent ev, CUstream s);
    CUresult (*cuEventQuery)(CUevent ev);
    CUresult (*cuStreamQuery)(CUstream s);
    CUresult (*cuEventSynchronize)(CUevent ev);
    CUresult (*cuEventDestroy)(CUevent ev);
    CUresult (*cuGetErrorName)(CUresult r, const char **name);
} api;

// Optional entry points: NULL where the driver lacks them.
static struct {
    CUresult (*cuMemHostRegister)(void *p, size_t n, unsigned int flags);
    CUresult (*cuMemHostUnregister)(void *p);
    CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr *dptr, void *p, unsigned int flags);
    CUresult (*cuStreamWaitValue64)(CUstream s, CUdeviceptr addr, uint64_t value, unsigned int flags);
    CUresult (*cuCtxGetFlags)(unsigned int *flags);
    CUresult (*cuCtxSetFlags)(unsigned int flags);
} opt;

int ucxx_cuda_resolve(const ucxx_cuda_sym *syms, size_t n, void **lib, char *err, size_t errlen) {
    *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (*lib == NULL) {
        const char *why = dlerror();
        snprintf(err, errlen, "%s", why ? why : "dlopen libcuda.so.1 failed");
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        void *p = dlsym(*lib, syms[i].name);
        if (p == NULL) {
            snprintf(err, errlen, "libcuda.so.1 has no %s", syms[i].name);
            // Leave the library loaded: another user in the process may hold it too,
            // and nothing here has been resolved that could be used.
            return 2;
        }
        *syms[i].slot = p;
    }
    return 0;
}

int ucxx_cuda_load(char *err, size_t errlen) {
    const ucxx_cuda_sym syms[] = {
        {"cuInit", (void **)&api.cuInit},
        {"cuDeviceGet", (void **)&api.cuDeviceGet},
        {"cuDeviceGetCount", (void **)&api.cuDeviceGetCount},
        {"cuDeviceGetPCIBusId", (void **)&api.cuDeviceGetPCIBusId},
        {"cuDevicePrimaryCtxRetain", (void **)&api.cuDevicePrimaryCtxRetain},
        {"cuDevicePrimaryCtxRelease_v2", (void **)&api.cuDevicePrimaryCtxRelease},
        {"cuDevicePrimaryCtxGetState", (void **)&api.cuDevicePrimaryCtxGetState},
        {"cuCtxSetCurrent", (void **)&api.cuCtxSetCurrent},
        {"cuCtxGetCurrent", (void **)&api.cuCtxGetCurrent},
        {"cuPointerGetAttributes", (void **)&api.cuPointerGetAttributes},
        {"cuMemAlloc_v2", (void **)&api.cuMemAlloc},
        {"cuMemFree_v2", (void **)&api.cuMemFree},
        {"cuMemGetInfo_v2", (void **)&api.cuMemGetInfo},
        {"cuMemcpyHtoD_v2", (void **)&api.cuMemcpyHtoD},
        {"cuMemcpyDtoH_v2", (void **)&api.cuMemcpyDtoH},
        {"cuMemsetD8Async", (void **)&api.cuMemsetD8Async},
        {"cuEventCreate", (void **)&api.cuEventCreate},
        {"cuEventRecord", (void **)&api.cuEventRecord},
        {"cuEventQuery", (void **)&api.cuEventQuery},
        {"cuStreamQuery", (void **)&api.cuStreamQuery},
        {"cuEventSynchronize", (void **)&api.cuEventSynchronize},
        {"cuEventDestroy_v2", (void **)&api.cuEventDestroy},
        {"cuGetErrorName", (void **)&api.cuGetErrorName},
    };
    void *lib;
    int rc = ucxx_cuda_resolve(syms, sizeof(syms) / sizeof(syms[0]), &lib, err, errlen);
    if (rc != 0) return rc;
    opt.cuMemHostRegister = dlsym(lib, "cuMemHostRegister_v2");
    opt.cuMemHostUnregister = dlsym(lib, "cuMemHostUnregister");
    opt.cuMemHostGetDevicePointer = dlsym(lib, "cuMemHostGetDevicePointer_v2");
    opt.cuStreamWaitValue64 = dlsym(lib, "cuStreamWaitValue64_v2");
    if (opt.cuStreamWaitValue64 == NULL) opt.cuStreamWaitValue64 = dlsym(lib, "cuStreamWaitValue64");
    opt.cuCtxGetFlags = dlsym(lib, "cuCtxGetFlags");
    opt.cuCtxSetFlags = dlsym(lib, "cuCtxSetFlags");
    return 0;
}


CUresult ucxx_cuda_host_map(uintptr_t ptr, size_t n, CUdeviceptr *dptr, const char **op) {
    *op = "cuMemHostRegister";
    if (opt.cuMemHostRegister == NULL || opt.cuMemHostGetDevicePointer == NULL) return CUDA_ERROR_NOT_SUPPORTED;
    CUresult r = opt.cuMemHostRegister((void *)ptr, n, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
    if (r != CUDA_SUCCESS) return r;
    *op = "cuMemHostGetDevicePointer";
    r = opt.cuMemHostGetDevicePointer(dptr, (void *)ptr, 0);
    if (r != CUDA_SUCCESS) opt.cuMemHostUnregister((void *)ptr);
    return r;
}

CUresult ucxx_cuda_host_unmap(uintptr_t ptr) {
    if (opt.cuMemHostUnregister == NULL) return CUDA_ERROR_NOT_SUPPORTED;
    return opt.cuMemHostUnregister((void *)ptr);
}

CUresult ucxx_cuda_stream_wait_ge(uintptr_t stream, CUdeviceptr addr, uint64_t value) {
    if (opt.cuStreamWaitValue64 == NULL) return CUDA_ERROR_NOT_SUPPORTED;
    return opt.cuStreamWaitValue64((CUstream)stream, addr, value, CU_STREAM_WAIT_VALUE_GEQ);
}

CUresult ucxx_cuda_init(void) { return api.cuInit(0); }

CUresult ucxx_cuda_device_count(int *count) { return api.cuDeviceGetCount(count); }

CUresult ucxx_cuda_pci_bus_id(int ordinal, char *buf, int len, const char **op) {
    CUdevice dev;
    buf[0] = 0;
    CUresult r = api.cuDeviceGet(&dev, ordinal);
    if (r != CUDA_SUCCESS) {
        *op = "cuDeviceGet";
        return r;
    }
    r = api.cuDeviceGetPCIBusId(buf, len, dev);
    if (r != CUDA_SUCCESS) *op = "cuDeviceGetPCIBusId";
    return r;
}

const char *ucxx_cuda_error_name(CUresult r) {
    const char *name = NULL;
    if (api.cuGetErrorName == NULL || api.cuGetErrorName(r, &name) != CUDA_SUCCESS) return NULL;
    return name;
}

CUresult ucxx_cuda_primary_retain(int ordinal, CUdevice *dev, CUcontext *ctx, const char **op) {
    *ctx = NULL;
    CUresult r = api.cuDeviceGet(dev, ordinal);
    if (r != CUDA_SUCCESS) {
        *op = "cuDeviceGet";
        return r;
    }
    r = api.cuDevicePrimaryCtxRetain(ctx, *dev);
    if (r != CUDA_SUCCESS) {
        *op = "cuDevicePrimaryCtxRetain";
        return r;
    }
    if (opt.cuCtxGetFlags == NULL || opt.cuCtxSetFlags == NULL) return CUDA_SUCCESS;
    // The flags belong to the current context: make ctx current for the calls and put
    // back what the thread had (all within this one C call, so on one thread). UCX's
    // value; the driver keeps CU_CTX_MAP_HOST on beside it, so UCX's own call later
    // changes nothing.
    CUcontext was = NULL;
    api.cuCtxGetCurrent(&was);
    if (api.cuCtxSetCurrent(*ctx) != CUDA_SUCCESS) return CUDA_SUCCESS;
    unsigned int flags = 0;
    // UCXGO_NO_SYNC_MEMOPS (not "0") leaves the context as it is: to measure what the
    // flag costs (cuCtxSetFlags replaces the context's flags).
    const char *off = getenv("UCXGO_NO_SYNC_MEMOPS");
    if ((off == NULL || off[0] == '\0' || off[0] == '0') &&
        opt.cuCtxGetFlags(&flags) == CUDA_SUCCESS && (flags & CU_CTX_SYNC_MEMOPS) == 0) {
        opt.cuCtxSetFlags(CU_CTX_SYNC_MEMOPS); // best effort: UCX sets it otherwise
    }
    api.cuCtxSetCurrent(was);
    return CUDA_SUCCESS;
}

CUresult ucxx_cuda_primary_active(int ordinal, int *active) {
    *active = 0;
    CUdevice dev;
    CUresult r = api.cuDeviceGet(&dev, ordinal);
    if (r != CUDA_SUCCESS) return r;
    unsigned int flags = 0;
    return api.cuDevicePrimaryCtxGetState(dev, &flags, active);
}

int ucxx_cuda_in_use(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (lib == NULL) return 0;
    CUresult (*count)(int *) = (CUresult(*)(int *))dlsym(lib, "cuDeviceGetCount");
    int n = 0;
    int in_use = count != NULL && count(&n) == CUDA_SUCCESS;
    dlclose(lib); // drops only the reference RTLD_NOLOAD took
    return in_use;
}

CUresult ucxx_cuda_ctx_flags(CUcontext ctx, unsigned int *flags) {
    if (opt.cuCtxGetFlags == NULL) return CUDA_ERROR_NOT_SUPPORTED;
    CUcontext was = NULL;
    api.cuCtxGetCurrent(&was);
    CUresult r = api.cuCtxSetCurrent(ctx);
    if (r != CUDA_SUCCESS) return r;
    r = opt.cuCtxGetFlags(flags);
    api.cuCtxSetCurrent(was);
    return r;
}

CUresult ucxx_cuda_primary_release(CUdevice dev) { return api.cuDevicePrimaryCtxRelease(dev); }

CUresult ucxx_cuda_ctx_set_current(CUcontext ctx) { return api.cuCtxSetCurrent(ctx); }

CUresult ucxx_cuda_ctx_get_current(CUcontext *ctx) { return api.cuCtxGetCurrent(ctx); }

CUresult ucxx_cuda_pointer_info(uintptr_t addr, unsigned int *memtype, unsigned int *managed,
                                int *device) {
    // The same three attributes UCX's cuda_copy memory detection asks for. Unlike
    // cuPointerGetAttribute, the plural call reports memory the driver does not know
    // as success with zeroed attributes.
    int attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    void *data[3] = {memtype, managed, device};
    *memtype = 0;
    *managed = 0;
    *device = -1;
    return api.cuPointerGetAttributes(3, attrs, data, (CUdeviceptr)addr);
}

CUresult ucxx_cuda_pointer_range(uintptr_t addr, uintptr_t *base, size_t *size) {
    // The allocation holding addr, without a current context (unlike
    // cuMemGetAddressRange).
    int attrs[2] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    CUdeviceptr start = 0;
    size_t n = 0;
    void *data[2] = {&start, &n};
    CUresult r = api.cuPointerGetAttributes(2, attrs, data, (CUdeviceptr)addr);
    *base = (uintptr_t)start;
    *size = n;
    return r;
}

CUresult ucxx_cuda_mem_alloc(size_t n, CUdeviceptr *out) {
    *out = 0;
    return api.cuMemAlloc(out, n);
}

CUresult ucxx_cuda_mem_free(CUdeviceptr p) { return api.cuMemFree(p); }

CUresult ucxx_cuda_mem_info(size_t *free_bytes, size_t *total_bytes) {
    return api.cuMemGetInfo(free_bytes, total_bytes);
}

CUresult ucxx_cuda_copy_htod(CUdeviceptr dst, const void *src, size_t n) {
    return api.cuMemcpyHtoD(dst, src, n);
}

CUresult ucxx_cuda_copy_dtoh(void *dst, CUdeviceptr src, size_t n) {
    return api.cuMemcpyDtoH(dst, src, n);
}

CUresult ucxx_cuda_memset_async(CUdeviceptr dst, unsigned char value, size_t n, uintptr_t stream) {
    return api.cuMemsetD8Async(dst, value, n, (CUstream)stream);
}

// ctx_enter makes ctx current on the calling thread unless it already is: *prev gets
// the thread's context before, *switched whether it changed.
static CUresult ctx_enter(CUcontext ctx, CUcontext *prev, int *switched, const char **op) {
    *prev = NULL;
    *switched = 0;
    CUresult r = api.cuCtxGetCurrent(prev);
    if (r != CUDA_SUCCESS) {
        *op = "cuCtxGetCurrent";
        return r;
    }
    if (*prev == ctx) return CUDA_SUCCESS;
    r = api.cuCtxSetCurrent(ctx);
    if (r != CUDA_SUCCESS) {
        *op = "cuCtxSetCurrent";
        return r;
    }
    *switched = 1;
    return CUDA_SUCCESS;
}

// ctx_leave restores what ctx_enter changed, and returns r, or the restore's failure
// when r is a success.
static CUresult ctx_leave(CUresult r, CUcontext prev, int switched, const char **op) {
    if (!switched) return r;
    CUresult rr = api.cuCtxSetCurrent(prev);
    if (r == CUDA_SUCCESS && rr != CUDA_SUCCESS) {
        *op = "cuCtxSetCurrent";
        return rr;
    }
    return r;
}

// record_event is ucxx_cuda_record_event and, with if_busy, ucxx_cuda_mark_stream: an
// event recorded on stream in ctx (NULL: the current context), or none (*out NULL)
// when if_busy and cuStreamQuery finds the stream's work all done.
static CUresult record_event(CUcontext ctx, uintptr_t stream, int if_busy, CUevent *out, const char **op) {
    CUcontext prev = NULL;
    int switched = 0;
    CUresult r;
    *out = NULL;
    if (ctx != NULL) {
        r = ctx_enter(ctx, &prev, &switched, op);
        if (r != CUDA_SUCCESS) return r;
    }
    CUevent ev = NULL;
    r = if_busy ? api.cuStreamQuery((CUstream)stream) : CUDA_ERROR_NOT_READY;
    if (r == CUDA_ERROR_NOT_READY) {
        r = api.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
        if (r != CUDA_SUCCESS) {
            *op = "cuEventCreate";
            ev = NULL;
        } else {
            r = api.cuEventRecord(ev, (CUstream)stream);
            if (r != CUDA_SUCCESS) *op = "cuEventRecord";
        }
    } else if (r != CUDA_SUCCESS) {
        *op = "cuStreamQuery";
    }
    r = ctx_leave(r, prev, switched, op);
    if (r != CUDA_SUCCESS) {
        if (ev != NULL) api.cuEventDestroy(ev);
        return r;
    }
    *out = ev;
    return CUDA_SUCCESS;
}

CUresult ucxx_cuda_record_event(CUcontext ctx, uintptr_t stream, CUevent *out, const char **op) {
    return record_event(ctx, stream, 0, out, op);
}

CUresult ucxx_cuda_mark_stream(CUcontext ctx, uintptr_t stream, CUevent *out, const char **op) {
    return record_event(ctx, stream, 1, out, op);
}

CUresult ucxx_cuda_mem_free_in(CUcontext ctx, CUdeviceptr p, const char **op) {
    CUcontext prev;
    int switched;
    CUresult r = ctx_enter(ctx, &prev, &switched, op);
    if (r != CUDA_SUCCESS) return r;
    r = api.cuMemFree(p);
    if (r != CUDA_SUCCESS) *op = "cuMemFree";
    return ctx_leave(r, prev, switched, op);
}

CUresult ucxx_cuda_copy_dtoh_in(CUcontext ctx, uintptr_t dst, CUdeviceptr src, size_t n, const char **op) {
    CUcontext prev;
    int switched;
    CUresult r = ctx_enter(ctx, &prev, &switched, op);
    if (r != CUDA_SUCCESS) return r;
    r = api.cuMemcpyDtoH((void *)dst, src, n);
    if (r != CUDA_SUCCESS) *op = "cuMemcpyDtoH";
    return ctx_leave(r, prev, switched, op);
}

CUresult ucxx_cuda_event_query(CUevent ev) { return api.cuEventQuery(ev); }

CUresult ucxx_cuda_event_sync(CUevent ev) { return api.cuEventSynchronize(ev); }

CUresult ucxx_cuda_event_destroy(CUevent ev) { return api.cuEventDestroy(ev); }
