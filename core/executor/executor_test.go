package executor

import (
	"errors"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/core/plan"
	"github.com/ucxx-go/ucxx-go/core/reduce"
)

// fill gives rank r's float32 element i an integer value, so that sums are exact
// in any order.
func fill(b []byte, r int) {
	for i := range f32s(b) {
		f32s(b)[i] = float32((r + 1) * (i%97 + 1))
	}
}

// allreduceOn runs an allreduce plan (in place or not) on every rank with bytes
// bytes and checks each rank's result is the sum.
func allreduceOn(t *testing.T, xs []*Executor, p *plan.Plan, bytes int) {
	t.Helper()
	n := len(xs)
	ins, outs := make([][]byte, n), make([][]byte, n)
	for r := range n {
		ins[r] = cbytes(int(bytes))
		fill(ins[r], r)
		outs[r] = ins[r]
		if !p.InPlace {
			outs[r] = cbytes(int(bytes))
		}
	}
	errs := onAll(xs, func(r int, x *Executor) error {
		return x.Execute(Call{Plan: p, Send: Buffer{addr(ins[r]), uint64(bytes)}, Recv: Buffer{addr(outs[r]), uint64(bytes)},
			DType: reduce.Float32, Op: reduce.Sum})
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("%s, %d bytes, rank %d: %v", p.Name, bytes, r, err)
		}
	}
	for r := range n {
		for i, v := range f32s(outs[r]) {
			want := float32(n * (n + 1) / 2 * (i%97 + 1))
			if v != want {
				t.Fatalf("%s, %d bytes: rank %d element %d = %v, want %v", p.Name, bytes, r, i, v, want)
			}
		}
	}
}

// TestMSCCLPPAllReducePlans runs allreduce plans MSCCL++ 0.9's DSL wrote, unchanged:
// all-pairs with rres over 8 lanes and 4 ranks (in place), the 2-rank example
// (out of place), LL-packet ones, a pipelined one and NVLS ones (glres, through the software path:
// no multicast here); several calls in a row reuse the context.
func TestMSCCLPPAllReducePlans(t *testing.T) {
	for _, c := range []struct {
		file  string
		sizes []int
	}{
		{"single_node__allreduce.json", []int{512, 4096, 1 << 20}},
		{"allreduce_2r_example.json", []int{32, 4096, 1 << 20}},
		{"single_node__allreduce_pipeline.json", []int{32, 4096, 1 << 20}},
		{"single_node__allreduce_nvls_zero_copy.json", []int{512, 4096, 1 << 20}},
		{"single_node__allreduce_pkt.json", []int{256, 4096, 64 << 10}},
		{"single_node__allreduce_naivy.json", []int{64, 4096, 64 << 10}},
	} {
		t.Run(c.file, func(t *testing.T) {
			p := loadFixture(t, c.file)
			xs := newWorld(t, len(p.Ranks), Options{Timeout: 20 * time.Second})
			for range 2 {
				for _, size := range c.sizes {
					allreduceOn(t, xs, p, size)
				}
			}
		})
	}
}

// TestMSCCLPPAllGatherPlans: in-place allgathers (the send block inside the receive
// buffer at rank·size), with one lane, with thread-block groups and barriers, and
// with LL packets (forwarded with rppkt in one).
func TestMSCCLPPAllGatherPlans(t *testing.T) {
	for _, file := range []string{"single_node__allgather.json", "single_node__allgather_tbg.json",
		"single_node__allgather_pkt.json", "single_node__allgather_pkt_rppkt.json"} {
		t.Run(file, func(t *testing.T) {
			p := loadFixture(t, file)
			n := len(p.Ranks)
			xs := newWorld(t, n, Options{Timeout: 20 * time.Second})
			for _, block := range []int{64, 4096, 1 << 20} {
				outs := make([][]byte, n)
				for r := range n {
					outs[r] = cbytes(int(n * block))
					fill(outs[r][r*block:(r+1)*block], r)
				}
				errs := onAll(xs, func(r int, x *Executor) error {
					return x.Execute(Call{Plan: p, Send: Buffer{addr(outs[r][r*block:]), uint64(block)},
						Recv: Buffer{addr(outs[r]), uint64(n * block)}, DType: reduce.Float32})
				})
				for r, err := range errs {
					if err != nil {
						t.Fatalf("block %d rank %d: %v", block, r, err)
					}
				}
				for r := range n {
					for q := range n {
						want := make([]byte, block)
						fill(want, q)
						if string(outs[r][q*block:(q+1)*block]) != string(want) {
							t.Fatalf("block %d: rank %d's block %d is not rank %d's", block, r, q, q)
						}
					}
				}
			}
		})
	}
}

