package pybridge

import "github.com/ucxx-go/ucxx-go/core"

// CopyCUDAToHost copies n bytes of a received CUDA frame on device to the host
// address dst (core.CopyCUDAToHost).
func CopyCUDAToHost(device int, dst uintptr, src uintptr, n uint64) (ok bool, err error) {
	defer guard(&err)
	if err := core.CopyCUDAToHost(device, dst, src, n); err != nil {
		return false, err
	}
	return true, nil
}

// FreeCUDA frees a CUDA frame that a multi-buffer receive allocated on device (the
// record of its block says which). Any thread, with or without a running engine.
func FreeCUDA(device int, ptr uintptr) (ok bool, err error) {
	defer guard(&err)
	if err := core.FreeCUDA(device, ptr); err != nil {
		return false, err
	}
	return true, nil
}
