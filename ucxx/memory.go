package ucxx

// #include <stdlib.h>
// #include <string.h>
// #include <stdint.h>
// #include <unistd.h>
// #include <sys/mman.h>
// static void *uintptr_to_pointer(uintptr_t p) { return (void *)p; }
// static void *malloc_advised(size_t n, size_t huge_from) {
//     void *p = malloc(n);
// #ifdef MADV_HUGEPAGE
//     if (p != NULL && n >= huge_from) {
//         uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
//         uintptr_t start = ((uintptr_t)p + page - 1) & ~(page - 1), end = (uintptr_t)p + n;
//         if (end > start) madvise((void *)start, end - start, MADV_HUGEPAGE); /* advice: may fail */
//     }
// #endif
//     return p;
// }
import "C"

import (
	"os"
	"unsafe"
)

// CAlloc allocates n zeroed bytes of C memory, for buffers that UCX keeps across
// calls (the connection handshake's). Free them with CFree.
func CAlloc(n int) unsafe.Pointer { return C.calloc(1, C.size_t(n)) }

// CMalloc allocates n bytes of C memory, not zeroed: receive buffers that UCX fills.
// It returns nil when memory runs out. The C allocator is the process's malloc, so
// a consumer in another language may release the memory with its free(). From
// hugePageAdviceMin bytes the memory is advised to the kernel for transparent huge
// pages (MADV_HUGEPAGE, as numpy advises its own large arrays): a fresh allocation
// this large is mapped anew, and receiving into it otherwise takes a page fault
// every 4 KiB (Dask's 50 MiB echo between two workers on one host, 3 runs each:
// 0.73-1.0x tcp's bandwidth without the advice, 1.10-1.16x with it).
func CMalloc(n uint64) unsafe.Pointer {
	if n == 0 {
		n = 1
	}
	return C.malloc_advised(C.size_t(n), hugePageAdviceMin)
}

// hugePageAdviceMin is the size from which CMalloc advises huge pages: numpy's.
const hugePageAdviceMin = 4 << 20

// CFree frees memory from CAlloc or CMalloc.
func CFree(p unsafe.Pointer) { C.free(p) }

// CFreeAddr is CFree for memory known by its address (a block handed to a consumer).
func CFreeAddr(addr uintptr) { C.free(C.uintptr_to_pointer(C.uintptr_t(addr))) }

// CopyFrom copies len(dst) bytes from src, an address of memory Go does not manage
// (a descriptor array a Python caller lent for the duration of a call).
func CopyFrom(dst []byte, src uintptr) {
	if len(dst) > 0 {
		C.memcpy(unsafe.Pointer(&dst[0]), C.uintptr_to_pointer(C.uintptr_t(src)), C.size_t(len(dst)))
	}
}

// CopyBetween copies n bytes from src to dst, addresses of memory Go does not manage
// that do not overlap.
func CopyBetween(dst, src uintptr, n uint64) {
	if n > 0 {
		C.memcpy(C.uintptr_to_pointer(C.uintptr_t(dst)), C.uintptr_to_pointer(C.uintptr_t(src)), C.size_t(n))
	}
}

// CAllocPage allocates n zeroed bytes of C memory starting a page of its own and
// taking whole pages (memory a device may map: CUDA pins by page). Free it with CFree.
func CAllocPage(n int) unsafe.Pointer {
	page := C.size_t(os.Getpagesize())
	size := (C.size_t(n) + page - 1) / page * page
	var p unsafe.Pointer
	if C.posix_memalign(&p, page, size) != 0 {
		return nil
	}
	C.memset(p, 0, size)
	return p
}
