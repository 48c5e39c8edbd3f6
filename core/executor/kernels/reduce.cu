// Element-wise reductions of the collective executor's GPU lanes: dst[i] = a[i] op b[i]
// for n elements, with numpy's arithmetic (integers wrap; float min and max propagate
// NaN; float16 and bfloat16 computed in float and rounded once). reduce.ptx is this
// file compiled for compute_80 (make executor-ptx): the executor loads the PTX with
// the driver API, so no CUDA compiler is needed at run time.
//
// Kernel names: reduce_<op>_<type>, op in sum prod min max, type in i8 i16 i32 i64 u8
// u16 u32 u64 f16 bf16 f32 f64. Parameters: (T *dst, const T *a, const T *b,
// unsigned long long n). dst may be a or b.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

template <typename T> struct Arith {
  static __device__ T sum(T x, T y) { return x + y; }
  static __device__ T prod(T x, T y) { return x * y; }
  static __device__ T mn(T x, T y) { return x < y ? x : y; }
  static __device__ T mx(T x, T y) { return x > y ? x : y; }
};

// Signed integers wrap like numpy: compute in the unsigned type.
#define WRAPPING(T, U)                                                              \
  template <> struct Arith<T> {                                                     \
    static __device__ T sum(T x, T y) { return (T)((U)x + (U)y); }                  \
    static __device__ T prod(T x, T y) { return (T)((U)x * (U)y); }                 \
    static __device__ T mn(T x, T y) { return x < y ? x : y; }                      \
    static __device__ T mx(T x, T y) { return x > y ? x : y; }                      \
  };
WRAPPING(int8_t, uint8_t)
WRAPPING(int16_t, uint16_t)
WRAPPING(int32_t, uint32_t)
WRAPPING(int64_t, uint64_t)
WRAPPING(uint8_t, uint8_t)
WRAPPING(uint16_t, uint16_t)

// Floats: numpy's minimum/maximum return NaN if either is NaN.
template <typename F> __device__ F fmin_np(F x, F y) { return (x != x || y != y) ? (x != x ? x : y) : (x < y ? x : y); }
template <typename F> __device__ F fmax_np(F x, F y) { return (x != x || y != y) ? (x != x ? x : y) : (x > y ? x : y); }
template <> struct Arith<float> {
  static __device__ float sum(float x, float y) { return __fadd_rn(x, y); }
  static __device__ float prod(float x, float y) { return __fmul_rn(x, y); }
  static __device__ float mn(float x, float y) { return fmin_np(x, y); }
  static __device__ float mx(float x, float y) { return fmax_np(x, y); }
};
template <> struct Arith<double> {
  static __device__ double sum(double x, double y) { return __dadd_rn(x, y); }
  static __device__ double prod(double x, double y) { return __dmul_rn(x, y); }
  static __device__ double mn(double x, double y) { return fmin_np(x, y); }
  static __device__ double mx(double x, double y) { return fmax_np(x, y); }
};
#define VIA_FLOAT(T, TO, FROM)                                                       \
  template <> struct Arith<T> {                                                      \
    static __device__ T sum(T x, T y) { return FROM(__fadd_rn(TO(x), TO(y))); }      \
    static __device__ T prod(T x, T y) { return FROM(__fmul_rn(TO(x), TO(y))); }     \
    static __device__ T mn(T x, T y) { return FROM(fmin_np(TO(x), TO(y))); }        \
    static __device__ T mx(T x, T y) { return FROM(fmax_np(TO(x), TO(y))); }         \
  };
VIA_FLOAT(__half, __half2float, __float2half_rn)
VIA_FLOAT(__nv_bfloat16, __bfloat162float, __float2bfloat16_rn)

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
