package pybridge

import "github.com/ucxx-go/ucxx-go/core"

// FreeCUDA frees a CUDA frame that a multi-buffer receive allocated on device (the
// record of its block says which). Any thread, with or without a running engine.
func FreeCUDA(device int, ptr uintptr) (ok bool, err error) {
	defer guard(&err)
	if err := core.FreeCUDA(device, ptr); err != nil {
		return false, err
	}
	return true, nil
}
