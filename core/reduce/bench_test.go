package reduce

import (
	"fmt"
	"testing"
	"unsafe"
)

var benchSizes = []struct {
	name  string
	bytes int
}{{"4KiB", 4 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}}

// BenchmarkReduce times a float32 sum into dst (dst += src, the collective's reduce
// step) beside the simplest alternatives: copies (Go's copy and glibc's memcpy, the
// memory bandwidth's yardstick), the plain Go loop core/execution ran before this
// package, and the baseline (SSE2) kernels. At 4 KiB the cgo call (about 50 ns)
// is a third of the time; at 64 KiB and 1 MiB the caches' bandwidth dominates, at
// 16 MiB the memory's. (Go's copy switches to non-temporal stores from 1 MiB, which
// bypass the cache: slower at 1 MiB, faster at 16 MiB.)
func BenchmarkReduce(b *testing.B) {
	for _, sz := range benchSizes {
		n := sz.bytes / 4
		run := func(name string, traffic int, f func(dst, src []byte)) {
			b.Run(fmt.Sprintf("%s/%s", name, sz.name), func(b *testing.B) {
				buf := hostMemory(b, 2*sz.bytes)
				dst, src := buf[:sz.bytes], buf[sz.bytes:]
				for i := range buf {
					buf[i] = byte(i % 61) // small finite floats
				}
				b.SetBytes(int64(sz.bytes))
				b.ReportAllocs()
				for b.Loop() {
					f(dst, src)
				}
				b.ReportMetric(float64(traffic)*float64(sz.bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
		run("sum", 3, func(dst, src []byte) {
			if err := Reduce(addr(dst), addr(dst), addr(src), uint64(n), Float32, Sum); err != nil {
				b.Fatal(err)
			}
		})
		if bestISA != isaGeneric {
			run("sum-sse2", 3, func(dst, src []byte) {
				if err := reduce(isaGeneric, addr(dst), []uintptr{addr(dst), addr(src)}, uint64(n), Float32, Sum); err != nil {
					b.Fatal(err)
				}
			})
		}
		run("goloop", 3, func(dst, src []byte) {
			d := unsafe.Slice((*float32)(unsafe.Pointer(&dst[0])), n)
			s := unsafe.Slice((*float32)(unsafe.Pointer(&src[0])), n)
			for i := range d {
				d[i] += s[i]
			}
		})
		run("copy", 2, func(dst, src []byte) { copy(dst, src) })
		run("memcpy", 2, func(dst, src []byte) { // glibc's, through the same cgo call
			if err := ReduceMany(addr(dst), []uintptr{addr(src)}, uint64(n), Float32, Sum); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkReduceMany folds 8 float32 sources of 1 MiB and 16 MiB into a ninth array:
// one blocked ReduceMany against the simplest alternative, 7 Reduce calls that each
// stream dst through memory (dst = s0 + s1, then dst += s2 ... s7). GB/s counts the
// traffic of the fold done once: 8 reads and a write per byte.
func BenchmarkReduceMany(b *testing.B) {
	const k = 8
	for _, bytes := range []int{1 << 20, 16 << 20} {
		n := uint64(bytes / 4)
		setup := func(b *testing.B) (uintptr, []uintptr) {
			buf := hostMemory(b, (k+1)*bytes)
			for i := range buf {
				buf[i] = byte(i % 61)
			}
			srcs := make([]uintptr, k)
			for j := range srcs {
				srcs[j] = addr(buf[j*bytes:])
			}
			return addr(buf[k*bytes:]), srcs
		}
		finish := func(b *testing.B) {
			b.ReportMetric(float64(k+1)*float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		}
		b.Run(fmt.Sprintf("blocked/%dMiB", bytes>>20), func(b *testing.B) {
			dst, srcs := setup(b)
			b.SetBytes(int64(bytes))
			b.ReportAllocs()
			for b.Loop() {
				if err := ReduceMany(dst, srcs, n, Float32, Sum); err != nil {
					b.Fatal(err)
				}
			}
			finish(b)
		})
		b.Run(fmt.Sprintf("pairwise/%dMiB", bytes>>20), func(b *testing.B) {
			dst, srcs := setup(b)
			b.SetBytes(int64(bytes))
			b.ReportAllocs()
			for b.Loop() {
				if err := Reduce(dst, srcs[0], srcs[1], n, Float32, Sum); err != nil {
					b.Fatal(err)
				}
				for _, s := range srcs[2:] {
					if err := Reduce(dst, dst, s, n, Float32, Sum); err != nil {
						b.Fatal(err)
					}
				}
			}
			finish(b)
		})
	}
}

// BenchmarkReduceTypes times a sum into dst of every type at 64 KiB (in L2), with
// the best kernels and the baseline's: float16's baseline converts one element at
// a time through libgcc.
func BenchmarkReduceTypes(b *testing.B) {
	const bytes = 64 << 10
	for _, dt := range allDTypes {
		for _, isa := range isas() {
			b.Run(fmt.Sprintf("%v/isa%d", dt, isa), func(b *testing.B) {
				buf := hostMemory(b, 2*bytes)
				dst, src := addr(buf), addr(buf[bytes:])
				n := uint64(bytes) / dt.Size()
				srcs := []uintptr{dst, src}
				b.SetBytes(bytes)
				b.ReportAllocs()
				for b.Loop() {
					if err := reduce(isa, dst, srcs, n, dt, Sum); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
