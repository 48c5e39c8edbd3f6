// Element-wise reductions: see reduce.h.
//
// Each (type, op) pair is a kernel out[i] = a[i] op b[i]: a plain loop that gcc
// vectorizes at -O3 (reduce.go's cgo CFLAGS). The kernels are compiled twice, for
// x86-64's baseline (SSE2) and for AVX2 with F16C, and ucxx_reduce_isa says which
// this CPU runs. gcc 12 vectorizes no conversion of _Float16 short of AVX-512 FP16,
// so the AVX2 kernels of float16 sums and products convert with F16C intrinsics; the
// baseline's convert one element at a time through libgcc (correct, about 100 MB/s:
// only a CPU without F16C, from before 2012, runs them).
//
// The arithmetic is numpy's, element for element (reduce.go states it); what needs
// care is written beside each kernel.
#include "reduce.h"

#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// Storage types of alignment 1: numpy arrays and offsets into buffers need not be
// aligned to their element, and gcc would otherwise assume so (peeling to a vector
// boundary, then aligned loads).
typedef int8_t i8u __attribute__((aligned(1)));
typedef int16_t i16u __attribute__((aligned(1)));
typedef int32_t i32u __attribute__((aligned(1)));
typedef int64_t i64u __attribute__((aligned(1)));
typedef uint8_t u8u __attribute__((aligned(1)));
typedef uint16_t u16u __attribute__((aligned(1)));
typedef uint32_t u32u __attribute__((aligned(1)));
typedef uint64_t u64u __attribute__((aligned(1)));
typedef float f32u __attribute__((aligned(1)));
typedef double f64u __attribute__((aligned(1)));

typedef void (*kernel)(void *out, const void *a, const void *b, size_t n);

// KERNEL defines name(out, a, b, n): out[i] = EXPR of x = a[i], y = b[i]. out may
// equal a or b: each element is read before it is written, so there is no dependence
// between iterations (what ivdep tells gcc, sparing a run-time overlap check that
// exact aliasing would fail, sending in-place reductions to the scalar loop).
#define KERNEL(name, TS, TV, EXPR)                                                 \
    static void name(void *out_, const void *a_, const void *b_, size_t n) {       \
        TS *out = (TS *)out_;                                                      \
        const TS *a = (const TS *)a_;                                              \
        const TS *b = (const TS *)b_;                                              \
        _Pragma("GCC ivdep") for (size_t i = 0; i < n; i++) {                      \
            TV x = a[i], y = b[i];                                                 \
            out[i] = (EXPR);                                                       \
        }                                                                          \
    }

