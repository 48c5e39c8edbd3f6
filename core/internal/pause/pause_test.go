package pause

import (
	"runtime"
	"testing"
	"time"
)

// TestForSleepsAtLeastD: For never comes back early, short or long, and does nothing
// for zero or negative durations.
func TestForSleepsAtLeastD(t *testing.T) {
	for _, d := range []time.Duration{time.Microsecond, 20 * time.Microsecond, 300 * time.Microsecond, 2 * time.Millisecond} {
		for range 20 {
			t0 := time.Now()
			For(d)
			if took := time.Since(t0); took < d {
				t.Fatalf("For(%v) came back after %v", d, took)
			}
		}
	}
	For(0)
	For(-time.Second)
}

// BenchmarkFor50us against BenchmarkTimeSleep50us shows what the package is for: on
// Linux the first takes about 55 µs a call, the second about 1.1 ms.
func BenchmarkFor50us(b *testing.B) {
	for b.Loop() {
		For(50 * time.Microsecond)
	}
}

func BenchmarkTimeSleep50us(b *testing.B) {
	for b.Loop() {
		time.Sleep(50 * time.Microsecond)
	}
}

// BenchmarkYield against BenchmarkGosched: sched_yield alone costs a system call;
// see Yield for what runtime.Gosched costs on a locked thread.
func BenchmarkYield(b *testing.B) {
	for b.Loop() {
		Yield()
	}
}

func BenchmarkGosched(b *testing.B) {
	for b.Loop() {
		runtime.Gosched()
	}
}
