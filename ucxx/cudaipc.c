#include "cudaipc.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    unsigned char reserved[UCXX_IPC_HANDLE_BYTES];
} ipc_handle;

// The entry points, resolved once by ucxx_cudaipc_load and read-only after.
static struct {
    CUresult (*cuIpcGetMemHandle)(ipc_handle *h, CUdeviceptr p);
    CUresult (*cuIpcOpenMemHandle)(CUdeviceptr *p, ipc_handle h, unsigned int flags);
    CUresult (*cuIpcCloseMemHandle)(CUdeviceptr p);
    CUresult (*cuMemGetAddressRange)(CUdeviceptr *base, size_t *size, CUdeviceptr p);
    CUresult (*cuPointerGetAttribute)(void *data, int attr, CUdeviceptr p);
} ipc_api;

// CU_POINTER_ATTRIBUTE_BUFFER_ID
#define ATTR_BUFFER_ID 7

// CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
#define IPC_LAZY_PEER_ACCESS 1

int ucxx_cudaipc_load(char *err, size_t errlen) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(err, errlen, "dlopen libcuda.so.1 failed");
        return 1;
    }
    struct {
        const char *name;
        const char *alt;
        void **slot;
    } syms[] = {
        {"cuIpcGetMemHandle", NULL, (void **)&ipc_api.cuIpcGetMemHandle},
        {"cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle", (void **)&ipc_api.cuIpcOpenMemHandle},
        {"cuIpcCloseMemHandle", NULL, (void **)&ipc_api.cuIpcCloseMemHandle},
        {"cuMemGetAddressRange_v2", "cuMemGetAddressRange", (void **)&ipc_api.cuMemGetAddressRange},
        {"cuPointerGetAttribute", NULL, (void **)&ipc_api.cuPointerGetAttribute},
    };
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        void *p = dlsym(lib, syms[i].name);
        if (p == NULL && syms[i].alt != NULL) p = dlsym(lib, syms[i].alt);
        if (p == NULL) {
            snprintf(err, errlen, "libcuda.so.1 has no %s", syms[i].name);
            return 2;
        }
        *syms[i].slot = p;
    }
    return 0;
}

CUresult ucxx_cudaipc_get(CUdeviceptr ptr, unsigned char *handle, CUdeviceptr *base, size_t *size) {
    CUresult r = ipc_api.cuMemGetAddressRange(base, size, ptr);
    if (r != CUDA_SUCCESS) return r;
    ipc_handle h;
    r = ipc_api.cuIpcGetMemHandle(&h, *base);
    if (r == CUDA_SUCCESS) memcpy(handle, h.reserved, UCXX_IPC_HANDLE_BYTES);
    return r;
}

CUresult ucxx_cudaipc_buffer_id(CUdeviceptr ptr, unsigned long long *id) {
    *id = 0;
    return ipc_api.cuPointerGetAttribute(id, ATTR_BUFFER_ID, ptr);
}

CUresult ucxx_cudaipc_open(const unsigned char *handle, CUdeviceptr *out) {
    ipc_handle h;
    memcpy(h.reserved, handle, UCXX_IPC_HANDLE_BYTES);
    *out = 0;
    return ipc_api.cuIpcOpenMemHandle(out, h, IPC_LAZY_PEER_ACCESS);
}

CUresult ucxx_cudaipc_close(CUdeviceptr p) { return ipc_api.cuIpcCloseMemHandle(p); }
