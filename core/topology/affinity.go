package topology

import (
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"syscall"
	"unsafe"
)

// CPU affinity of OS threads, for placing a progress thread near its GPU and NIC.
//
// Affinity belongs to an OS thread, not a goroutine: a goroutine that pins itself must
// be locked to its thread (runtime.LockOSThread) first, and stay locked for as long as
// the pinning matters. If it unlocks, the runtime hands the pinned thread to other
// goroutines; a goroutine that leaves a thread pinned should instead exit locked, so
// the thread exits with it.

// maxCPUID bounds the CPU ids PinThreadToCPUs accepts (Linux's own limit, NR_CPUS,
// is at most 8192).
const maxCPUID = 1 << 16

// PinThreadToCPUs restricts the calling OS thread to the given CPUs
// (sched_setaffinity on the thread itself). The kernel intersects the set with the
// CPUs the process may use (its cpuset); ThreadCPUs reports the result.
//
// Errors: an error for an empty list or an id out of range, and otherwise one wrapping
// the syscall.Errno: EINVAL when none of the CPUs is online and allowed.
func PinThreadToCPUs(cpus []int) error {
	if len(cpus) == 0 {
		return errors.New("topology: pin thread: no CPUs given")
	}
	hi := slices.Max(cpus)
	if lo := slices.Min(cpus); lo < 0 || hi >= maxCPUID {
		return fmt.Errorf("topology: pin thread: CPU id out of range in %v", cpus)
	}
	mask := make([]uint64, hi/64+1)
	for _, c := range cpus {
		mask[c/64] |= 1 << (c % 64)
	}
	// tid 0 is the calling thread. The mask is lent to the kernel for the call only.
	_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, uintptr(len(mask)*8), uintptr(unsafe.Pointer(&mask[0])))
	runtime.KeepAlive(mask)
	if errno != 0 {
		return fmt.Errorf("topology: sched_setaffinity: %w", errno)
	}
	return nil
}

// ThreadCPUs returns the CPUs the calling OS thread may run on, in increasing order.
// Unless the caller is locked to its thread, the answer describes whichever thread the
// goroutine happened to be on.
func ThreadCPUs() ([]int, error) {
	// The kernel wants room for its whole CPU mask (EINVAL otherwise), whose size it
	// does not tell: start at 1024 CPUs and grow.
	for words := 16; ; words *= 2 {
		mask := make([]uint64, words)
		n, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, uintptr(len(mask)*8), uintptr(unsafe.Pointer(&mask[0])))
		runtime.KeepAlive(mask)
		if errno == syscall.EINVAL && words*64 < maxCPUID {
			continue
		}
		if errno != 0 {
			return nil, fmt.Errorf("topology: sched_getaffinity: %w", errno)
		}
		// On success the kernel returns how many bytes of the mask it wrote.
		return maskCPUs(mask[:min(int(n)/8, len(mask))], 64), nil
	}
}

// maskCPUs lists the set bits of a CPU mask in increasing order: CPU i*wordBits+b is
// bit b of word i (the kernel's masks have 64-bit words, NVML's a C unsigned long).
func maskCPUs[W uint | uint64](mask []W, wordBits int) []int {
	var cpus []int
	for i, w := range mask {
		for v := uint64(w); v != 0; v &= v - 1 {
			cpus = append(cpus, i*wordBits+bits.TrailingZeros64(v))
		}
	}
	return cpus
}
