// Element-wise arithmetic of the executor's kernels (reduce.cu, program.cu), with
// numpy's semantics: integers wrap; float min and max propagate NaN; float16 and
// bfloat16 computed in float and rounded once.
#ifndef UCXX_ARITH_CUH
#define UCXX_ARITH_CUH
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

// apply is the operator OP (0 sum, 1 prod, 2 min, 3 max) on two elements.
template <typename T, int OP> __device__ __forceinline__ T apply(T x, T y) {
  if constexpr (OP == 0) return Arith<T>::sum(x, y);
  else if constexpr (OP == 1) return Arith<T>::prod(x, y);
  else if constexpr (OP == 2) return Arith<T>::mn(x, y);
  else return Arith<T>::mx(x, y);
}

// apply16 is apply over the elements of 16 bytes.
template <typename T, int OP> __device__ __forceinline__ uint4 apply16(uint4 x, uint4 y) {
  constexpr int k = 16 / sizeof(T);
  T a[k], b[k];
  memcpy(a, &x, 16);
  memcpy(b, &y, 16);
#pragma unroll
  for (int j = 0; j < k; j++) a[j] = apply<T, OP>(a[j], b[j]);
  memcpy(&x, a, 16);
  return x;
}

#endif
