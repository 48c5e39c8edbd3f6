// C side of CUDA IPC: handles naming a device allocation that another process of the
// same host opens to reach the memory (cuIpcGetMemHandle, cuIpcOpenMemHandle), and
// the allocation an address lies in (cuMemGetAddressRange). Entry points are resolved
// from libcuda.so.1 by ucxx_cudaipc_load after ucxx_cuda_load (cuda.h) succeeded.
// Every function acts in the calling thread's current context.
#ifndef UCXX_CUDAIPC_H
#define UCXX_CUDAIPC_H

#include "cuda.h"

#define UCXX_IPC_HANDLE_BYTES 64

// ucxx_cudaipc_load resolves the entry points; 0 on success, 2 when one is missing.
int ucxx_cudaipc_load(char *err, size_t errlen);

// ucxx_cudaipc_get writes the handle of the allocation holding ptr to handle, and the
// allocation's start and size to base and size.
CUresult ucxx_cudaipc_get(CUdeviceptr ptr, unsigned char *handle, CUdeviceptr *base, size_t *size);

// ucxx_cudaipc_buffer_id writes the allocation's unique id (never reused in the
// process: CU_POINTER_ATTRIBUTE_BUFFER_ID) to id.
CUresult ucxx_cudaipc_buffer_id(CUdeviceptr ptr, unsigned long long *id);

// ucxx_cudaipc_open maps another process's allocation into this one (with peer
// access enabled lazily where it is on another device).
CUresult ucxx_cudaipc_open(const unsigned char *handle, CUdeviceptr *out);

// ucxx_cudaipc_close unmaps what ucxx_cudaipc_open mapped.
CUresult ucxx_cudaipc_close(CUdeviceptr p);

#endif
