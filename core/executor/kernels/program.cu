// Device programs: a GPU lane's recorded ops, run in order by one thread block
// (core/executor/program.go says why and what the stream semantics are), or, in a
// sliced call, by each of several blocks on its own slice of every copy and reduction,
// with its own word of every counter (core/executor/slices.go says why that needs no
// barrier between blocks). program.ptx is this file compiled for compute_80 (make
// executor-ptx).
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

// slice_bounds is this block's part [lo, hi) of an n-byte extent: equal parts on
// multiples of PROGRAM_SLICE_ALIGN, the last shorter (and empty parts past the end).
// Every op over the same extent gets the same part in the same block.
__device__ __forceinline__ void slice_bounds(unsigned long long n, unsigned long long &lo, unsigned long long &hi) {
  const unsigned long long g = gridDim.x;
  unsigned long long per = (n + g - 1) / g;
  per = (per + PROGRAM_SLICE_ALIGN - 1) / PROGRAM_SLICE_ALIGN * PROGRAM_SLICE_ALIGN;
  lo = min(n, (unsigned long long)blockIdx.x * per);
  hi = min(n, lo + per);
}

// slice_word is this block's word of a counter whose first word is at p.
__device__ __forceinline__ unsigned long long *slice_word(unsigned long long p) {
  return (unsigned long long *)(p + (unsigned long long)blockIdx.x * PROGRAM_SLICE_WORD_BYTES);
}

// copy_units copies n units, four loads in flight a thread before their stores (one
// load at a time leaves a copy over NVLink waiting on memory latency).
template <typename U> __device__ __forceinline__ void copy_units(U *dst, const U *src, unsigned long long n) {
  const unsigned long long s = blockDim.x;
  unsigned long long i = threadIdx.x;
  for (; i + 3 * s < n; i += 4 * s) {
    const U a = __ldcg(src + i), b = __ldcg(src + i + s), c = __ldcg(src + i + 2 * s), d = __ldcg(src + i + 3 * s);
    dst[i] = a;
    dst[i + s] = b;
    dst[i + 2 * s] = c;
    dst[i + 3 * s] = d;
  }
  for (; i < n; i += s) dst[i] = __ldcg(src + i);
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

// reduce_elements is dst[i] = a[i] op b[i] for n elements: 16 bytes a load, two in
// flight a thread, where the three addresses allow it.
template <typename T, int OP> __device__ void reduce_elements(T *dst, const T *a, const T *b, unsigned long long n) {
  unsigned long long i = 0;
  if ((((unsigned long long)dst | (unsigned long long)a | (unsigned long long)b) & 15) == 0) {
    constexpr unsigned long long k = 16 / sizeof(T);
    const unsigned long long v = n / k, s = blockDim.x;
    uint4 *d4 = (uint4 *)dst;
    const uint4 *a4 = (const uint4 *)a, *b4 = (const uint4 *)b;
    unsigned long long j = threadIdx.x;
    for (; j + s < v; j += 2 * s) {
      const uint4 x0 = __ldcg(a4 + j), y0 = __ldcg(b4 + j), x1 = __ldcg(a4 + j + s), y1 = __ldcg(b4 + j + s);
      d4[j] = apply16<T, OP>(x0, y0);
      d4[j + s] = apply16<T, OP>(x1, y1);
    }
    for (; j < v; j += s) d4[j] = apply16<T, OP>(__ldcg(a4 + j), __ldcg(b4 + j));
    i = v * k;
  }
  for (unsigned long long e = i + threadIdx.x; e < n; e += blockDim.x) dst[e] = apply<T, OP>(ldcg(a + e), ldcg(b + e));
}

// run executes the program; OP < 0: it has no reductions (one found traps).
template <typename T, int OP> __device__ void run(const Program &p) {
  const unsigned long long *w = p.w;
  const unsigned long long end = 1 + w[0];
  for (unsigned long long i = 1; i < end;) {
    const unsigned code = (unsigned)w[i];
    switch (code) {
    case PROGRAM_COPY: {
      unsigned long long lo, hi;
      slice_bounds(w[i + 3], lo, hi);
      copy_bytes((char *)w[i + 1] + lo, (const char *)w[i + 2] + lo, hi - lo);
      i += 1 + PROGRAM_COPY_OPERANDS;
      break;
    }
    case PROGRAM_REDUCE:
      if constexpr (OP >= 0) {
        unsigned long long lo, hi;
        slice_bounds(w[i + 4] * sizeof(T), lo, hi);
        lo /= sizeof(T), hi /= sizeof(T);
        reduce_elements<T, OP>((T *)w[i + 1] + lo, (const T *)w[i + 2] + lo, (const T *)w[i + 3] + lo, hi - lo);
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
        store_release_sys(slice_word(w[i + 1]), w[i + 2]);
      }
      i += 1 + PROGRAM_WRITE_OPERANDS;
      break;
    case PROGRAM_WAIT:
      if (threadIdx.x == 0) {
        const unsigned long long *word = slice_word(w[i + 1]);
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
