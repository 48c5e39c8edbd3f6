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

void hostshm_pack(uintptr_t dst, uintptr_t src, uint64_t n, uint32_t flag) {
	uint64_t *out = (uint64_t *)dst;
	const unsigned char *in = (const unsigned char *)src;
	uint64_t hi = (uint64_t)flag << 32;
	for (uint64_t i = 0; i < n; i += 4) {
		uint32_t d = 0;
		memcpy(&d, in + i, n - i >= 4 ? 4 : (size_t)(n - i));
		__atomic_store_n(&out[i / 4], hi | d, __ATOMIC_RELAXED);
	}
}

uint64_t hostshm_unpack(uintptr_t dst, uintptr_t src, uint64_t n, uint32_t flag) {
	const uint64_t *in = (const uint64_t *)src;
	unsigned char *out = (unsigned char *)dst;
	uint64_t i = 0;
	for (; i < n; i += 4) {
		uint64_t w = __atomic_load_n(&in[i / 4], __ATOMIC_ACQUIRE);
		if ((uint32_t)(w >> 32) != flag) return i;
		uint32_t d = (uint32_t)w;
		memcpy(out + i, &d, n - i >= 4 ? 4 : (size_t)(n - i));
	}
	return n;
}

uint64_t hostshm_forward(const uintptr_t *dsts, int ndst, uintptr_t src, uint64_t n, uint32_t flag) {
	const uint64_t *in = (const uint64_t *)src;
	uint64_t i = 0;
	for (; i < n; i += 4) {
		uint64_t w = __atomic_load_n(&in[i / 4], __ATOMIC_ACQUIRE);
		if ((uint32_t)(w >> 32) != flag) return i;
		for (int k = 0; k < ndst; k++) __atomic_store_n(&((uint64_t *)dsts[k])[i / 4], w, __ATOMIC_RELAXED);
	}
	return n;
}

void hostshm_copy_words(uintptr_t dst, uintptr_t src, uint64_t n) {
	const uint64_t *in = (const uint64_t *)src;
	uint64_t *out = (uint64_t *)dst;
	for (uint64_t i = 0; i < (n + 3) / 4; i++) __atomic_store_n(&out[i], __atomic_load_n(&in[i], __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}
