// Host shared-memory primitives of the collective executor: futexes on words that
// several processes map, single-copy transfers into and out of another process's
// memory (process_vm_readv/writev, "CMA"), and a peer's liveness through a pidfd.
// Every function returns 0 or a positive errno; none keeps a pointer it was given.
#ifndef UCXXGO_EXECUTOR_HOSTSHM_H
#define UCXXGO_EXECUTOR_HOSTSHM_H

#include <stdint.h>

// hostshm_futex_wait sleeps while the 32-bit word at addr holds expected, at most
// timeout_ns; 0 when woken or the word differs, ETIMEDOUT, EINTR.
int hostshm_futex_wait(uintptr_t addr, uint32_t expected, int64_t timeout_ns);

// hostshm_futex_wake wakes every sleeper on the word at addr.
int hostshm_futex_wake(uintptr_t addr);

// hostshm_vm_write copies n bytes from local to remote in process pid, all of them
// or an errno (EFAULT: the remote range is not mapped there; ESRCH: pid is gone).
int hostshm_vm_write(int pid, uintptr_t local, uintptr_t remote, uint64_t n);

// hostshm_vm_read copies n bytes from remote in process pid to local.
int hostshm_vm_read(int pid, uintptr_t local, uintptr_t remote, uint64_t n);

// hostshm_pidfd_open returns a pidfd for pid in *fd.
int hostshm_pidfd_open(int pid, int *fd);

// hostshm_pidfd_exited reports in *exited whether the process behind pidfd ended.
int hostshm_pidfd_exited(int fd, int *exited);

// hostshm_close closes fd.
void hostshm_close(int fd);

// hostshm_move copies n bytes from src to dst (the ranges may overlap).
void hostshm_move(uintptr_t dst, uintptr_t src, uint64_t n);


// LL packets: every 4 payload bytes in an 8-byte word with the flag in its upper
// half, written and read with 8-byte atomic accesses (packets.go).

// hostshm_pack stores n payload bytes from src as packets with flag at dst.
void hostshm_pack(uintptr_t dst, uintptr_t src, uint64_t n, uint32_t flag);

// hostshm_unpack stores the payload of the packets at src to dst, in order, while
// their flag is flag; it returns the payload bytes done (n when all were ready).
uint64_t hostshm_unpack(uintptr_t dst, uintptr_t src, uint64_t n, uint32_t flag);

// hostshm_forward copies the packets at src, flag and all, to each of ndst
// destinations, in order, while their flag is flag; it returns the payload bytes done.
uint64_t hostshm_forward(const uintptr_t *dsts, int ndst, uintptr_t src, uint64_t n, uint32_t flag);

// hostshm_copy_words copies the packets of n payload bytes from src to dst, word by
// word with atomic loads and stores.
void hostshm_copy_words(uintptr_t dst, uintptr_t src, uint64_t n);

#endif