// TestMSCCLPPAllToAllPlans: alltoall plans with scratch, copies, pipelines and
// semaphores, in place and out of place.
func TestMSCCLPPAllToAllPlans(t *testing.T) {
	for _, file := range []string{"single_node__alltoall__alltoall.json", "single_node__alltoall__alltoall_pipeline.json",
		"single_node__alltoall__alltoall_ring.json", "single_node__alltoall__alltoall_ring_oop.json"} {
		t.Run(file, func(t *testing.T) {
			p := loadFixture(t, file)
			n := len(p.Ranks)
			xs := newWorld(t, n, Options{Timeout: 20 * time.Second})
			unit := p.Ranks[0].InputChunks * int(p.BufferAlignment)
			for _, size := range []int{unit, 16 * unit} {
				ins, outs := make([][]byte, n), make([][]byte, n)
				for r := range n {
					ins[r] = cbytes(int(size))
					for i := range ins[r] {
						ins[r][i] = byte(r*size + i)
					}
					outs[r] = ins[r]
					if !p.InPlace {
						outs[r] = cbytes(int(size))
					}
				}
				want := make([][]byte, n)
				block := size / n
				for r := range n {
					want[r] = make([]byte, size)
					for q := range n {
						copy(want[r][q*block:], ins[q][r*block:(r+1)*block])
					}
				}
				errs := onAll(xs, func(r int, x *Executor) error {
					return x.Execute(Call{Plan: p, Send: Buffer{addr(ins[r]), uint64(size)}, Recv: Buffer{addr(outs[r]), uint64(size)},
						DType: reduce.Uint8})
				})
				for r, err := range errs {
					if err != nil {
						t.Fatalf("size %d rank %d: %v", size, r, err)
					}
				}
				for r := range n {
					if string(outs[r]) != string(want[r]) {
						t.Fatalf("size %d: rank %d's result differs", size, r)
					}
				}
			}
		})
	}
}

// TestMismatchFailsEveryRankAndKeepsTheExecutor: ranks that call with different
// sizes all fail with ErrMismatch before anything moves, a rank whose call fails
// its own checks fails the others' too, and the next matching call runs.
func TestMismatchFailsEveryRankAndKeepsTheExecutor(t *testing.T) {
	p := loadFixture(t, "allreduce_2r_example.json")
	xs := newWorld(t, 2, Options{Timeout: 20 * time.Second})
	bufs := [2][]byte{cbytes(8192), cbytes(8192)}
	outs := [2][]byte{cbytes(8192), cbytes(8192)}
	for _, sizes := range [][2]int{{4096, 8192}, {4096, 4100}} {
		errs := onAll(xs, func(r int, x *Executor) error {
			s := uint64(sizes[r])
			return x.Execute(Call{Plan: p, Send: Buffer{addr(bufs[r]), s}, Recv: Buffer{addr(outs[r]), s}, DType: reduce.Float32})
		})
		for r, err := range errs {
			if sizes[r] == 4100 {
				if !errors.Is(err, plan.ErrMessageSize) {
					t.Fatalf("sizes %v: rank %d: %v, want ErrMessageSize", sizes, r, err)
				}
				continue
			}
			if !errors.Is(err, ErrMismatch) {
				t.Fatalf("sizes %v: rank %d: %v, want ErrMismatch", sizes, r, err)
			}
		}
	}
	allreduceOn(t, xs, p, 4096)
}

// TestAbsentRankTimesOutNamingIt: a rank that never calls fails the others' call
// with ErrTimeout naming it; the executor is broken afterwards. The timeout also
// bounds the first call, which sets the plan's context up with every rank: 300 ms
// was not enough for it under CI's load with -race (2 cores, packages in parallel).
func TestAbsentRankTimesOutNamingIt(t *testing.T) {
	p := loadFixture(t, "single_node__allreduce.json")
	xs := newWorld(t, 4, Options{Timeout: 2 * time.Second})
	allreduceOn(t, xs, p, 512) // sets up boards and the context
	b := cbytes(int(512))
	errs := onAll(xs[:3], func(r int, x *Executor) error {
		return x.Execute(Call{Plan: p, Send: Buffer{addr(b), 512}, Recv: Buffer{addr(b), 512}, DType: reduce.Float32})
	})
	for r, err := range errs {
		var re *RankError
		if !errors.Is(err, ErrTimeout) || !errors.As(err, &re) || re.Rank != 3 {
			t.Fatalf("rank %d: %v, want a timeout naming rank 3", r, err)
		}
	}
	if err := xs[0].Execute(Call{Plan: p, Send: Buffer{addr(b), 512}, Recv: Buffer{addr(b), 512}, DType: reduce.Float32}); !errors.Is(err, ErrBroken) {
		t.Fatalf("after a timeout: %v, want ErrBroken", err)
	}
}

// TestSegmentsAreUnlinked: once set up, no segment file is left in /dev/shm.
func TestSegmentsAreUnlinked(t *testing.T) {
	p := loadFixture(t, "single_node__alltoall__alltoall.json")
	xs := newWorld(t, 4, Options{Timeout: 20 * time.Second})
	size := p.Ranks[0].InputChunks * int(p.BufferAlignment)
	bufs := make([][]byte, 4)
	for r := range bufs {
		bufs[r] = cbytes(int(size))
	}
	for _, err := range onAll(xs, func(r int, x *Executor) error {
		return x.Execute(Call{Plan: p, Send: Buffer{addr(bufs[r]), uint64(size)}, Recv: Buffer{addr(bufs[r]), uint64(size)}, DType: reduce.Uint8})
	}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := segmentsLeft(t); n != 0 {
		t.Fatalf("%d segment files left in %s", n, shmDir)
	}
	if err := xs[0].Close(); err != nil {
		t.Fatal(err)
	}
	if err := xs[0].Close(); err == nil {
		t.Fatal("a second Close succeeded")
	}
	if err := xs[0].Execute(Call{Plan: p}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Execute after Close: %v", err)
	}
}
