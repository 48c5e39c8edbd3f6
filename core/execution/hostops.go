package execution

import (
	"fmt"
	"sync"

	"github.com/ucxx-go/ucxx-go/core/dag"
	"github.com/ucxx-go/ucxx-go/core/reduce"
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

// Dtype is an element type of a reduction: core/reduce's DType (its numbering, which
// the generated Python constants use, is unchanged).
type Dtype = reduce.DType

// The element types reductions take.
const (
	Int8     = reduce.Int8
	Int16    = reduce.Int16
	Int32    = reduce.Int32
	Int64    = reduce.Int64
	Uint8    = reduce.Uint8
	Uint16   = reduce.Uint16
	Uint32   = reduce.Uint32
	Uint64   = reduce.Uint64
	Float32  = reduce.Float32
	Float64  = reduce.Float64
	Float16  = reduce.Float16
	BFloat16 = reduce.BFloat16
)

// ReduceOp is a commutative, associative operation of reductions: core/reduce's Op.
type ReduceOp = reduce.Op

// The reduction operations.
const (
	Sum  = reduce.Sum
	Prod = reduce.Prod
	Min  = reduce.Min
	Max  = reduce.Max
)

// reduceLocks serializes the element updates of concurrent reductions into one
// array: the DAG lets reductions into a range run in any order and at once (Mode
// Reduce), so each combines its contribution under its destination array's lock
// (striped by array).
var reduceLocks [64]sync.Mutex

func reduceLock(array dag.ArrayID) *sync.Mutex {
	return &reduceLocks[uint64(array)%uint64(len(reduceLocks))]
}

// hostReduce combines n elements of type t at src into dst, of array, with op (core/reduce:
// numpy's arithmetic, one call into C).
func hostReduce(array dag.ArrayID, dst, src uintptr, n uint64, t Dtype, op ReduceOp) (func() error, error) {
	if err := reduce.Check(t, op); err != nil {
		return nil, fmt.Errorf("execution: %w", err)
	}
	return func() error {
		if n == 0 {
			return nil
		}
		mu := reduceLock(array)
		mu.Lock()
		defer mu.Unlock()
		return reduce.Reduce(dst, dst, src, n, t, op)
	}, nil
}
