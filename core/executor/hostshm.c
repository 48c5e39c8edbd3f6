#define _GNU_SOURCE
#include "hostshm.h"

#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

int hostshm_futex_wait(uintptr_t addr, uint32_t expected, int64_t timeout_ns) {
	struct timespec ts = {.tv_sec = timeout_ns / 1000000000, .tv_nsec = timeout_ns % 1000000000};
	// FUTEX_WAIT, not the private form: the word is in memory other processes map.
	long r = syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, expected, &ts, NULL, 0);
	if (r == 0 || errno == EAGAIN) return 0;
	return errno;
}

int hostshm_futex_wake(uintptr_t addr) {
	long r = syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
	return r < 0 ? errno : 0;
}

// vm_copy moves n bytes between this process and pid, resuming after partial
// transfers (the kernel stops at page-table boundaries it cannot cross at once).
static int vm_copy(int pid, uintptr_t local, uintptr_t remote, uint64_t n, int write) {
	while (n > 0) {
		// One call moves at most 1 GiB here: the kernel caps a call's total at
		// MAX_RW_COUNT (2 GiB - 4 KiB) anyway.
		size_t len = n > (1u << 30) ? (1u << 30) : (size_t)n;
		struct iovec l = {.iov_base = (void *)local, .iov_len = len};
		struct iovec r = {.iov_base = (void *)remote, .iov_len = len};
		ssize_t got = write ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
		if (got < 0) {
			if (errno == EINTR) continue;
			return errno;
		}
		if (got == 0) return EFAULT;
		local += (uintptr_t)got;
		remote += (uintptr_t)got;
		n -= (uint64_t)got;
	}
	return 0;
}

int hostshm_vm_write(int pid, uintptr_t local, uintptr_t remote, uint64_t n) {
	return vm_copy(pid, local, remote, n, 1);
}

int hostshm_vm_read(int pid, uintptr_t local, uintptr_t remote, uint64_t n) {
	return vm_copy(pid, local, remote, n, 0);
}

int hostshm_pidfd_open(int pid, int *fd) {
	long r = syscall(SYS_pidfd_open, pid, 0);
	if (r < 0) return errno;
	*fd = (int)r;
	return 0;
}

int hostshm_pidfd_exited(int fd, int *exited) {
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int r = poll(&p, 1, 0);
	if (r < 0) return errno;
	*exited = r > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
	return 0;
}

void hostshm_close(int fd) { close(fd); }

void hostshm_move(uintptr_t dst, uintptr_t src, uint64_t n) {
	if (n > 0 && dst != src) memmove((void *)dst, (const void *)src, (size_t)n);
}
