package execution

import (
	"encoding/binary"
	"fmt"

	"github.com/ucxx-go/ucxx-go/core/dag"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// AccessDescriptor is one access as a caller in another language writes it in an
// array: four little-endian u64 words, in this order. Python's writer uses the
// constants generated from it.
type AccessDescriptor struct {
	Array uint64 // the array's id
	Off   uint64 // first byte
	Len   uint64 // bytes
	Mode  uint64 // a dag.Mode
}

// AccessDescriptorSize is the size of one AccessDescriptor.
const AccessDescriptorSize = 32

// MaxAccesses bounds the accesses one call may declare.
const MaxAccesses = 1 << 16

// DecodeAccesses reads count access descriptors at addr (memory the caller owns,
// read during the call) and checks each.
//
// Errors: a description of the first malformed descriptor.
func DecodeAccesses(addr uintptr, count int) ([]dag.Access, error) {
	if count < 0 || count > MaxAccesses || (count > 0 && addr == 0) {
		return nil, fmt.Errorf("execution: %d access descriptors at %#x", count, addr)
	}
	raw := make([]byte, AccessDescriptorSize*count)
	if count > 0 {
		ucxx.CopyFrom(raw, addr)
	}
	acc := make([]dag.Access, count)
	for i := range acc {
		w := raw[AccessDescriptorSize*i:]
		a := dag.Access{Array: dag.ArrayID(binary.LittleEndian.Uint64(w)), Off: binary.LittleEndian.Uint64(w[8:]),
			Len: binary.LittleEndian.Uint64(w[16:])}
		mode := binary.LittleEndian.Uint64(w[24:])
		if mode < uint64(dag.Read) || mode > uint64(dag.Reduce) {
			return nil, fmt.Errorf("execution: access %d: unknown mode %d", i, mode)
		}
		a.Mode = dag.Mode(mode)
		if a.Off+a.Len < a.Off {
			return nil, fmt.Errorf("execution: access %d: range wraps", i)
		}
		acc[i] = a
	}
	return acc, nil
}
