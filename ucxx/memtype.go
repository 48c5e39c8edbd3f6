package ucxx

// UCX learns a buffer's memory type from its memory-type cache, filled by hooks on
// the CUDA allocation functions (UCM). Two ways that goes wrong, both seen on an H200
// with UCX 1.22:
//
//   - An allocation the hooks did not see is not in the cache, and UCX takes a buffer
//     it does not find for host memory (ucp_memory_detect), even where the operation
//     named its memory type: it copied device memory with memcpy (SIGSEGV).
//   - An allocation the hooks saw is cached without its system device; UCX then asks
//     its cuda_copy component, which calls cuCtxSetFlags(CU_CTX_SYNC_MEMOPS) on the
//     progress thread. That call waits for the device, and so for any stream held by
//     cuStreamWaitValue on a word the progress thread itself will write: a deadlock.
//
// PrimeCUDA fills the cache from the submitting thread, so that UCX finds every CUDA
// buffer of ours with its type, flags and allocation range and asks no CUDA question
// on the progress thread. The system device stays unknown, as for an operation that
// names its memory type (with the system device UCX's topology gives for the GPU's
// PCI address, UCX's copies into the memory failed with an I/O error). With
// UCX_MEMTYPE_CACHE=n there is no cache to fill: UCX then detects every buffer
// itself, and GPU-side waits on the progress thread's words can deadlock as above.

// #cgo nocallback ucxx_memtype_known
// #include "memtype.h"
// #include "cuda.h"
import "C"

// PrimeCUDA makes UCX's memory-type cache hold the allocation behind [addr, addr+n)
// as device memory, unless it does already. p is what Pointer said of addr. It reports whether it changed the cache; managed memory and host memory are
// left to UCX (false, nil), as is everything when the cache is off.
//
// Errors: a *CUDAError from cuPointerGetAttributes.
func (d *CUDADriver) PrimeCUDA(addr uintptr, n uint64, p CUDAPointer) (bool, error) {
	d.check()
	if !p.IsCUDA || p.Managed || addr == 0 {
		return false, nil
	}
	if n == 0 {
		n = 1
	}
	if C.ucxx_memtype_known(C.uintptr_t(addr), C.size_t(n)) != 0 {
		return false, nil // cached already (the common case), or no cache
	}
	var base C.uintptr_t
	var size C.size_t
	if err := cudaErr("cuPointerGetAttributes", C.ucxx_cuda_pointer_range(C.uintptr_t(addr), &base, &size)); err != nil {
		return false, err
	}
	if size == 0 {
		return false, nil // the driver knows no allocation here
	}
	return C.ucxx_memtype_prime(C.uintptr_t(addr), C.size_t(n), base, size) == 1, nil
}
