#include "cudaexec.h"

#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

// The entry points, resolved once by ucxx_cudaexec_load and read-only after.
static struct {
    CUresult (*cuStreamCreate)(CUstream *s, unsigned int flags);
    CUresult (*cuStreamDestroy)(CUstream s);
    CUresult (*cuStreamQuery)(CUstream s);
    CUresult (*cuStreamSynchronize)(CUstream s);
    CUresult (*cuEventCreate)(CUevent *ev, unsigned int flags);
    CUresult (*cuEventRecord)(CUevent ev, CUstream s);
    CUresult (*cuEventElapsedTime)(float *ms, CUevent start, CUevent stop);
    CUresult (*cuStreamWaitEvent)(CUstream s, CUevent ev, unsigned int flags);
    CUresult (*cuModuleLoadData)(CUmodule *m, const void *image);
    CUresult (*cuModuleGetFunction)(CUfunction *f, CUmodule m, const char *name);
    CUresult (*cuModuleUnload)(CUmodule m);
    CUresult (*cuLaunchKernel)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shared, CUstream s, void **params,
                               void **extra);
    CUresult (*cuMemcpyAsync)(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
} exec_api;

// Optional: NULL where the driver lacks it.
static CUresult (*cuStreamWriteValue64)(CUstream s, CUdeviceptr addr, uint64_t value, unsigned int flags);

// CUstreamBatchMemOpParams as cuda.h lays it out (a 48-byte union; the wait and write
// forms share this head), and its operation codes.
typedef struct {
    unsigned int operation;
    CUdeviceptr address;
    uint64_t value64;
    unsigned int flags;
    CUdeviceptr alias;
    uint64_t pad;
} ucxx_stream_mem_op;
_Static_assert(sizeof(ucxx_stream_mem_op) == 48, "CUstreamBatchMemOpParams is 48 bytes");
_Static_assert(offsetof(ucxx_stream_mem_op, address) == 8 && offsetof(ucxx_stream_mem_op, value64) == 16 &&
                   offsetof(ucxx_stream_mem_op, flags) == 24 && offsetof(ucxx_stream_mem_op, alias) == 32,
               "CUstreamMemOpWaitValueParams' field offsets");
#define UCXX_MEM_OP_WAIT_VALUE_64 4
#define UCXX_MEM_OP_WRITE_VALUE_64 5
static CUresult (*cuStreamBatchMemOp)(CUstream s, unsigned int count, ucxx_stream_mem_op *ops, unsigned int flags);

int ucxx_cudaexec_load(char *err, size_t errlen) {
    const ucxx_cuda_sym syms[] = {
        {"cuStreamCreate", (void **)&exec_api.cuStreamCreate},
        {"cuStreamDestroy_v2", (void **)&exec_api.cuStreamDestroy},
        {"cuStreamQuery", (void **)&exec_api.cuStreamQuery},
        {"cuStreamSynchronize", (void **)&exec_api.cuStreamSynchronize},
        {"cuEventCreate", (void **)&exec_api.cuEventCreate},
        {"cuEventRecord", (void **)&exec_api.cuEventRecord},
        {"cuEventElapsedTime", (void **)&exec_api.cuEventElapsedTime},
        {"cuStreamWaitEvent", (void **)&exec_api.cuStreamWaitEvent},
        {"cuModuleLoadData", (void **)&exec_api.cuModuleLoadData},
        {"cuModuleGetFunction", (void **)&exec_api.cuModuleGetFunction},
        {"cuModuleUnload", (void **)&exec_api.cuModuleUnload},
        {"cuLaunchKernel", (void **)&exec_api.cuLaunchKernel},
        {"cuMemcpyAsync", (void **)&exec_api.cuMemcpyAsync},
    };
    void *lib;
    int rc = ucxx_cuda_resolve(syms, sizeof(syms) / sizeof(syms[0]), &lib, err, errlen);
    if (rc != 0) return rc;
    cuStreamWriteValue64 = dlsym(lib, "cuStreamWriteValue64_v2");
    if (cuStreamWriteValue64 == NULL) cuStreamWriteValue64 = dlsym(lib, "cuStreamWriteValue64");
    cuStreamBatchMemOp = dlsym(lib, "cuStreamBatchMemOp_v2");
    if (cuStreamBatchMemOp == NULL) cuStreamBatchMemOp = dlsym(lib, "cuStreamBatchMemOp");
    return 0;
}

