package reduce

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"unsafe"
)

var allDTypes = []DType{Int8, Int16, Int32, Int64, Uint8, Uint16, Uint32, Uint64, Float32, Float64, Float16, BFloat16}
var allOps = []Op{Sum, Prod, Min, Max}

// isas are the kernel sets this CPU runs: the baseline's, and AVX2's where it has it.
func isas() []int {
	if bestISA == isaGeneric {
		return []int{isaGeneric}
	}
	return []int{isaGeneric, bestISA}
}

// hostMemory maps n bytes outside Go's heap, as the memory Reduce is given is.
func hostMemory(tb testing.TB, n int) []byte {
	tb.Helper()
	b, err := syscall.Mmap(-1, 0, max(n, 1), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { syscall.Munmap(b) })
	return b[:n]
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func load(b []byte, size uint64, i int) uint64 {
	p := b[uint64(i)*size:]
	switch size {
	case 1:
		return uint64(p[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(p))
	case 4:
		return uint64(binary.LittleEndian.Uint32(p))
	}
	return binary.LittleEndian.Uint64(p)
}

func store(b []byte, size uint64, i int, v uint64) {
	p := b[uint64(i)*size:]
	switch size {
	case 1:
		p[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(p, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(p, uint32(v))
	default:
		binary.LittleEndian.PutUint64(p, v)
	}
}

// edges are values worth meeting: zeros of both signs, extremes, infinities, quiet
// and signalling NaNs of both signs, subnormals, ones.
func edges(t DType) []uint64 {
	switch t {
	case Int8, Uint8:
		return []uint64{0, 1, 2, 0x7f, 0x80, 0x81, 0xff, 0xfe, 0x10}
	case Int16, Uint16:
		return []uint64{0, 1, 2, 0x7fff, 0x8000, 0x8001, 0xffff, 0xfffe, 0x100}
	case Int32, Uint32:
		return []uint64{0, 1, 2, 0x7fffffff, 0x80000000, 0x80000001, 0xffffffff, 0x10000}
	case Int64, Uint64:
		return []uint64{0, 1, 2, 1<<63 - 1, 1 << 63, 1<<63 + 1, 1<<64 - 1, 1 << 32}
	case Float32:
		return []uint64{0, 0x80000000, 0x3f800000, 0xbf800000, 0x7f800000, 0xff800000, 0x7fc00000,
			0xffc00001, 0x7f800001, 0x7f7fffff, 0xff7fffff, 0x00000001, 0x807fffff, 0x00800000, 0x5f800000}
	case Float64:
		return []uint64{0, 1 << 63, 0x3ff0000000000000, 0xbff0000000000000, 0x7ff0000000000000,
			0xfff0000000000000, 0x7ff8000000000000, 0xfff8000000000001, 0x7ff0000000000001,
			0x7fefffffffffffff, 0x0000000000000001, 0x800fffffffffffff, 0x0010000000000000, 0x5ff0000000000000}
	case Float16:
		return []uint64{0, 0x8000, 0x3c00, 0xbc00, 0x7c00, 0xfc00, 0x7e00, 0xfe01, 0x7c01, 0x7bff, 0xfbff,
			0x0001, 0x83ff, 0x0400, 0x5bff, 0x1000}
	case BFloat16:
		return []uint64{0, 0x8000, 0x3f80, 0xbf80, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x7f81, 0x7f7f, 0xff7f,
			0x0001, 0x807f, 0x0080, 0x5f80, 0x3b80}
	}
	panic("edges")
}

// fill writes n elements of t: random bits, edge values, and values a little
// apart so that sums and products of floats are mostly finite.
func fill(r *rand.Rand, b []byte, t DType, n int) {
	size, e := t.Size(), edges(t)
	for i := range n {
		var v uint64
		switch r.IntN(4) {
		case 0:
			v = e[r.IntN(len(e))]
		case 1: // small magnitudes
			switch t {
			case Float32:
				v = uint64(0x3c000000 + r.Uint32N(0x07000000) | r.Uint32N(2)<<31)
			case Float64:
				v = 0x3f80000000000000 + r.Uint64N(0x00e0000000000000) | r.Uint64N(2)<<63
			case Float16:
				v = uint64(0x2000 + r.Uint32N(0x3000) | r.Uint32N(2)<<15)
			case BFloat16:
				v = uint64(0x3c00 + r.Uint32N(0x0700) | r.Uint32N(2)<<15)
			default:
				v = r.Uint64N(16) - 8
			}
		default:
			v = r.Uint64()
		}
		store(b, size, i, v)
	}
}

// tie makes some of b's elements equal to a's, or a's with the sign flipped (for
// floats: -0 against +0, x + -x).
func tie(r *rand.Rand, a, b []byte, t DType, n int) {
	size := t.Size()
	for i := range n {
		switch r.IntN(8) {
		case 0:
			store(b, size, i, load(a, size, i))
		case 1:
			if isFloat(t) {
				store(b, size, i, load(a, size, i)^1<<(8*size-1))
			}
		}
	}
}

// check compares n elements of got with want: bit for bit, except that where a float
// sum or product is NaN any quiet NaN will do (bfloat16's: 0x7fc0 of either sign).
func check(t *testing.T, what string, dt DType, op Op, got, want []byte, n int, inputs ...[]byte) {
	t.Helper()
	size := dt.Size()
	bad := 0
	for i := range n {
		g, w := load(got, size, i), load(want, size, i)
		if g == w || (op <= Prod && isNaN(dt, w) && isQuietNaN(dt, g)) {
			continue
		}
		in := ""
		for _, b := range inputs {
			in += fmt.Sprintf(" %#x", load(b, size, i))
		}
		t.Errorf("%s: %v %v element %d of %d: got %#x, want %#x (operands%s)", what, dt, op, i, n, g, w, in)
		if bad++; bad == 5 {
			t.FailNow()
		}
	}
}

func isQuietNaN(t DType, v uint64) bool {
	switch t {
	case Float32:
		return isNaN(t, v) && v&(1<<22) != 0
	case Float64:
		return isNaN(t, v) && v&(1<<51) != 0
	case Float16:
		return isNaN(t, v) && v&(1<<9) != 0
	case BFloat16:
		return v&0x7fff == 0x7fc0
	}
	return false
}

// refFold computes the left fold of srcs into want.
func refFold(dt DType, op Op, want []byte, srcs [][]byte, n int) {
	size := dt.Size()
	for i := range n {
		v := load(srcs[0], size, i)
		for _, s := range srcs[1:] {
			v = refOp(dt, op, v, load(s, size, i))
		}
		store(want, size, i, v)
	}
}

var sizes = []int{0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 129, 255, 257, 1000, 4097, 9000}

// TestReduce checks every type and operation against the reference, with each
// kernel set, at lengths around the vector widths, at addresses aligned, one
// element off and one byte off.
func TestReduce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	maxN := sizes[len(sizes)-1]
	for _, dt := range allDTypes {
		size := int(dt.Size())
		buf := hostMemory(t, 4*(maxN*size+16))
		region := func(k int) []byte { return buf[k*(maxN*size+16):][: maxN*size+16 : maxN*size+16] }
		a0, b0, d0, want := region(0), region(1), region(2), region(3)
		for _, isa := range isas() {
			for _, op := range allOps {
				for _, n := range sizes {
					offs := [][3]int{{0, 0, 0}, {size, 0, size}, {1, 3, 2}, {0, size, 1}}
					o := offs[r.IntN(len(offs))]
					a, b, d := a0[o[0]:], b0[o[1]:], d0[o[2]:]
					fill(r, a, dt, n)
					fill(r, b, dt, n)
					tie(r, a, b, dt, n)
					fill(r, d, dt, maxN) // garbage, and the canary past n
					canary := load(d, uint64(size), n)
					refFold(dt, op, want, [][]byte{a, b}, n)
					if err := reduce(isa, addr(d), []uintptr{addr(a), addr(b)}, uint64(n), dt, op); err != nil {
						t.Fatal(err)
					}
					check(t, fmt.Sprintf("kernels %d, n %d, offsets %v", isa, n, o), dt, op, d, want, n, a, b)
					if load(d, uint64(size), n) != canary {
						t.Fatalf("kernels %d, %v %v, n %d: wrote past the end", isa, dt, op, n)
					}
				}
			}
		}
	}
}

// TestReduceInPlace: dst is a, b, or both.
func TestReduceInPlace(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n = 1029
	for _, dt := range allDTypes {
		size := int(dt.Size())
		buf := hostMemory(t, 3*(n*size+8))
		a, b, want := buf[1:][:n*size], buf[n*size+8:][:n*size], buf[2*(n*size+8):][:n*size]
		for _, isa := range isas() {
			for _, op := range allOps {
				for _, form := range []string{"dst=a", "dst=b", "dst=a=b"} {
					fill(r, a, dt, n)
					fill(r, b, dt, n)
					tie(r, a, b, dt, n)
					in := [][]byte{a, b}
					dst, x, y := a, a, b
					switch form {
					case "dst=b":
						dst = b
					case "dst=a=b":
						in, y = [][]byte{a, a}, a
					}
					refFold(dt, op, want, in, n)
					ina, inb := append([]byte(nil), x...), append([]byte(nil), y...)
					if err := reduce(isa, addr(dst), []uintptr{addr(x), addr(y)}, n, dt, op); err != nil {
						t.Fatal(err)
					}
					check(t, fmt.Sprintf("kernels %d, %s", isa, form), dt, op, dst, want, n, ina, inb)
				}
			}
		}
	}
}

// TestReduceMany folds 1 to 10 sources over lengths that span several blocks, into a
// separate destination and into the first, a middle or the last source, with a
// source repeated.
func TestReduceMany(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, dt := range allDTypes {
		size := int(dt.Size())
		maxN := 2*8192/size + 7 // three blocks, the last partial
		stride := maxN*size + 16
		buf := hostMemory(t, 12*stride)
		src := make([][]byte, 10)
		for j := range src {
			src[j] = buf[j*stride+j%3:][:maxN*size]
		}
		dst, want := buf[10*stride+1:][:maxN*size], buf[11*stride:][:maxN*size]
		for _, isa := range isas() {
			for k := 1; k <= 10; k++ {
				op := allOps[r.IntN(len(allOps))] // the kernels are TestReduce's; this is the fold
				n := []int{0, 1, 17, 8192/size - 1, 8192 / size, 8192/size + 1, maxN}[r.IntN(7)]
				for _, into := range []int{-1, []int{0, k / 2, k - 1}[r.IntN(3)]} {
					in := make([][]byte, k)
					addrs := make([]uintptr, k)
					for j := range k {
						in[j] = src[j]
						if k >= 3 && j == 2 {
							in[j] = src[0] // a source twice
						}
						fill(r, in[j], dt, n)
					}
					for j := range k {
						addrs[j] = addr(in[j])
					}
					if k >= 2 {
						tie(r, in[0], in[1], dt, n)
					}
					refFold(dt, op, want, in, n)
					d := dst
					if into >= 0 {
						d = in[into]
					}
					if err := reduce(isa, addr(d), addrs, uint64(n), dt, op); err != nil {
						t.Fatal(err)
					}
					check(t, fmt.Sprintf("kernels %d, %d sources, into %d, n %d", isa, k, into, n), dt, op, d, want, n)
				}
			}
		}
	}
}

// TestReduceAPI: Reduce and ReduceMany run the best kernels on the same contract.
func TestReduceAPI(t *testing.T) {
	buf := hostMemory(t, 4*8*4)
	f := unsafe.Slice((*float64)(unsafe.Pointer(&buf[0])), 16)
	for i := range f {
		f[i] = float64(i)
	}
	p := func(i int) uintptr { return addr(buf[8*i:]) }
	if err := Reduce(p(0), p(4), p(8), 4, Float64, Sum); err != nil {
		t.Fatal(err)
	}
	if err := ReduceMany(p(12), []uintptr{p(0), p(4), p(8)}, 4, Float64, Max); err != nil {
		t.Fatal(err)
	}
	want := []float64{12, 14, 16, 18, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, 18}
	for i, w := range want {
		if f[i] != w {
			t.Fatalf("element %d: %v, want %v (all: %v)", i, f[i], w, f)
		}
	}
}

func TestReduceErrors(t *testing.T) {
	buf := hostMemory(t, 64)
	p := addr(buf)
	for _, c := range []struct {
		t  DType
		op Op
	}{{0, Sum}, {BFloat16 + 1, Sum}, {255, Min}, {Float32, 0}, {Float32, Max + 1}, {Int8, 255}} {
		if err := Reduce(p, p, p, 4, c.t, c.op); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%v %v: %v, want ErrUnsupported", c.t, c.op, err)
		}
		if err := Reduce(p, p, p, 0, c.t, c.op); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%v %v of 0 elements: %v, want ErrUnsupported", c.t, c.op, err)
		}
		if err := Check(c.t, c.op); !errors.Is(err, ErrUnsupported) {
			t.Errorf("Check(%v, %v): %v", c.t, c.op, err)
		}
	}
	for i := range buf {
		buf[i] = byte(i)
	}
	if err := Reduce(p+8, p+4, p+16, 4, Float32, Sum); !errors.Is(err, ErrOverlap) {
		t.Errorf("dst overlapping a: %v", err)
	}
	if err := ReduceMany(p+16, []uintptr{p, p + 32, p + 20}, 4, Float32, Sum); !errors.Is(err, ErrOverlap) {
		t.Errorf("dst overlapping the third source: %v", err)
	}
	if err := Reduce(p, p+4, p+16, 0, Float32, Sum); err != nil {
		t.Errorf("0 elements, overlapping: %v", err)
	}
	if err := ReduceMany(p, nil, 4, Float32, Sum); err == nil {
		t.Error("no sources: no error")
	}
	if err := Reduce(0, p, p+16, 4, Float32, Sum); err == nil {
		t.Error("nil destination: no error")
	}
	if err := Reduce(p, p, 0, 4, Float32, Sum); err == nil {
		t.Error("nil source: no error")
	}
	if err := Reduce(p, p, p+16, 1<<62, Float64, Sum); err == nil {
		t.Error("2^62 float64s: no error")
	}
	if err := Reduce(^uintptr(0)-8, p, p+16, 4, Float32, Sum); err == nil {
		t.Error("range past the address space: no error")
	}
	for i := range buf {
		if buf[i] != byte(i) {
			t.Fatalf("byte %d written by a failed reduction", i)
		}
	}
	if err := Reduce(p, p, p, 0, Float32, Sum); err != nil {
		t.Errorf("0 elements: %v", err)
	}
}

func TestNames(t *testing.T) {
	sizes := map[DType]uint64{Int8: 1, Int16: 2, Int32: 4, Int64: 8, Uint8: 1, Uint16: 2, Uint32: 4, Uint64: 8,
		Float32: 4, Float64: 8, Float16: 2, BFloat16: 2}
	names := map[string]bool{}
	for _, dt := range allDTypes {
		if dt.Size() != sizes[dt] {
			t.Errorf("%v.Size() = %d", dt, dt.Size())
		}
		s := dt.String()
		if back, ok := ParseDType(s); !ok || back != dt || names[s] {
			t.Errorf("%d: %q parses as %v, %v", dt, s, back, ok)
		}
		names[s] = true
	}
	if Float64 != 10 || Float16 != 11 || BFloat16 != 12 || Sum != 1 || Max != 4 {
		t.Error("numbering moved")
	}
	if Float32.String() != "float32" || BFloat16.String() != "bfloat16" || DType(0).String() != "DType(0)" || DType(200).String() != "DType(200)" {
		t.Error("DType.String")
	}
	if _, ok := ParseDType("float"); ok {
		t.Error(`ParseDType("float")`)
	}
	if DType(0).Size() != 0 || DType(13).Size() != 0 {
		t.Error("unknown types have a size")
	}
	for _, op := range allOps {
		if back, ok := ParseOp(op.String()); !ok || back != op {
			t.Errorf("%d: %q parses as %v, %v", op, op.String(), back, ok)
		}
	}
	if Prod.String() != "prod" || Op(9).String() != "Op(9)" {
		t.Error("Op.String")
	}
	if _, ok := ParseOp("add"); ok {
		t.Error(`ParseOp("add")`)
	}
}
