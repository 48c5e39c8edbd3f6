// C side of ucxx's managed memory and peer access: managed allocations, prefetches of
// their ranges to a device, and peer access between devices' contexts. The entry
// points are resolved by ucxx_cudamanaged_load, after ucxx_cuda_load; the driver's
// optional ones (prefetch, range attributes) report CUDA_ERROR_NOT_SUPPORTED when
// missing.
#ifndef UCXX_CUDAMANAGED_H
#define UCXX_CUDAMANAGED_H

#include "cuda.h"

// ucxx_cudamanaged_load resolves the entry points; 0 on success, 2 when a required one
// is missing (err names it). Call it once.
int ucxx_cudamanaged_load(char *err, size_t errlen);

// ucxx_cudamanaged_alloc allocates n bytes of managed memory reachable from every
// device (CU_MEM_ATTACH_GLOBAL), in the current context.
CUresult ucxx_cudamanaged_alloc(size_t n, CUdeviceptr *out);
// ucxx_cudamanaged_prefetch queues on s a migration of [p, p+n) to device ordinal
// (cuMemPrefetchAsync).
CUresult ucxx_cudamanaged_prefetch(CUdeviceptr p, size_t n, int ordinal, uintptr_t s);
// ucxx_cudamanaged_advise_accessed_by advises that device ordinal accesses [p, p+n)
// (CU_MEM_ADVISE_SET_ACCESSED_BY): the range stays mapped in the device's page tables
// wherever its pages are, so the device's accesses reach them where they are instead
// of faulting them over.
CUresult ucxx_cudamanaged_advise_accessed_by(CUdeviceptr p, size_t n, int ordinal);
// ucxx_cudamanaged_accessed_by fills ordinals (max entries) with the devices advised to
// access the whole of [p, p+n), -2 after the last.
CUresult ucxx_cudamanaged_accessed_by(CUdeviceptr p, size_t n, int *ordinals, int max);
// ucxx_cudamanaged_last_prefetch reports the device ordinal the range was last
// prefetched to (-1: the host; -2: none, or not the same for the whole range).
CUresult ucxx_cudamanaged_last_prefetch(CUdeviceptr p, size_t n, int *ordinal);
// ucxx_cudamanaged_can_access_peer reports whether device ordinal can reach peer's
// memory directly.
CUresult ucxx_cudamanaged_can_access_peer(int ordinal, int peer, int *can);
// ucxx_cudamanaged_enable_peer lets the current context reach peer's memory; already
// enabled is success.
CUresult ucxx_cudamanaged_enable_peer(CUcontext peer);

#endif
