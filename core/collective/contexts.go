package collective

import "github.com/ucxx-go/ucxx-go/ucxx"

// readyActiveContexts sets CU_CTX_SYNC_MEMOPS on the primary context of each device
// the process already uses (RetainPrimary sets it), while the communicator is made,
// so that no stream-ordered call sets it later: cuCtxSetFlags waits for the device,
// and a stream-ordered call returns with its caller's streams still busy (they may
// wait for the caller's thread, and a wait for them on the host would never end).
//
// It is best effort and creates nothing: a process that has not initialised CUDA is
// left uninitialised (cuInit before a fork leaves the child without CUDA), and a device
// whose context is not active is left alone. A device the process first uses after the
// communicator is made gets the flag at its first GPU call, which waits for that device
// once; make the device's context first (any allocation; cudaSetDevice with a CUDA 12+
// runtime), as NCCL asks for cudaSetDevice before ncclCommInitRank. (UCX's CUDA
// transport may have initialised CUDA already; this function initialises nothing
// itself.)
func readyActiveContexts() {
	if !ucxx.CUDAInUse() {
		return
	}
	d, err := ucxx.CUDA()
	if err != nil {
		return
	}
	n, err := d.DeviceCount()
	if err != nil {
		return
	}
	for dev := range n {
		if active, err := d.PrimaryActive(dev); err != nil || !active {
			continue
		}
		if c, err := d.RetainPrimary(dev); err == nil {
			c.Release()
		}
	}
}
