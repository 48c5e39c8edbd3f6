package reduce

import "strconv"

// DType is an element type. The numbering up to Float64 is core/execution's Dtype
// (and the Python constants generated from it).
type DType uint8

// The element types.
const (
	Int8 DType = iota + 1
	Int16
	Int32
	Int64
	Uint8
	Uint16
	Uint32
	Uint64
	Float32
	Float64
	Float16
	BFloat16
)

var dtypeNames = [...]string{
	Int8: "int8", Int16: "int16", Int32: "int32", Int64: "int64",
	Uint8: "uint8", Uint16: "uint16", Uint32: "uint32", Uint64: "uint64",
	Float32: "float32", Float64: "float64", Float16: "float16", BFloat16: "bfloat16",
}

var dtypeSizes = [...]uint64{
	Int8: 1, Int16: 2, Int32: 4, Int64: 8,
	Uint8: 1, Uint16: 2, Uint32: 4, Uint64: 8,
	Float32: 4, Float64: 8, Float16: 2, BFloat16: 2,
}

// Size is the element's size in bytes, 0 for an unknown type.
func (t DType) Size() uint64 {
	if int(t) < len(dtypeSizes) {
		return dtypeSizes[t]
	}
	return 0
}

// String is numpy's name of the type ("float32", "bfloat16"), or "DType(n)".
func (t DType) String() string {
	if int(t) < len(dtypeNames) && dtypeNames[t] != "" {
		return dtypeNames[t]
	}
	return "DType(" + strconv.Itoa(int(t)) + ")"
}

// ParseDType returns the type String names s, and whether there is one.
func ParseDType(s string) (DType, bool) {
	for t, name := range dtypeNames {
		if name != "" && name == s {
			return DType(t), true
		}
	}
	return 0, false
}
