package notifier

import (
	"fmt"
	"syscall"
	"unsafe"
)

// EventFD is a non-blocking, close-on-exec Linux eventfd: the wake-up both the
// completion queue (progress thread to consumer) and core's submission pool (submitter
// to progress thread) use.
type EventFD int

// NewEventFD creates an eventfd with its counter at 0.
func NewEventFD() (EventFD, error) {
	const efdNonblock, efdCloexec = 0x800, 0x80000
	fd, _, errno := syscall.RawSyscall(syscall.SYS_EVENTFD2, 0, efdNonblock|efdCloexec, 0)
	if errno != 0 {
		return -1, fmt.Errorf("notifier: eventfd: %w", errno)
	}
	return EventFD(fd), nil
}

// Signal adds one to the counter, making the fd readable. It never blocks: EAGAIN
// means the counter is saturated, and the reader is awake anyway. A raw system call: a
// non-blocking write needs no word to the Go scheduler, which would otherwise hand the
// calling thread's P away now and then.
func (f EventFD) Signal() {
	one := uint64(1)
	syscall.RawSyscall(syscall.SYS_WRITE, uintptr(f), uintptr(unsafe.Pointer(&one)), 8)
}

// Drain resets the counter to 0 and reports whether it was not 0.
func (f EventFD) Drain() bool {
	var buf [8]byte
	n, _ := syscall.Read(int(f), buf[:])
	return n == 8
}

// Close closes the fd.
func (f EventFD) Close() error { return syscall.Close(int(f)) }