// Integers: sums and products wrap, computed unsigned in W (signed overflow is
// undefined in C, and uint16 * uint16 would overflow int; the low bits are the same
// either way); min and max compare as the type is signed or not.
#define INT_KERNELS(isa, name, S, SU, U, UU, W)                                    \
    KERNEL(sum_##name##_##isa, UU, U, (U)((W)x + (W)y))                             \
    KERNEL(prod_##name##_##isa, UU, U, (U)((W)x * (W)y))                            \
    KERNEL(min_##name##_##isa, SU, S, x < y ? x : y)                               \
    KERNEL(max_##name##_##isa, SU, S, x > y ? x : y)

// float32 and float64: min and max as numpy's np.minimum/np.maximum: a NaN on either
// side gives NaN (a's when a is one), and of equal values (-0 and +0) the second.
#define FLOAT_KERNELS(isa, name, F, FU)                                            \
    KERNEL(sum_##name##_##isa, FU, F, x + y)                                       \
    KERNEL(prod_##name##_##isa, FU, F, x * y)                                      \
    KERNEL(min_##name##_##isa, FU, F, ((x < y) | (x != x)) ? x : y)                \
    KERNEL(max_##name##_##isa, FU, F, ((x > y) | (x != x)) ? x : y)

// float16 and bfloat16 are kept as their bits.

// half_to_float and float_to_half convert through gcc's _Float16 (IEEE, round to
// nearest even; a NaN stays a NaN, quieted).
static inline float half_to_float(uint16_t h) {
    _Float16 f;
    memcpy(&f, &h, sizeof(f));
    return (float)f;
}

static inline uint16_t float_to_half(float x) {
    _Float16 f = (_Float16)x;
    uint16_t h;
    memcpy(&h, &f, sizeof(h));
    return h;
}

typedef union {
    float f;
    uint32_t u;
} float_bits;

static inline float bf16_to_float(uint16_t h) {
    float_bits v;
    v.u = (uint32_t)h << 16;
    return v.f;
}

// float_to_bf16 rounds to nearest even; a NaN becomes the quiet NaN of its sign, as
// Eigen's bfloat16 (ml_dtypes) makes it.
static inline uint16_t float_to_bf16(float x) {
    float_bits v;
    v.f = x;
    uint32_t u = v.u;
    uint16_t rounded = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    uint16_t nan = (uint16_t)(((u >> 16) & 0x8000u) | 0x7fc0u);
    return (u & 0x7fffffffu) > 0x7f800000u ? nan : rounded;
}

// A half's or bfloat16's order key: its value's order as an integer, for any but NaN
// (sign and magnitude to two's complement, so -0 and +0 are equal). Min and max of
// both compare keys, returning one of the operands' bits untouched.
static inline int16_t order_key(uint16_t h) {
    int16_t m = (int16_t)(h & 0x7fffu);
    return (h & 0x8000u) ? (int16_t)-m : m;
}

static inline int half_isnan(uint16_t h) { return (h & 0x7fffu) > 0x7c00u; }
static inline int bf16_isnan(uint16_t h) { return (h & 0x7fffu) > 0x7f80u; }

// float16 min and max are numpy's half loops: a NaN gives NaN (a's when a is one); of
// equal values the first (npy_half_le/ge). bfloat16's are ml_dtypes': of equal values
// the second, as numpy's float32. Sums and products compute in float and round once:
// float's 24 bits hold the exact product of two halves and make the double rounding
// of a sum harmless (24 >= 2*11+2), so each is the correctly rounded result.
#define HALF_MINMAX_KERNELS(isa)                                                   \
    KERNEL(min_f16_##isa, u16u, uint16_t,                                          \
           (half_isnan(x) | (!half_isnan(y) & (order_key(x) <= order_key(y)))) ? x : y) \
    KERNEL(max_f16_##isa, u16u, uint16_t,                                          \
           (half_isnan(x) | (!half_isnan(y) & (order_key(x) >= order_key(y)))) ? x : y)

#define BF16_MINMAX_KERNELS(isa)                                                   \
    KERNEL(min_bf16_##isa, u16u, uint16_t,                                         \
           (bf16_isnan(x) | (!bf16_isnan(y) & (order_key(x) < order_key(y)))) ? x : y) \
    KERNEL(max_bf16_##isa, u16u, uint16_t,                                         \
           (bf16_isnan(x) | (!bf16_isnan(y) & (order_key(x) > order_key(y)))) ? x : y)

#define ALL_KERNELS(isa)                                                           \
    INT_KERNELS(isa, i8, int8_t, i8u, uint8_t, u8u, uint32_t)                      \
    INT_KERNELS(isa, i16, int16_t, i16u, uint16_t, u16u, uint32_t)                 \
    INT_KERNELS(isa, i32, int32_t, i32u, uint32_t, u32u, uint32_t)                 \
    INT_KERNELS(isa, i64, int64_t, i64u, uint64_t, u64u, uint64_t)                 \
    INT_KERNELS(isa, u8, uint8_t, u8u, uint8_t, u8u, uint32_t)                     \
    INT_KERNELS(isa, u16, uint16_t, u16u, uint16_t, u16u, uint32_t)                \
    INT_KERNELS(isa, u32, uint32_t, u32u, uint32_t, u32u, uint32_t)                \
    INT_KERNELS(isa, u64, uint64_t, u64u, uint64_t, u64u, uint64_t)                \
    FLOAT_KERNELS(isa, f32, float, f32u)                                           \
    FLOAT_KERNELS(isa, f64, double, f64u)                                          \
    HALF_MINMAX_KERNELS(isa)                                                       \
    BF16_MINMAX_KERNELS(isa)

// The table of one isa's kernels, by [dtype][op].
#define KERNEL_ROW(isa, name) {NULL, sum_##name##_##isa, prod_##name##_##isa, min_##name##_##isa, max_##name##_##isa}
#define KERNEL_TABLE(isa)                                                          \
    static const kernel kernels_##isa[UCXX_RED_NTYPES][UCXX_RED_NOPS] = {          \
        [UCXX_RED_INT8] = KERNEL_ROW(isa, i8),                                     \
        [UCXX_RED_INT16] = KERNEL_ROW(isa, i16),                                   \
        [UCXX_RED_INT32] = KERNEL_ROW(isa, i32),                                   \
        [UCXX_RED_INT64] = KERNEL_ROW(isa, i64),                                   \
        [UCXX_RED_UINT8] = KERNEL_ROW(isa, u8),                                    \
        [UCXX_RED_UINT16] = KERNEL_ROW(isa, u16),                                  \
        [UCXX_RED_UINT32] = KERNEL_ROW(isa, u32),                                  \
        [UCXX_RED_UINT64] = KERNEL_ROW(isa, u64),                                  \
        [UCXX_RED_FLOAT32] = KERNEL_ROW(isa, f32),                                 \
        [UCXX_RED_FLOAT64] = KERNEL_ROW(isa, f64),                                 \
        [UCXX_RED_FLOAT16] = KERNEL_ROW(isa, f16),                                 \
        [UCXX_RED_BFLOAT16] = KERNEL_ROW(isa, bf16),                               \
    };

// The baseline's kernels.
ALL_KERNELS(generic)
KERNEL(sum_f16_generic, u16u, uint16_t, float_to_half(half_to_float(x) + half_to_float(y)))
KERNEL(prod_f16_generic, u16u, uint16_t, float_to_half(half_to_float(x) * half_to_float(y)))
KERNEL(sum_bf16_generic, u16u, uint16_t, float_to_bf16(bf16_to_float(x) + bf16_to_float(y)))
KERNEL(prod_bf16_generic, u16u, uint16_t, float_to_bf16(bf16_to_float(x) * bf16_to_float(y)))
KERNEL_TABLE(generic)

#if defined(__x86_64__)
// The same kernels for AVX2 and F16C: gcc's vectors twice as wide; float16's and
// bfloat16's sums and products written with intrinsics.
#pragma GCC push_options
#pragma GCC target("avx2,f16c")

ALL_KERNELS(avx2)

// HALF_ARITH_AVX2 defines a float16 kernel of 8 elements a step (converted to float,
// OP applied, rounded to nearest even back, as _Float16 rounds) and the scalar EXPR
// for the rest.
#define HALF_ARITH_AVX2(name, OP, EXPR)                                            \
    static void name(void *out_, const void *a_, const void *b_, size_t n) {       \
        unsigned char *out = (unsigned char *)out_;                                \
        const unsigned char *a = (const unsigned char *)a_;                        \
        const unsigned char *b = (const unsigned char *)b_;                        \
        size_t i = 0;                                                              \
        for (; i + 8 <= n; i += 8) {                                               \
            __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + 2 * i))); \
            __m256 y = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + 2 * i))); \
            _mm_storeu_si128((__m128i *)(out + 2 * i),                             \
                             _mm256_cvtps_ph(OP(x, y), _MM_FROUND_TO_NEAREST_INT));  \
        }                                                                          \
        for (; i < n; i++) {                                                       \
            uint16_t x, y, r;                                                      \
            memcpy(&x, a + 2 * i, 2);                                              \
            memcpy(&y, b + 2 * i, 2);                                              \
            r = (EXPR);                                                            \
            memcpy(out + 2 * i, &r, 2);                                            \
        }                                                                          \
    }

HALF_ARITH_AVX2(sum_f16_avx2, _mm256_add_ps, float_to_half(half_to_float(x) + half_to_float(y)))
HALF_ARITH_AVX2(prod_f16_avx2, _mm256_mul_ps, float_to_half(half_to_float(x) * half_to_float(y)))

// bf16_round_avx2 is float_to_bf16 of 8 floats, each result in its lane's low 16 bits.
static inline __m256i bf16_round_avx2(__m256 r) {
    __m256i u = _mm256_castps_si256(r);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
    __m256i nan = _mm256_or_si256(_mm256_and_si256(u, _mm256_set1_epi32((int)0x80000000u)),
                                  _mm256_set1_epi32(0x7fc00000));
    __m256i isnan = _mm256_castps_si256(_mm256_cmp_ps(r, r, _CMP_UNORD_Q));
    return _mm256_srli_epi32(_mm256_blendv_epi8(rounded, nan, isnan), 16);
}

// BF16_ARITH_AVX2 defines a bfloat16 kernel of 16 elements a step: each half of a
// 128-bit lane widened to float by interleaving with zeros (unpacklo/hi), OP applied,
// rounded, and packed back in the same in-lane order; the scalar EXPR for the rest.
// (gcc's own vectorization of BF16_KERNELS takes about twice the instructions.)
#define BF16_ARITH_AVX2(name, OP, EXPR)                                            \
    static void name(void *out_, const void *a_, const void *b_, size_t n) {       \
        unsigned char *out = (unsigned char *)out_;                                \
        const unsigned char *a = (const unsigned char *)a_;                        \
        const unsigned char *b = (const unsigned char *)b_;                        \
        const __m256i zero = _mm256_setzero_si256();                               \
        size_t i = 0;                                                              \
        for (; i + 16 <= n; i += 16) {                                             \
            __m256i x = _mm256_loadu_si256((const __m256i *)(a + 2 * i));          \
            __m256i y = _mm256_loadu_si256((const __m256i *)(b + 2 * i));          \
            __m256 lo = OP(_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, x)),    \
                           _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, y)));   \
            __m256 hi = OP(_mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, x)),    \
                           _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, y)));   \
            _mm256_storeu_si256((__m256i *)(out + 2 * i),                          \
                                _mm256_packus_epi32(bf16_round_avx2(lo), bf16_round_avx2(hi))); \
        }                                                                          \
        for (; i < n; i++) {                                                       \
            uint16_t x, y, r;                                                      \
            memcpy(&x, a + 2 * i, 2);                                              \
            memcpy(&y, b + 2 * i, 2);                                              \
            r = (EXPR);                                                            \
            memcpy(out + 2 * i, &r, 2);                                            \
        }                                                                          \
    }