CUresult ucxx_cudaexec_stream_create(CUstream *out) {
    *out = NULL;
    return exec_api.cuStreamCreate(out, CU_STREAM_NON_BLOCKING);
}

CUresult ucxx_cudaexec_stream_destroy(CUstream s) { return exec_api.cuStreamDestroy(s); }

CUresult ucxx_cudaexec_stream_query(CUstream s) { return exec_api.cuStreamQuery(s); }

CUresult ucxx_cudaexec_stream_sync(CUstream s) { return exec_api.cuStreamSynchronize(s); }

CUresult ucxx_cudaexec_event_create(int timing, CUevent *out) {
    *out = NULL;
    return exec_api.cuEventCreate(out, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING);
}

CUresult ucxx_cudaexec_event_record(CUevent ev, uintptr_t s) { return exec_api.cuEventRecord(ev, (CUstream)s); }

CUresult ucxx_cudaexec_event_elapsed(float *ms, CUevent start, CUevent stop) {
    return exec_api.cuEventElapsedTime(ms, start, stop);
}

CUresult ucxx_cudaexec_stream_wait_event(uintptr_t s, CUevent ev) {
    return exec_api.cuStreamWaitEvent((CUstream)s, ev, 0);
}

CUresult ucxx_cudaexec_module_load(const void *image, CUmodule *out) {
    *out = NULL;
    return exec_api.cuModuleLoadData(out, image);
}

CUresult ucxx_cudaexec_module_function(CUmodule m, const char *name, CUfunction *out) {
    *out = NULL;
    return exec_api.cuModuleGetFunction(out, m, name);
}

CUresult ucxx_cudaexec_module_unload(CUmodule m) { return exec_api.cuModuleUnload(m); }

CUresult ucxx_cudaexec_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                              unsigned by, unsigned bz, unsigned shared, uintptr_t s,
                              uint64_t *args, int nargs) {
    void *params[UCXX_MAX_KERNEL_ARGS];
    if (nargs < 0 || nargs > UCXX_MAX_KERNEL_ARGS) return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < nargs; i++) params[i] = &args[i];
    return exec_api.cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, (CUstream)s, params, NULL);
}

CUresult ucxx_cudaexec_launch_packed(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                     unsigned by, unsigned bz, unsigned shared, uintptr_t s,
                                     void *params, size_t size) {
    // cuLaunchKernel's "extra": CU_LAUNCH_PARAM_BUFFER_POINTER (1), the buffer,
    // CU_LAUNCH_PARAM_BUFFER_SIZE (2), its size, CU_LAUNCH_PARAM_END (0).
    void *extra[] = {(void *)1, params, (void *)2, &size, (void *)0};
    return exec_api.cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, (CUstream)s, NULL, extra);
}

CUresult ucxx_cudaexec_copy_async(CUdeviceptr dst, CUdeviceptr src, size_t n, uintptr_t s) {
    return exec_api.cuMemcpyAsync(dst, src, n, (CUstream)s);
}

CUresult ucxx_cudaexec_stream_write(uintptr_t s, CUdeviceptr addr, uint64_t value) {
    if (cuStreamWriteValue64 == NULL) return CUDA_ERROR_NOT_SUPPORTED;
    return cuStreamWriteValue64((CUstream)s, addr, value, 0);
}

CUresult ucxx_cudaexec_stream_mem_ops(uintptr_t s, const uint64_t *triples, int n) {
    if (cuStreamBatchMemOp == NULL) return CUDA_ERROR_NOT_SUPPORTED;
    if (n <= 0 || n > UCXX_MAX_STREAM_MEM_OPS) return CUDA_ERROR_INVALID_VALUE;
    ucxx_stream_mem_op ops[UCXX_MAX_STREAM_MEM_OPS];
    memset(ops, 0, sizeof(ops[0]) * (size_t)n);
    for (int i = 0; i < n; i++) {
        ops[i].operation = triples[3 * i] ? UCXX_MEM_OP_WAIT_VALUE_64 : UCXX_MEM_OP_WRITE_VALUE_64;
        ops[i].address = (CUdeviceptr)triples[3 * i + 1];
        ops[i].value64 = triples[3 * i + 2];
        ops[i].flags = 0; // waits: CU_STREAM_WAIT_VALUE_GEQ; writes: default ordering
    }
    return cuStreamBatchMemOp((CUstream)s, (unsigned int)n, ops, 0);
}
