package reduce

import (
	"math"
	"testing"
)

// The reference: one element of a op b as numpy computes it, written in Go apart from
// the C (float16 and bfloat16 rounding through float64 arithmetic, their min and max
// through float comparisons). Elements are bit patterns in the low bytes of a uint64.

// refOp is a op b for one element of type t.
func refOp(t DType, op Op, a, b uint64) uint64 {
	switch t {
	case Int8:
		return uint64(uint8(refInt(op, int8(a), int8(b))))
	case Int16:
		return uint64(uint16(refInt(op, int16(a), int16(b))))
	case Int32:
		return uint64(uint32(refInt(op, int32(a), int32(b))))
	case Int64:
		return uint64(refInt(op, int64(a), int64(b)))
	case Uint8:
		return uint64(refInt(op, uint8(a), uint8(b)))
	case Uint16:
		return uint64(refInt(op, uint16(a), uint16(b)))
	case Uint32:
		return uint64(refInt(op, uint32(a), uint32(b)))
	case Uint64:
		return refInt(op, a, b)
	case Float32:
		x, y := math.Float32frombits(uint32(a)), math.Float32frombits(uint32(b))
		return uint64(math.Float32bits(refFloat(op, x, y)))
	case Float64:
		return math.Float64bits(refFloat(op, math.Float64frombits(a), math.Float64frombits(b)))
	case Float16:
		x, y := uint16(a), uint16(b)
		fx, fy := halfToFloat32(x), halfToFloat32(y)
		switch op {
		case Sum:
			return uint64(float32ToHalf(fx + fy))
		case Prod:
			return uint64(float32ToHalf(fx * fy))
		case Min: // numpy's HALF_minimum: (npy_half_le(a, b) || isnan(a)) ? a : b
			if fx <= fy || fx != fx {
				return uint64(x)
			}
			return uint64(y)
		case Max:
			if fx >= fy || fx != fx {
				return uint64(x)
			}
			return uint64(y)
		}
	case BFloat16:
		x, y := uint16(a), uint16(b)
		fx, fy := bf16ToFloat32(x), bf16ToFloat32(y)
		switch op {
		case Sum:
			return uint64(float32ToBF16(fx + fy))
		case Prod:
			return uint64(float32ToBF16(fx * fy))
		case Min: // ml_dtypes' Minimum: isnan(a) || a < b ? a : b
			if fx < fy || fx != fx {
				return uint64(x)
			}
			return uint64(y)
		case Max:
			if fx > fy || fx != fx {
				return uint64(x)
			}
			return uint64(y)
		}
	}
	panic("refOp: " + t.String() + " " + op.String())
}

type integer interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// refInt: Go's integer arithmetic wraps, as numpy's.
func refInt[T integer](op Op, x, y T) T {
	switch op {
	case Sum:
		return x + y
	case Prod:
		return x * y
	case Min:
		return min(x, y)
	case Max:
		return max(x, y)
	}
	panic("refInt")
}

// refFloat: np.minimum and np.maximum of float32 and float64 (numpy 2's loops:
// NaN from either side, a's when a is one; of equal values the second; not Go's
// min and max, which prefer -0 in min and +0 in max).
func refFloat[F float32 | float64](op Op, x, y F) F {
	switch op {
	case Sum:
		return x + y
	case Prod:
		return x * y
	case Min:
		if x < y || x != x {
			return x
		}
		return y
	case Max:
		if x > y || x != x {
			return x
		}
		return y
	}
	panic("refFloat")
}

// isNaN says whether the element bits v of type t are a NaN.
func isNaN(t DType, v uint64) bool {
	switch t {
	case Float32:
		return v&0x7fffffff > 0x7f800000
	case Float64:
		return v&(1<<63-1) > 0x7ff0000000000000
	case Float16:
		return v&0x7fff > 0x7c00
	case BFloat16:
		return v&0x7fff > 0x7f80
	}
	return false
}

func isFloat(t DType) bool { return t >= Float32 }