BF16_ARITH_AVX2(sum_bf16_avx2, _mm256_add_ps, float_to_bf16(bf16_to_float(x) + bf16_to_float(y)))
BF16_ARITH_AVX2(prod_bf16_avx2, _mm256_mul_ps, float_to_bf16(bf16_to_float(x) * bf16_to_float(y)))

KERNEL_TABLE(avx2)

#pragma GCC pop_options
#endif

int ucxx_reduce_isa(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) {
        return UCXX_RED_ISA_AVX2;
    }
#endif
    return UCXX_RED_ISA_GENERIC;
}

static const size_t elem_size[UCXX_RED_NTYPES] = {
    [UCXX_RED_INT8] = 1,    [UCXX_RED_INT16] = 2,   [UCXX_RED_INT32] = 4,
    [UCXX_RED_INT64] = 8,   [UCXX_RED_UINT8] = 1,   [UCXX_RED_UINT16] = 2,
    [UCXX_RED_UINT32] = 4,  [UCXX_RED_UINT64] = 8,  [UCXX_RED_FLOAT32] = 4,
    [UCXX_RED_FLOAT64] = 8, [UCXX_RED_FLOAT16] = 2, [UCXX_RED_BFLOAT16] = 2,
};

// BLOCK_BYTES is the span of one block of a fold over three sources or more: the
// accumulator stays in L1 while every source's block is folded into it.
#define BLOCK_BYTES 8192

