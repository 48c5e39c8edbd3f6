#include "cudamanaged.h"

#include <dlfcn.h>

#define CU_MEM_ATTACH_GLOBAL 1
#define CU_MEM_LOCATION_TYPE_DEVICE 1
#define CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY 3
#define CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION 4
#define CU_MEM_ADVISE_SET_ACCESSED_BY 5
#define CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE 7
#define CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID 8
#define CU_MEM_LOCATION_TYPE_INVALID 0
#define CU_MEM_LOCATION_TYPE_HOST 2
#define CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED 704

// CUmemLocation.
typedef struct {
    int type;
    int id;
} ucxx_mem_location;

static struct {
    CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
    CUresult (*cuMemAllocManaged)(CUdeviceptr *p, size_t n, unsigned int flags);
    CUresult (*cuDeviceCanAccessPeer)(int *can, CUdevice dev, CUdevice peer);
    CUresult (*cuCtxEnablePeerAccess)(CUcontext peer, unsigned int flags);
} managed_api;

// Optional: NULL where the driver lacks them. The prefetch is the CUDA 12.2+ form
// (a CUmemLocation), else the older one (a CUdevice).
static CUresult (*prefetch_v2)(CUdeviceptr p, size_t n, ucxx_mem_location loc, unsigned int flags,
                               CUstream s);
static CUresult (*prefetch_v1)(CUdeviceptr p, size_t n, CUdevice dev, CUstream s);
static CUresult (*range_attribute)(void *data, size_t size, int attr, CUdeviceptr p, size_t n);
// The advice, in the same two forms.
static CUresult (*advise_v2)(CUdeviceptr p, size_t n, int advice, ucxx_mem_location loc);
static CUresult (*advise_v1)(CUdeviceptr p, size_t n, int advice, CUdevice dev);

int ucxx_cudamanaged_load(char *err, size_t errlen) {
    const ucxx_cuda_sym syms[] = {
        {"cuDeviceGet", (void **)&managed_api.cuDeviceGet},
        {"cuMemAllocManaged", (void **)&managed_api.cuMemAllocManaged},
        {"cuDeviceCanAccessPeer", (void **)&managed_api.cuDeviceCanAccessPeer},
        {"cuCtxEnablePeerAccess", (void **)&managed_api.cuCtxEnablePeerAccess},
    };
    void *lib;
    int rc = ucxx_cuda_resolve(syms, sizeof(syms) / sizeof(syms[0]), &lib, err, errlen);
    if (rc != 0) return rc;
    prefetch_v2 = dlsym(lib, "cuMemPrefetchAsync_v2");
    if (prefetch_v2 == NULL) prefetch_v1 = dlsym(lib, "cuMemPrefetchAsync");
    range_attribute = dlsym(lib, "cuMemRangeGetAttribute");
    advise_v2 = dlsym(lib, "cuMemAdvise_v2");
    if (advise_v2 == NULL) advise_v1 = dlsym(lib, "cuMemAdvise");
    return 0;
}

CUresult ucxx_cudamanaged_alloc(size_t n, CUdeviceptr *out) {
    *out = 0;
    return managed_api.cuMemAllocManaged(out, n, CU_MEM_ATTACH_GLOBAL);
}

CUresult ucxx_cudamanaged_prefetch(CUdeviceptr p, size_t n, int ordinal, uintptr_t s) {
    CUdevice dev;
    CUresult r = managed_api.cuDeviceGet(&dev, ordinal);
    if (r != CUDA_SUCCESS) return r;
    if (prefetch_v2 != NULL) {
        ucxx_mem_location loc = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
        return prefetch_v2(p, n, loc, 0, (CUstream)s);
    }
    if (prefetch_v1 != NULL) return prefetch_v1(p, n, dev, (CUstream)s);
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult ucxx_cudamanaged_advise_accessed_by(CUdeviceptr p, size_t n, int ordinal) {
    CUdevice dev;
    CUresult r = managed_api.cuDeviceGet(&dev, ordinal);
    if (r != CUDA_SUCCESS) return r;
    if (advise_v2 != NULL) {
        ucxx_mem_location loc = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
        return advise_v2(p, n, CU_MEM_ADVISE_SET_ACCESSED_BY, loc);
    }
    if (advise_v1 != NULL) return advise_v1(p, n, CU_MEM_ADVISE_SET_ACCESSED_BY, dev);
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult ucxx_cudamanaged_accessed_by(CUdeviceptr p, size_t n, int *ordinals, int max) {
    for (int i = 0; i < max; i++) ordinals[i] = -2;
    if (range_attribute == NULL) return CUDA_ERROR_NOT_SUPPORTED;
    return range_attribute(ordinals, sizeof(int) * (size_t)max, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p, n);
}

CUresult ucxx_cudamanaged_last_prefetch(CUdeviceptr p, size_t n, int *ordinal) {
    *ordinal = -2;
    if (range_attribute == NULL) return CUDA_ERROR_NOT_SUPPORTED;
    // CUDA 12.2+ reports a prefetch made with a location (cuMemPrefetchAsync_v2) in
    // the TYPE and ID attributes; the older single attribute then says "invalid".
    int type = CU_MEM_LOCATION_TYPE_INVALID, id = -2;
    CUresult r = range_attribute(&type, sizeof(type), CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE, p, n);
    if (r == CUDA_SUCCESS) r = range_attribute(&id, sizeof(id), CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID, p, n);
    if (r == CUDA_SUCCESS) {
        if (type == CU_MEM_LOCATION_TYPE_DEVICE) *ordinal = id; // a CUdevice is its ordinal
        else if (type == CU_MEM_LOCATION_TYPE_HOST) *ordinal = -1;
        return CUDA_SUCCESS;
    }
    // An older driver: CU_DEVICE_CPU (-1) for the host, CU_DEVICE_INVALID (-2) for none
    // or a mix, the same numbers as ours.
    int loc = -2;
    r = range_attribute(&loc, sizeof(loc), CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p, n);
    if (r != CUDA_SUCCESS) return r;
    *ordinal = loc;
    return CUDA_SUCCESS;
}

CUresult ucxx_cudamanaged_can_access_peer(int ordinal, int peer, int *can) {
    *can = 0;
    CUdevice a, b;
    CUresult r = managed_api.cuDeviceGet(&a, ordinal);
    if (r == CUDA_SUCCESS) r = managed_api.cuDeviceGet(&b, peer);
    if (r != CUDA_SUCCESS) return r;
    return managed_api.cuDeviceCanAccessPeer(can, a, b);
}

CUresult ucxx_cudamanaged_enable_peer(CUcontext peer) {
    CUresult r = managed_api.cuCtxEnablePeerAccess(peer, 0);
    return r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED ? CUDA_SUCCESS : r;
}