// halfToFloat32 is the value of a float16 (exact; a NaN keeps its sign and payload).
func halfToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp, man := int(h>>10)&0x1f, uint32(h&0x3ff)
	switch exp {
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case 0:
		v := float32(math.Ldexp(float64(man), -24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	v := float32(math.Ldexp(float64(1024+man), exp-25))
	if sign != 0 {
		v = -v
	}
	return v
}

func bf16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// float32ToHalf rounds f to the nearest float16, ties to even: arithmetic on the
// magnitude in float64 (exact: powers of two and math.RoundToEven). A NaN stays a NaN
// of its sign, quiet, keeping the payload's high bits (what F16C and _Float16 do).
func float32ToHalf(f float32) uint16 {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	if bits&0x7fffffff > 0x7f800000 {
		return sign | 0x7e00 | uint16(bits>>13)&0x3ff
	}
	return sign | roundMagnitude(math.Abs(float64(f)), 10, 15)
}

// float32ToBF16 rounds f to the nearest bfloat16, ties to even; a NaN becomes the
// quiet NaN of its sign (Eigen's, ml_dtypes').
func float32ToBF16(f float32) uint16 {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	if bits&0x7fffffff > 0x7f800000 {
		return sign | 0x7fc0
	}
	return sign | roundMagnitude(math.Abs(float64(f)), 7, 127)
}

// roundMagnitude is the bits of v >= 0 rounded to a binary format of mant stored
// significand bits and exponent bias: infinity past the largest finite value,
// subnormals below the smallest normal.
func roundMagnitude(v float64, mant, bias int) uint16 {
	inf := uint16(2*bias+1) << mant
	if math.IsInf(v, 0) {
		return inf
	}
	if v == 0 {
		return 0
	}
	_, e := math.Frexp(v) // v = frac * 2^e, frac in [0.5, 1)
	e--                   // v = m * 2^e, m in [1, 2)
	if e < 1-bias {       // subnormal: units of 2^(1-bias-mant); rounding up to 1<<mant is the smallest normal's bits
		return uint16(math.RoundToEven(math.Ldexp(v, bias-1+mant)))
	}
	r := math.RoundToEven(math.Ldexp(v, mant-e)) // in [2^mant, 2^(mant+1)]
	if r == math.Ldexp(1, mant+1) {
		r, e = math.Ldexp(1, mant), e+1
	}
	if e+bias >= 2*bias+1 {
		return inf
	}
	return uint16(e+bias)<<mant | uint16(r-math.Ldexp(1, mant))
}

// TestReferenceConversions checks the reference's conversions: every float16 and
// bfloat16 but NaN survives the round trip through float32, and values on and
// around the rounding boundaries land where IEEE says.
func TestReferenceConversions(t *testing.T) {
	for h := range 1 << 16 {
		if !isNaN(Float16, uint64(h)) {
			if got := float32ToHalf(halfToFloat32(uint16(h))); got != uint16(h) {
				t.Fatalf("float16 %#04x: round trip gives %#04x", h, got)
			}
		} else if !isNaN(Float16, uint64(float32ToHalf(halfToFloat32(uint16(h))))) {
			t.Fatalf("float16 NaN %#04x is no NaN after the round trip", h)
		}
		if !isNaN(BFloat16, uint64(h)) {
			if got := float32ToBF16(bf16ToFloat32(uint16(h))); got != uint16(h) {
				t.Fatalf("bfloat16 %#04x: round trip gives %#04x", h, got)
			}
		}
	}
	for _, c := range []struct {
		f    float64
		half uint16
	}{
		{65504, 0x7bff}, {65519.99, 0x7bff}, {65520, 0x7c00}, {1e10, 0x7c00},
		{1, 0x3c00}, {1 + 1.0/2048, 0x3c00}, {1 + 3.0/2048, 0x3c02}, {1 + 1.0/2048 + 1.0/65536, 0x3c01},
		{math.Ldexp(1, -24), 0x0001}, {math.Ldexp(1, -25), 0}, {math.Ldexp(3, -26), 0x0001},
		{math.Ldexp(3, -25), 0x0002}, {math.Ldexp(1023.5, -24), 0x0400}, {math.Ldexp(1, -14), 0x0400},
		{-2, 0xc000}, {math.Copysign(0, -1), 0x8000},
	} {
		if got := float32ToHalf(float32(c.f)); got != c.half {
			t.Errorf("float32ToHalf(%g) = %#04x, want %#04x", c.f, got, c.half)
		}
	}
	for _, c := range []struct {
		bits uint32
		bf   uint16
	}{
		{0x3f808000, 0x3f80}, {0x3f818000, 0x3f82}, {0x3f808001, 0x3f81}, {0x7f7fffff, 0x7f80},
		{0x7f7f7fff, 0x7f7f}, {0x00008000, 0x0000}, {0x00018000, 0x0002}, {0x007fffff, 0x0080},
		{0x7fa00000, 0x7fc0}, {0xffa00001, 0xffc0}, {0xff800000, 0xff80},
	} {
		if got := float32ToBF16(math.Float32frombits(c.bits)); got != c.bf {
			t.Errorf("float32ToBF16(%#08x) = %#04x, want %#04x", c.bits, got, c.bf)
		}
	}
}
