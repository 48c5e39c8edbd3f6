#ifndef UCXX_MEMTYPE_H
#define UCXX_MEMTYPE_H

#include <stddef.h>
#include <stdint.h>

// ucxx_memtype_prime makes UCX's memory-type cache hold [addr, addr+len) as CUDA
// device memory, registrable, in the allocation [base, base+size). Its system device
// stays unknown, as for an operation that names its memory type: UCX's CUDA
// components act in the progress thread's current context. It returns 1 when it
// updated the cache, 0 when the cache held that already, -1 when the cache is off
// (UCX_MEMTYPE_CACHE=n).
int ucxx_memtype_prime(uintptr_t addr, size_t len, uintptr_t base, size_t size);

// ucxx_memtype_known reports whether UCX's memory-type cache holds [addr, addr+len) as
// CUDA memory it needs no more questions about: 1 yes, 0 no, -1 the cache is off.
int ucxx_memtype_known(uintptr_t addr, size_t len);

#endif
