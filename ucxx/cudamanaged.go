package ucxx

// Managed memory and peer access, for work spread over several GPUs: managed
// allocations migrate between devices on demand, and a prefetch moves a range ahead
// of the work that needs it (GrCUDA's arrays are managed memory, prefetched to the
// device a computation runs on); peer access lets a kernel read another device's
// memory directly.

// #include "cudamanaged.h"
import "C"

import "fmt"

// loadManaged resolves the managed-memory entry points, after the driver itself.
func loadManaged() error {
	var msg [256]C.char
	if C.ucxx_cudamanaged_load(&msg[0], C.size_t(len(msg))) != 0 {
		return fmt.Errorf("ucxx: load CUDA driver: %s", C.GoString(&msg[0]))
	}
	return nil
}

// Locations LastPrefetch reports besides device ordinals.
const (
	PrefetchHost = -1 // the range was last prefetched to the host
	PrefetchNone = -2 // never prefetched, or not all of it to one place
)

// MemAllocManaged allocates n bytes of managed memory, reachable from the host and
// every device, in the current context. Free it with MemFree.
//
// Errors: a *CUDAError from cuMemAllocManaged.
func (d *CUDADriver) MemAllocManaged(n uint64) (uintptr, error) {
	d.check()
	var p C.CUdeviceptr
	if err := cudaErr("cuMemAllocManaged", C.ucxx_cudamanaged_alloc(C.size_t(n), &p)); err != nil {
		return 0, err
	}
	return uintptr(p), nil
}

// PrefetchAsync queues on stream a migration of the managed range [p, p+n) to device
// ordinal; the work queued after it on stream finds the range there. In the current
// context.
//
// Errors: a *CUDAError from cuMemPrefetchAsync (CUDA_ERROR_NOT_SUPPORTED where the
// driver lacks it, CUDA_ERROR_INVALID_VALUE for memory that is not managed).
func (d *CUDADriver) PrefetchAsync(p uintptr, n uint64, ordinal int, stream uintptr) error {
	d.check()
	return cudaErr("cuMemPrefetchAsync", C.ucxx_cudamanaged_prefetch(C.CUdeviceptr(p), C.size_t(n), C.int(ordinal), C.uintptr_t(stream)))
}

// AdviseAccessedBy advises that device ordinal accesses the managed range [p, p+n)
// (cuMemAdvise, CU_MEM_ADVISE_SET_ACCESSED_BY): the device keeps the range mapped
// wherever its pages are, and its accesses reach them there (across NVLink or PCIe)
// instead of faulting them over to it. Prefetches still move the pages. In the
// current context (the driver may refuse without one: CUDA_ERROR_INVALID_CONTEXT).
//
// Errors: a *CUDAError from cuDeviceGet or cuMemAdvise (CUDA_ERROR_NOT_SUPPORTED where
// the driver lacks it or the device cannot map managed memory of others,
// CUDA_ERROR_INVALID_VALUE for memory that is not managed).
func (d *CUDADriver) AdviseAccessedBy(p uintptr, n uint64, ordinal int) error {
	d.check()
	return cudaErr("cuMemAdvise", C.ucxx_cudamanaged_advise_accessed_by(C.CUdeviceptr(p), C.size_t(n), C.int(ordinal)))
}

// AccessedBy reports the devices advised to access the whole managed range [p, p+n)
// (AdviseAccessedBy), at most max of them. In the current context.
//
// Errors: a *CUDAError from cuMemRangeGetAttribute.
func (d *CUDADriver) AccessedBy(p uintptr, n uint64, max int) ([]int, error) {
	d.check()
	if max <= 0 {
		return nil, nil
	}
	buf := make([]C.int, max)
	if err := cudaErr("cuMemRangeGetAttribute", C.ucxx_cudamanaged_accessed_by(C.CUdeviceptr(p), C.size_t(n), &buf[0], C.int(max))); err != nil {
		return nil, err
	}
	var out []int
	for _, o := range buf {
		if o >= 0 {
			out = append(out, int(o))
		}
	}
	return out, nil
}

// LastPrefetch reports where the managed range [p, p+n) was last prefetched to: a
// device ordinal, PrefetchHost or PrefetchNone. In the current context.
//
// Errors: a *CUDAError from cuMemRangeGetAttribute.
func (d *CUDADriver) LastPrefetch(p uintptr, n uint64) (int, error) {
	d.check()
	var o C.int
	if err := cudaErr("cuMemRangeGetAttribute", C.ucxx_cudamanaged_last_prefetch(C.CUdeviceptr(p), C.size_t(n), &o)); err != nil {
		return PrefetchNone, err
	}
	return int(o), nil
}

// CanAccessPeer reports whether device ordinal can reach peer's memory directly.
//
// Errors: a *CUDAError from cuDeviceGet or cuDeviceCanAccessPeer.
func (d *CUDADriver) CanAccessPeer(ordinal, peer int) (bool, error) {
	d.check()
	var can C.int
	if err := cudaErr("cuDeviceCanAccessPeer", C.ucxx_cudamanaged_can_access_peer(C.int(ordinal), C.int(peer), &can)); err != nil {
		return false, err
	}
	return can != 0, nil
}

// EnablePeerAccess lets work in c reach peer's device memory (once enabled, calls
// again succeed).
//
// Errors: a *CUDAError from cuCtxEnablePeerAccess (CUDA_ERROR_PEER_ACCESS_UNSUPPORTED
// where the devices cannot).
func (c CUDAContext) EnablePeerAccess(peer CUDAContext) error {
	c.check("EnablePeerAccess")
	peer.check("EnablePeerAccess")
	return c.Use(func() error {
		return cudaErr("cuCtxEnablePeerAccess", C.ucxx_cudamanaged_enable_peer(peer.ctx))
	})
}
