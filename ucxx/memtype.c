#include "memtype.h"

#include <ucs/memory/memtype_cache.h>

int ucxx_memtype_known(uintptr_t addr, size_t len) {
    ucs_memory_info_t info;
    ucs_status_t st = ucs_memtype_cache_lookup((const void *)addr, len, &info);
    if (st == UCS_ERR_UNSUPPORTED) return -1;
    // The lookup succeeds only for a region covering the whole range. UCX asks CUDA
    // about a cached region (on the thread of the operation) only when its type is
    // unknown, or when it has neither a system device nor memory flags.
    return st == UCS_OK && info.type == UCS_MEMORY_TYPE_CUDA &&
           (info.sys_dev != UCS_SYS_DEVICE_ID_UNKNOWN || info.mem_flags != 0);
}

int ucxx_memtype_prime(uintptr_t addr, size_t len, uintptr_t base, size_t size) {
    int known = ucxx_memtype_known(addr, len);
    if (known != 0) return known == 1 ? 0 : -1;
    ucs_memtype_cache_update((const void *)base, size, UCS_MEMORY_TYPE_CUDA, UCS_SYS_DEVICE_ID_UNKNOWN,
                             UCS_MEM_FLAG_REGISTRABLE);
    return 1;
}
