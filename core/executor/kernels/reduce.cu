// Element-wise reductions of the collective executor's GPU lanes: dst[i] = src[0][i]
// op src[1][i] op ... op src[count-1][i], folded left, for n elements, with numpy's
// arithmetic (integers wrap; float min and max propagate NaN; float16 and bfloat16
// computed in float and rounded once). One kernel reads every source once and writes
// dst once, where folding pairwise would write and reread dst count-2 times more (a
// 4-source reduction moved 9 bytes an output byte instead of 5). dst may be any
// source: each element of every source is read before that element of dst is
// written. reduce.ptx is this file compiled for compute_80 (make executor-ptx): the
// executor loads the PTX with the driver API, so no CUDA compiler is needed at run
// time.
//
// Kernel names: reduce_<op>_<type>, op in sum prod min max, type in i8 i16 i32 i64 u8
// u16 u32 u64 f16 bf16 f32 f64. The one parameter is a ReduceArgs, by value: its
// source count, REDUCE_MAX_SOURCES, comes from program_format.h (generated from the
// executor's Go constants); gpu.go's reduceArgs packs it, and TestReducePTXTakesReduceArgs
// checks the PTX's parameter size against that.
#include "arith.cuh"
#include "program_format.h"

struct ReduceArgs {
  unsigned long long dst, n, count;
  unsigned long long src[REDUCE_MAX_SOURCES];
};

// reduce_sources runs the reduction: 16 bytes a load where every address allows it,
// the sources' loads of one thread in flight together.
template <typename T, int OP> __device__ void reduce_sources(const ReduceArgs &p) {
  const unsigned long long n = p.n;
  const int count = (int)p.count;
  const unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long aligned = p.dst, done = 0;
#pragma unroll
  for (int s = 0; s < REDUCE_MAX_SOURCES; s++)
    if (s < count) aligned |= p.src[s];
  if ((aligned & 15) == 0) {
    constexpr unsigned long long k = 16 / sizeof(T);
    const unsigned long long v = n / k;
    uint4 *d = (uint4 *)p.dst;
    for (unsigned long long j = tid; j < v; j += stride) {
      uint4 x[REDUCE_MAX_SOURCES];
#pragma unroll
      for (int s = 0; s < REDUCE_MAX_SOURCES; s++)
        if (s < count) x[s] = ((const uint4 *)p.src[s])[j];
      uint4 acc = x[0];
#pragma unroll
      for (int s = 1; s < REDUCE_MAX_SOURCES; s++)
        if (s < count) acc = apply16<T, OP>(acc, x[s]);
      d[j] = acc;
    }
    done = v * k;
  }
  T *d = (T *)p.dst;
  for (unsigned long long e = done + tid; e < n; e += stride) {
    T acc = ((const T *)p.src[0])[e];
    for (int s = 1; s < count; s++) acc = apply<T, OP>(acc, ((const T *)p.src[s])[e]);
    d[e] = acc;
  }
}

#define KERNEL(OPNAME, OP, NAME, T)                                                              \
  extern "C" __global__ void reduce_##OPNAME##_##NAME(const __grid_constant__ ReduceArgs p) { \
    reduce_sources<T, OP>(p);                                                                  \
  }
#define ALL_OPS(NAME, T) KERNEL(sum, 0, NAME, T) KERNEL(prod, 1, NAME, T) KERNEL(min, 2, NAME, T) KERNEL(max, 3, NAME, T)

ALL_OPS(i8, int8_t)
ALL_OPS(i16, int16_t)
ALL_OPS(i32, int32_t)
ALL_OPS(i64, int64_t)
ALL_OPS(u8, uint8_t)
ALL_OPS(u16, uint16_t)
ALL_OPS(u32, uint32_t)
ALL_OPS(u64, unsigned long long)
ALL_OPS(f16, __half)
ALL_OPS(bf16, __nv_bfloat16)
ALL_OPS(f32, float)
ALL_OPS(f64, double)
