// Package reduce combines arrays of numbers element by element in host memory: dst[i]
// = a[i] op b[i] (Reduce), or a left fold over several sources (ReduceMany), for the
// collective executor's reduce ops and the execution DAG's reductions.
//
// The arithmetic is numpy's, bit for bit, so results can be checked against numpy:
//   - integers wrap on overflow (sums and products, signed or not);
//   - float32 and float64 are IEEE: a sum or product rounds to nearest even, and Min
//     and Max are np.minimum and np.maximum (a NaN on either side gives a NaN, the
//     first operand's when both are; of equal values, such as -0 and +0, the second);
//   - float16 computes each sum or product in float32 and rounds once to half, as
//     numpy does (the correctly rounded result); Min and Max are numpy's half loops
//     (NaN as above; of equal values the first);
//   - bfloat16 (ml_dtypes' numpy type) computes in float32 and rounds to nearest
//     even; a NaN result is the quiet NaN of its sign (0x7fc0, 0xffc0), as
//     ml_dtypes' Eigen type makes it; Min and Max as float32's.
//
// Sums fold left in the order of the operands, ((s0 op s1) op s2) ..., each step
// rounded: a float sum depends on the order of its sources. Which NaN a sum or
// product of two NaNs gives is unspecified, as in numpy.
//
// The work is C (reduce.c, compiled with -O3 so that gcc vectorizes each kernel), one
// cgo call per reduction; on a CPU with AVX2 and F16C the kernels built for them run.
// The package keeps no state: reductions may run at once on any goroutines (into
// disjoint destinations). README.md has the measured throughput.
package reduce
