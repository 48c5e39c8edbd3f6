package executor

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/core/builtin"
	"github.com/ucxx-go/ucxx-go/core/reduce"
)

// TestAllToAllVBlocks: the alltoallv plan with random per-call blocks (some empty,
// displacements with gaps) moves every block where its receiver said, calls after
// calls with other sizes; blocks whose lengths disagree fail every rank with
// ErrMismatch before anything moves.
func TestAllToAllVBlocks(t *testing.T) {
	for _, n := range []int{2, 3, 5} {
		_, p, err := builtin.AllToAllV(n)
		if err != nil {
			t.Fatal(err)
		}
		xs := newWorld(t, n, Options{Timeout: 20 * time.Second})
		rng := rand.New(rand.NewPCG(uint64(n), 7))
		for round := range 4 {
			// counts[i][j]: bytes rank i sends to rank j
			counts := make([][]uint64, n)
			for i := range counts {
				counts[i] = make([]uint64, n)
				for j := range counts[i] {
					counts[i][j] = uint64(rng.IntN(3)) * uint64(rng.IntN(700)) // zeros too
				}
			}
			blocks := make([]*Blocks, n)
			sends, recvs := make([][]byte, n), make([][]byte, n)
			for i := range n {
				b := &Blocks{}
				var so, ro uint64
				for j := range n {
					b.SendOffsets, b.SendLengths = append(b.SendOffsets, so), append(b.SendLengths, counts[i][j])
					b.RecvOffsets, b.RecvLengths = append(b.RecvOffsets, ro), append(b.RecvLengths, counts[j][i])
					so += counts[i][j] + 3 // gaps
					ro += counts[j][i] + 5
				}
				blocks[i] = b
				sends[i] = cbytes(int(so + 1))
				for k := range sends[i] {
					sends[i][k] = byte(i*31 + k + round)
				}
				recvs[i] = cbytes(int(ro + 1))
			}
			errs := onAll(xs, func(r int, x *Executor) error {
				return x.Execute(Call{Plan: p, Send: Buffer{addr(sends[r]), uint64(len(sends[r]))},
					Recv: Buffer{addr(recvs[r]), uint64(len(recvs[r]))}, DType: reduce.Uint8, Blocks: blocks[r]})
			})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("n %d round %d rank %d: %v", n, round, r, err)
				}
			}
			for j := range n {
				for i := range n {
					b, got := blocks[i], blocks[j]
					want := sends[i][b.SendOffsets[j] : b.SendOffsets[j]+b.SendLengths[j]]
					have := recvs[j][got.RecvOffsets[i] : got.RecvOffsets[i]+got.RecvLengths[i]]
					if string(want) != string(have) {
						t.Fatalf("n %d round %d: rank %d's block from rank %d differs", n, round, j, i)
					}
				}
			}
		}
		// rank 0 says it sends one byte more to rank 1 than rank 1 expects
		blocks := make([]*Blocks, n)
		for i := range n {
			blocks[i] = &Blocks{SendOffsets: make([]uint64, n), SendLengths: make([]uint64, n), RecvOffsets: make([]uint64, n), RecvLengths: make([]uint64, n)}
		}
		blocks[0].SendLengths[1] = 1
		buf := cbytes(int(8))
		errs := onAll(xs, func(r int, x *Executor) error {
			return x.Execute(Call{Plan: p, Send: Buffer{addr(buf), 8}, Recv: Buffer{addr(buf), 8}, DType: reduce.Uint8, Blocks: blocks[r]})
		})
		for r, err := range errs {
			if !errors.Is(err, ErrMismatch) {
				t.Fatalf("n %d: rank %d: %v, want ErrMismatch", n, r, err)
			}
		}
	}
}
