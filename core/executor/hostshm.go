package executor

// #cgo CFLAGS: -O2
// #cgo nocallback hostshm_futex_wake
// #cgo nocallback hostshm_vm_write
// #cgo nocallback hostshm_vm_read
// #cgo nocallback hostshm_move
// #cgo nocallback hostshm_pack
// #cgo nocallback hostshm_unpack
// #cgo nocallback hostshm_forward
// #cgo nocallback hostshm_copy_words
// #include "hostshm.h"
import "C"

import (
	"syscall"
	"time"
	"unsafe"
)

// Go faces of hostshm.c: each returns nil or the errno as a syscall.Errno.

func errnoErr(r C.int) error {
	if r == 0 {
		return nil
	}
	return syscall.Errno(r)
}

// futexWait sleeps while the word at addr holds v, at most d.
func futexWait(addr uintptr, v uint32, d time.Duration) error {
	return errnoErr(C.hostshm_futex_wait(C.uintptr_t(addr), C.uint32_t(v), C.int64_t(d)))
}

// futexWake wakes every sleeper on the word at addr.
func futexWake(addr uintptr) { C.hostshm_futex_wake(C.uintptr_t(addr)) }

// vmWrite copies n bytes from local to remote in process pid.
func vmWrite(pid int, local, remote uintptr, n uint64) error {
	return errnoErr(C.hostshm_vm_write(C.int(pid), C.uintptr_t(local), C.uintptr_t(remote), C.uint64_t(n)))
}

// vmRead copies n bytes from remote in process pid to local.
func vmRead(pid int, local, remote uintptr, n uint64) error {
	return errnoErr(C.hostshm_vm_read(C.int(pid), C.uintptr_t(local), C.uintptr_t(remote), C.uint64_t(n)))
}

// pidfdOpen returns a pidfd for pid.
func pidfdOpen(pid int) (int, error) {
	var fd C.int
	if err := errnoErr(C.hostshm_pidfd_open(C.int(pid), &fd)); err != nil {
		return -1, err
	}
	return int(fd), nil
}

// pidfdExited reports whether the process behind pidfd fd ended.
func pidfdExited(fd int) bool {
	var exited C.int
	if C.hostshm_pidfd_exited(C.int(fd), &exited) != 0 {
		return false
	}
	return exited != 0
}

func closeFD(fd int) { C.hostshm_close(C.int(fd)) }

// move copies n bytes from src to dst; the ranges may overlap.
func move(dst, src uintptr, n uint64) {
	C.hostshm_move(C.uintptr_t(dst), C.uintptr_t(src), C.uint64_t(n))
}

// vmReadInto copies len(dst) bytes from remote in process pid into Go memory dst.
func vmReadInto(pid int, dst []byte, remote uintptr) error {
	if len(dst) == 0 {
		return nil
	}
	return errnoErr(C.hostshm_vm_read(C.int(pid), C.uintptr_t(uintptr(unsafe.Pointer(&dst[0]))), C.uintptr_t(remote), C.uint64_t(len(dst))))
}

func hostPack(dst, src uintptr, n uint64, flag uint32) {
	C.hostshm_pack(C.uintptr_t(dst), C.uintptr_t(src), C.uint64_t(n), C.uint32_t(flag))
}

func hostUnpack(dst, src uintptr, n uint64, flag uint32) uint64 {
	return uint64(C.hostshm_unpack(C.uintptr_t(dst), C.uintptr_t(src), C.uint64_t(n), C.uint32_t(flag)))
}

func hostForward(dsts []uintptr, src uintptr, n uint64, flag uint32) uint64 {
	return uint64(C.hostshm_forward((*C.uintptr_t)(unsafe.Pointer(&dsts[0])), C.int(len(dsts)), C.uintptr_t(src), C.uint64_t(n), C.uint32_t(flag)))
}

func hostCopyWords(dst, src uintptr, n uint64) {
	C.hostshm_copy_words(C.uintptr_t(dst), C.uintptr_t(src), C.uint64_t(n))
}
