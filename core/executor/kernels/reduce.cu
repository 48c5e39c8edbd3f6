// Element-wise reductions of the collective executor's GPU lanes: dst[i] = a[i] op b[i]
// for n elements, with numpy's arithmetic (integers wrap; float min and max propagate
// NaN; float16 and bfloat16 computed in float and rounded once). reduce.ptx is this
// file compiled for compute_80 (make executor-ptx): the executor loads the PTX with
// the driver API, so no CUDA compiler is needed at run time.
//
// Kernel names: reduce_<op>_<type>, op in sum prod min max, type in i8 i16 i32 i64 u8
// u16 u32 u64 f16 bf16 f32 f64. Parameters: (T *dst, const T *a, const T *b,
// unsigned long long n). dst may be a or b.
#include "arith.cuh"

#define KERNEL(OP, FN, NAME, T)                                                      \
  extern "C" __global__ void reduce_##OP##_##NAME(T *dst, const T *a, const T *b,    \
                                                  unsigned long long n) {             \
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; \
         i < n; i += (unsigned long long)gridDim.x * blockDim.x)                      \
      dst[i] = Arith<T>::FN(a[i], b[i]);                                             \
  }
#define ALL_OPS(NAME, T) KERNEL(sum, sum, NAME, T) KERNEL(prod, prod, NAME, T) KERNEL(min, mn, NAME, T) KERNEL(max, mx, NAME, T)

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
