// Element-wise reductions of package reduce: dst = srcs[0] op srcs[1] op ... over n
// elements of host memory. See reduce.go for the contract (aliasing, numpy's
// semantics); this is the C side, called once per reduction.
#ifndef UCXX_REDUCE_H
#define UCXX_REDUCE_H

#include <stddef.h>
#include <stdint.h>

// Element types, numbered as reduce.DType (reduce.go checks the two at compile time).
enum {
    UCXX_RED_INT8 = 1,
    UCXX_RED_INT16 = 2,
    UCXX_RED_INT32 = 3,
    UCXX_RED_INT64 = 4,
    UCXX_RED_UINT8 = 5,
    UCXX_RED_UINT16 = 6,
    UCXX_RED_UINT32 = 7,
    UCXX_RED_UINT64 = 8,
    UCXX_RED_FLOAT32 = 9,
    UCXX_RED_FLOAT64 = 10,
    UCXX_RED_FLOAT16 = 11,
    UCXX_RED_BFLOAT16 = 12,
    UCXX_RED_NTYPES = 13,
};

// Operations, numbered as reduce.Op.
enum {
    UCXX_RED_SUM = 1,
    UCXX_RED_PROD = 2,
    UCXX_RED_MIN = 3,
    UCXX_RED_MAX = 4,
    UCXX_RED_NOPS = 5,
};

// Instruction sets the kernels are compiled for.
enum {
    UCXX_RED_ISA_GENERIC = 0, // x86-64's baseline (SSE2)
    UCXX_RED_ISA_AVX2 = 1,    // AVX2 and F16C (Haswell, Zen and later)
};

// ucxx_reduce_isa returns the best instruction set this CPU runs.
int ucxx_reduce_isa(void);

// ucxx_reduce sets dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[nsrcs-1][i], folded
// left, for i < n (elements of dtype), with the kernels of isa. dst may equal any
// source exactly; no other overlap with dst is allowed. nsrcs >= 1 (one source is a
// copy). Returns 0, or -1 for an unknown dtype, op or isa (nothing written).
int ucxx_reduce(int isa, uintptr_t dst, const uintptr_t *srcs, size_t nsrcs, size_t n, int dtype,
                int op);

#endif
