package reduce

// #cgo CFLAGS: -O3 -Wall
// #cgo noescape ucxx_reduce
// #cgo nocallback ucxx_reduce
// #include "reduce.h"
import "C"

import (
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// ErrUnsupported is wrapped by the error of a reduction of an unknown element type or
// operation.
var ErrUnsupported = errors.New("reduce: unsupported")

// ErrOverlap is wrapped by the error of a reduction whose destination overlaps a
// source other than by being it.
var ErrOverlap = errors.New("reduce: destination overlaps a source")

// The instruction sets of the C kernels, and the best this CPU runs (what Reduce
// uses; the tests run the others too).
const (
	isaGeneric = C.UCXX_RED_ISA_GENERIC
	isaAVX2    = C.UCXX_RED_ISA_AVX2
)

var bestISA = int(C.ucxx_reduce_isa())

// reduce.h numbers its element types and operations as DType and Op do: this fails to
// compile if the two part (an index out of range, or a negative constant).
func _() {
	var x [1]struct{}
	_ = x[C.UCXX_RED_INT8-Int8]
	_ = x[C.UCXX_RED_INT16-Int16]
	_ = x[C.UCXX_RED_INT32-Int32]
	_ = x[C.UCXX_RED_INT64-Int64]
	_ = x[C.UCXX_RED_UINT8-Uint8]
	_ = x[C.UCXX_RED_UINT16-Uint16]
	_ = x[C.UCXX_RED_UINT32-Uint32]
	_ = x[C.UCXX_RED_UINT64-Uint64]
	_ = x[C.UCXX_RED_FLOAT32-Float32]
	_ = x[C.UCXX_RED_FLOAT64-Float64]
	_ = x[C.UCXX_RED_FLOAT16-Float16]
	_ = x[C.UCXX_RED_BFLOAT16-BFloat16]
	_ = x[C.UCXX_RED_NTYPES-BFloat16-1]
	_ = x[C.UCXX_RED_SUM-Sum]
	_ = x[C.UCXX_RED_PROD-Prod]
	_ = x[C.UCXX_RED_MIN-Min]
	_ = x[C.UCXX_RED_MAX-Max]
	_ = x[C.UCXX_RED_NOPS-Max-1]
}

// Check returns nil if t and op are a reduction Reduce runs, else an error wrapping
// ErrUnsupported.
func Check(t DType, op Op) error {
	if t.Size() == 0 {
		return fmt.Errorf("%w element type %v", ErrUnsupported, t)
	}
	if op < Sum || op > Max {
		return fmt.Errorf("%w operation %v", ErrUnsupported, op)
	}
	return nil
}

// Reduce sets dst[i] = a[i] op b[i] for the n elements of type t at dst, a and b, as
// numpy computes it (see the package doc). dst may be a or b (or both) exactly, for
// an in-place reduction; otherwise dst must not overlap either. a and b may overlap
// each other. n == 0 writes nothing.
//
// The addresses are host memory outside Go's heap (numpy's, mmap's, C's) that stays
// valid for the call; nothing is kept after it returns. It is one call into C.
//
// Errors: ErrUnsupported (t or op unknown), ErrOverlap, and an error for a nil
// address or a range past the end of the address space; nothing is written then.
func Reduce(dst, a, b uintptr, n uint64, t DType, op Op) error {
	srcs := [2]uintptr{a, b}
	return reduce(bestISA, dst, srcs[:], n, t, op)
}

// ReduceMany sets dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[k-1][i], folded
// left, for the n elements of type t at dst and at each source, in one call into C.
// With three sources or more it goes block by block (8 KiB), folding every source's
// block into an accumulator that stays in L1 before the next block, so each source is
// read once and dst written once. dst may be any of the sources exactly; otherwise
// the same rules as Reduce's hold. One source is a copy (none is an error).
//
// Errors: Reduce's, and an error for no sources.
func ReduceMany(dst uintptr, srcs []uintptr, n uint64, t DType, op Op) error {
	return reduce(bestISA, dst, srcs, n, t, op)
}

func reduce(isa int, dst uintptr, srcs []uintptr, n uint64, t DType, op Op) error {
	if err := Check(t, op); err != nil {
		return err
	}
	if len(srcs) == 0 {
		return errors.New("reduce: no sources")
	}
	if n == 0 {
		return nil
	}
	size := t.Size()
	if n > math.MaxUint64/size {
		return fmt.Errorf("reduce: %d elements of %v: too many", n, t)
	}
	span := uintptr(n * size)
	if dst == 0 || dst+span < dst {
		return fmt.Errorf("reduce: destination %#x of %d bytes: bad range", dst, span)
	}
	for _, s := range srcs {
		if s == 0 || s+span < s {
			return fmt.Errorf("reduce: source %#x of %d bytes: bad range", s, span)
		}
		if s != dst && s < dst+span && dst < s+span {
			return fmt.Errorf("reduce: destination %#x and source %#x, %d bytes: %w", dst, s, span, ErrOverlap)
		}
	}
	// srcs is Go memory holding no Go pointers, lent to C for this call (noescape).
	if C.ucxx_reduce(C.int(isa), C.uintptr_t(dst), (*C.uintptr_t)(unsafe.Pointer(&srcs[0])),
		C.size_t(len(srcs)), C.size_t(n), C.int(t), C.int(op)) != 0 {
		return fmt.Errorf("%w reduction %v %v with kernels %d", ErrUnsupported, t, op, isa)
	}
	return nil
}
