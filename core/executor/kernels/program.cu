// Device programs: a GPU lane's recorded ops, run in order by one thread block
// (core/executor/program.go says why and what the stream semantics are).
// program.ptx is this file compiled for compute_80 (make executor-ptx).
//
// Kernel names: program_<op>_<type> (op in sum prod min max, type as reduce.cu's),
// whose reductions are of that type and operator, and program_copy, for programs
// without reductions. The one parameter is the program, by value (PROGRAM_WORDS
// 64-bit words; program_format.h, generated from program.go, gives the layout).
//
// Memory model: a write of a word (a signal) is a release at system scope after the
// block's barrier, so every store the block made before it (to this GPU, a peer's
// over NVLink, or host memory) is visible first; a wait is an acquire at system scope
// before the block's barrier. Reads of data bypass L1 (ld.global.cg): a peer may have
// rewritten an address this block read earlier in the launch.
#include "arith.cuh"
#include "program_format.h"

struct Program {
  unsigned long long w[PROGRAM_WORDS];
};

__device__ __forceinline__ unsigned long long load_acquire_sys(const unsigned long long *p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void store_release_sys(unsigned long long *p, unsigned long long v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// ldcg loads a T around L1, through an unsigned integer of its size.
template <typename T> __device__ __forceinline__ T ldcg(const T *p) {
  T v;
  if constexpr (sizeof(T) == 1) {
    unsigned char u = __ldcg((const unsigned char *)p);
    memcpy(&v, &u, 1);
  } else if constexpr (sizeof(T) == 2) {
    unsigned short u = __ldcg((const unsigned short *)p);
    memcpy(&v, &u, 2);
  } else if constexpr (sizeof(T) == 4) {
    unsigned int u = __ldcg((const unsigned int *)p);
    memcpy(&v, &u, 4);
  } else {
    unsigned long long u = __ldcg((const unsigned long long *)p);
    memcpy(&v, &u, 8);
  }
  return v;
}

template <typename U> __device__ __forceinline__ void copy_units(U *dst, const U *src, unsigned long long n) {
  for (unsigned long long i = threadIdx.x; i < n; i += blockDim.x) dst[i] = __ldcg(src + i);
}

// copy_bytes copies n bytes in the widest units the addresses and size allow.
__device__ void copy_bytes(char *dst, const char *src, unsigned long long n) {
  unsigned long long a = (unsigned long long)dst | (unsigned long long)src | n;
  if ((a & 15) == 0)
    copy_units((uint4 *)dst, (const uint4 *)src, n / 16);
  else if ((a & 7) == 0)
    copy_units((unsigned long long *)dst, (const unsigned long long *)src, n / 8);
  else if ((a & 3) == 0)
    copy_units((unsigned int *)dst, (const unsigned int *)src, n / 4);
  else
    copy_units((unsigned char *)dst, (const unsigned char *)src, n);
}

template <typename T, int OP> __device__ __forceinline__ T apply(T x, T y) {
  if constexpr (OP == 0) return Arith<T>::sum(x, y);
  else if constexpr (OP == 1) return Arith<T>::prod(x, y);
  else if constexpr (OP == 2) return Arith<T>::mn(x, y);
  else return Arith<T>::mx(x, y);
}

// run executes the program; OP < 0: it has no reductions (one found traps).
template <typename T, int OP> __device__ void run(const Program &p) {
  const unsigned long long *w = p.w;
  const unsigned long long end = 1 + w[0];
  for (unsigned long long i = 1; i < end;) {
    const unsigned code = (unsigned)w[i];
    switch (code) {
    case PROGRAM_COPY:
      copy_bytes((char *)w[i + 1], (const char *)w[i + 2], w[i + 3]);
      i += 1 + PROGRAM_COPY_OPERANDS;
      break;
    case PROGRAM_REDUCE:
      if constexpr (OP >= 0) {
        T *dst = (T *)w[i + 1];
        const T *a = (const T *)w[i + 2], *b = (const T *)w[i + 3];
        for (unsigned long long k = threadIdx.x; k < w[i + 4]; k += blockDim.x) dst[k] = apply<T, OP>(ldcg(a + k), ldcg(b + k));
      } else {
        __trap();
      }
      i += 1 + PROGRAM_REDUCE_OPERANDS;
      break;
    case PROGRAM_WRITE:
      // The release orders the block's stores (after the barrier that ended the
      // previous op); the full fence also covers work queued on the stream before
      // this kernel (a copy engine's copy), as cuStreamWriteValue64 did.
      if (threadIdx.x == 0) {
        __threadfence_system();
        store_release_sys((unsigned long long *)w[i + 1], w[i + 2]);
      }
      i += 1 + PROGRAM_WRITE_OPERANDS;
      break;
    case PROGRAM_WAIT:
      if (threadIdx.x == 0) {
        const unsigned long long *word = (const unsigned long long *)w[i + 1];
        while (load_acquire_sys(word) < w[i + 2]) {
        }
      }
      i += 1 + PROGRAM_WAIT_OPERANDS;
      break;
    default:
      __trap();
    }
    __syncthreads();
  }
}

extern "C" __global__ void __launch_bounds__(PROGRAM_THREADS) program_copy(const __grid_constant__ Program p) { run<unsigned char, -1>(p); }

#define PKERNEL(OPNAME, OP, NAME, T)                                                                      \
  extern "C" __global__ void __launch_bounds__(PROGRAM_THREADS) program_##OPNAME##_##NAME(const __grid_constant__ Program p) { \
    run<T, OP>(p);                                                                                        \
  }
#define PALL_OPS(NAME, T) PKERNEL(sum, 0, NAME, T) PKERNEL(prod, 1, NAME, T) PKERNEL(min, 2, NAME, T) PKERNEL(max, 3, NAME, T)

PALL_OPS(i8, int8_t)
PALL_OPS(i16, int16_t)
PALL_OPS(i32, int32_t)
PALL_OPS(i64, int64_t)
PALL_OPS(u8, uint8_t)
PALL_OPS(u16, uint16_t)
PALL_OPS(u32, uint32_t)
PALL_OPS(u64, unsigned long long)
PALL_OPS(f16, __half)
PALL_OPS(bf16, __nv_bfloat16)
PALL_OPS(f32, float)
PALL_OPS(f64, double)
