package executor

import (
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/core/builtin"
	"github.com/ucxx-go/ucxx-go/core/reduce"
)

// BenchmarkAllReduceSmall: an 8-byte allreduce (the built-in all-pairs plan) between
// two in-process ranks, per call: the executor alone (no Python, no crossing).
func BenchmarkAllReduceSmall(b *testing.B) {
	_, p, err := builtin.AllReduceAllPairs(2, builtin.Options{InPlace: true})
	if err != nil {
		b.Fatal(err)
	}
	t := &testing.T{}
	xs := newWorld(t, 2, Options{Timeout: 20 * time.Second})
	bufs := [2][]byte{cbytes(8), cbytes(8)}
	b.ResetTimer()
	errs := onAll(xs, func(r int, x *Executor) error {
		for range b.N {
			if err := x.Execute(Call{Plan: p, Send: Buffer{addr(bufs[r]), 8}, Recv: Buffer{addr(bufs[r]), 8}, DType: reduce.Float32, Op: reduce.Sum}); err != nil {
				return err
			}
		}
		return nil
	})
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}
