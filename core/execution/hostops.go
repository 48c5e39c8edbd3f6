package execution

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/core/dag"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Host work of the DAG's built-in vertices: copies and reductions between host
// buffers, run on the host lane.

// hostCopy copies n bytes from src to dst (host memory; the ranges must not overlap:
// the DAG's caller refuses overlapping copies).
func hostCopy(dst, src uintptr, n uint64) func() error {
	return func() error {
		if n > 0 {
			ucxx.CopyBetween(dst, src, n)
		}
		return nil
	}
}

// Dtype is an element type of a reduction.
type Dtype uint8

// The element types reductions take.
const (
	Int8 Dtype = iota + 1
	Int16
	Int32
	Int64
	Uint8
	Uint16
	Uint32
	Uint64
	Float32
	Float64
)

// Size is the element's size in bytes.
func (d Dtype) Size() uint64 {
	switch d {
	case Int8, Uint8:
		return 1
	case Int16, Uint16:
		return 2
	case Int32, Uint32, Float32:
		return 4
	case Int64, Uint64, Float64:
		return 8
	}
	return 0
}

// ReduceOp is a commutative, associative operation of reductions.
type ReduceOp uint8

// The reduction operations.
const (
	Sum ReduceOp = iota + 1
	Prod
	Min
	Max
)

// reduceLocks serializes the element updates of concurrent reductions into one
// array: the DAG lets reductions into a range run in any order and at once (Mode
// Reduce), so each combines its contribution under its destination array's lock
// (striped by array).
var reduceLocks [64]sync.Mutex

func reduceLock(array dag.ArrayID) *sync.Mutex {
	return &reduceLocks[uint64(array)%uint64(len(reduceLocks))]
}

// hostReduce combines n elements of type t at src into dst, of array, with op.
func hostReduce(array dag.ArrayID, dst, src uintptr, n uint64, t Dtype, op ReduceOp) (func() error, error) {
	f, err := reducer(t, op)
	if err != nil {
		return nil, err
	}
	return func() error {
		if n == 0 {
			return nil
		}
		mu := reduceLock(array)
		mu.Lock()
		defer mu.Unlock()
		f(dst, src, n)
		return nil
	}, nil
}

type number interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// combine applies op elementwise: a loop the compiler keeps tight per type.
func combine[T number](op ReduceOp) func(dst, src uintptr, n uint64) {
	return func(dst, src uintptr, n uint64) {
		d := unsafe.Slice((*T)(pointer(dst)), n)
		s := unsafe.Slice((*T)(pointer(src)), n)
		switch op {
		case Sum:
			for i := range d {
				d[i] += s[i]
			}
		case Prod:
			for i := range d {
				d[i] *= s[i]
			}
		case Min:
			for i := range d {
				d[i] = min(d[i], s[i])
			}
		case Max:
			for i := range d {
				d[i] = max(d[i], s[i])
			}
		}
	}
}

func reducer(t Dtype, op ReduceOp) (func(dst, src uintptr, n uint64), error) {
	if op < Sum || op > Max {
		return nil, fmt.Errorf("execution: unknown reduction %d", op)
	}
	switch t {
	case Int8:
		return combine[int8](op), nil
	case Int16:
		return combine[int16](op), nil
	case Int32:
		return combine[int32](op), nil
	case Int64:
		return combine[int64](op), nil
	case Uint8:
		return combine[uint8](op), nil
	case Uint16:
		return combine[uint16](op), nil
	case Uint32:
		return combine[uint32](op), nil
	case Uint64:
		return combine[uint64](op), nil
	case Float32:
		return combine[float32](op), nil
	case Float64:
		return combine[float64](op), nil
	}
	return nil, fmt.Errorf("execution: unknown element type %d", t)
}

// pointer is addr as a pointer: the memory of the arrays a context works on is the
// application's (numpy, C, pinned), never Go's heap, so the garbage collector neither
// moves nor frees it under the pointer.
func pointer(addr uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&addr)) }
