package ucxx

// CUDA IPC (cudaipc.c): a handle names a device allocation; another process of the
// host opens it and reaches the memory at an address of its own. Handles are 64
// opaque bytes, safe to send to peers; opening an untrusted one either maps an
// allocation of this device's user or fails.

// #include "cudaipc.h"
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// IPCHandleBytes is the size of an IPCHandle.
const IPCHandleBytes = C.UCXX_IPC_HANDLE_BYTES

// IPCHandle names a device allocation for other processes (cuIpcGetMemHandle).
type IPCHandle [IPCHandleBytes]byte

var ipcLoad = sync.OnceValue(func() error {
	var msg [256]C.char
	if C.ucxx_cudaipc_load(&msg[0], C.size_t(len(msg))) != 0 {
		return fmt.Errorf("ucxx: load CUDA IPC: %s", C.GoString(&msg[0]))
	}
	return nil
})

// IPCHandleOf returns the handle of the allocation holding device address addr, with
// the allocation's start and size (an address's offset in it is addr - base). A
// context must be current on the calling thread.
//
// Errors: a *CUDAError (CUDA_ERROR_INVALID_VALUE for memory that is not a device
// allocation, or not one IPC can share).
func (d *CUDADriver) IPCHandleOf(addr uintptr) (h IPCHandle, base uintptr, size uint64, err error) {
	d.check()
	if err := ipcLoad(); err != nil {
		return h, 0, 0, err
	}
	var b C.CUdeviceptr
	var n C.size_t
	r := C.ucxx_cudaipc_get(C.CUdeviceptr(addr), (*C.uchar)(unsafe.Pointer(&h[0])), &b, &n)
	if err := cudaErr("cuIpcGetMemHandle", r); err != nil {
		return h, 0, 0, err
	}
	return h, uintptr(b), uint64(n), nil
}

// BufferID returns the unique id of the allocation holding device address addr: ids
// are never reused within a process, so (process, id) names an allocation for its
// lifetime, where addresses are reused and handles differ from call to call.
//
// Errors: a *CUDAError.
func (d *CUDADriver) BufferID(addr uintptr) (uint64, error) {
	d.check()
	if err := ipcLoad(); err != nil {
		return 0, err
	}
	var id C.ulonglong
	if err := cudaErr("cuPointerGetAttribute", C.ucxx_cudaipc_buffer_id(C.CUdeviceptr(addr), &id)); err != nil {
		return 0, err
	}
	return uint64(id), nil
}

// OpenIPC maps the allocation h names (another process's) and returns where this
// process reaches its start. Close it with CloseIPC. A context must be current.
//
// Errors: a *CUDAError (an invalid or stale handle, the same process's own).
func (d *CUDADriver) OpenIPC(h IPCHandle) (uintptr, error) {
	d.check()
	if err := ipcLoad(); err != nil {
		return 0, err
	}
	var p C.CUdeviceptr
	if err := cudaErr("cuIpcOpenMemHandle", C.ucxx_cudaipc_open((*C.uchar)(unsafe.Pointer(&h[0])), &p)); err != nil {
		return 0, err
	}
	return uintptr(p), nil
}

// CloseIPC unmaps what OpenIPC mapped.
func (d *CUDADriver) CloseIPC(p uintptr) error {
	d.check()
	if err := ipcLoad(); err != nil {
		return err
	}
	return cudaErr("cuIpcCloseMemHandle", C.ucxx_cudaipc_close(C.CUdeviceptr(p)))
}