int ucxx_reduce(int isa, uintptr_t dst, const uintptr_t *srcs, size_t nsrcs, size_t n, int dtype,
                int op) {
    if (dtype <= 0 || dtype >= UCXX_RED_NTYPES || op <= 0 || op >= UCXX_RED_NOPS || nsrcs == 0) {
        return -1;
    }
    kernel k;
    switch (isa) {
    case UCXX_RED_ISA_GENERIC:
        k = kernels_generic[dtype][op];
        break;
#if defined(__x86_64__)
    case UCXX_RED_ISA_AVX2:
        k = kernels_avx2[dtype][op];
        break;
#endif
    default:
        return -1;
    }
    size_t size = elem_size[dtype];
    if (nsrcs == 1) {
        if (dst != srcs[0]) {
            memcpy((void *)dst, (const void *)srcs[0], n * size);
        }
        return 0;
    }
    if (nsrcs == 2) {
        k((void *)dst, (const void *)srcs[0], (const void *)srcs[1], n);
        return 0;
    }
    // Block by block: acc = s0 op s1, acc op= s2 ... s[last-1], dst = acc op s[last].
    // dst is written only by the last step, after every source's block was read, so
    // it may be any of the sources.
    _Alignas(64) unsigned char acc[BLOCK_BYTES];
    size_t step = BLOCK_BYTES / size;
    for (size_t i = 0; i < n; i += step) {
        size_t m = n - i < step ? n - i : step;
        size_t off = i * size;
        k(acc, (const void *)(srcs[0] + off), (const void *)(srcs[1] + off), m);
        for (size_t j = 2; j + 1 < nsrcs; j++) {
            k(acc, acc, (const void *)(srcs[j] + off), m);
        }
        k((void *)(dst + off), acc, (const void *)(srcs[nsrcs - 1] + off), m);
    }
    return 0;
}
