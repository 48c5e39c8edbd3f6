package plan

import (
	"errors"
	"testing"
)

// TestInPlaceConvention checks each collective's convention (docs/plan-format.md
// section 9).
func TestInPlaceConvention(t *testing.T) {
	for _, c := range []struct {
		coll         string
		rank, nranks int
		send         uint64
		want         InPlace
		err          error
	}{
		{"allreduce", 1, 4, 4096, InPlace{0, 4096, 4096}, nil},
		{"alltoall", 3, 4, 4096, InPlace{0, 4096, 4096}, nil},
		{"test", 0, 1, 16, InPlace{0, 16, 16}, nil},
		{"allgather", 0, 4, 1024, InPlace{0, 1024, 4096}, nil},
		{"allgather", 3, 4, 1024, InPlace{3072, 1024, 4096}, nil},
		{"reducescatter", 2, 4, 4096, InPlace{-2048, 4096, 1024}, nil},
		{"reducescatter", 0, 4, 4096, InPlace{0, 4096, 1024}, nil},
		{"reducescatter", 1, 4, 4097, InPlace{}, ErrBuffers},
		{"allgather", 1, 4, 1 << 63, InPlace{}, ErrBuffers},
		{"allreduce", 4, 4, 16, InPlace{}, ErrBuffers},
		{"allreduce", 0, 0, 16, InPlace{}, ErrBuffers},
	} {
		got, err := InPlaceConvention(c.coll, c.rank, c.nranks, c.send)
		if got != c.want || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("%s rank %d/%d send %d: %+v, %v; want %+v, %v", c.coll, c.rank, c.nranks, c.send, got, err, c.want, c.err)
		}
	}
}

// TestCheckBuffers validates calls' buffers against in-place and out-of-place plans.
func TestCheckBuffers(t *testing.T) {
	ag := mustLoad(t, "testdata/mscclpp-v0.9.0/single_node__allgather.json") // in place, 2 ranks
	ar := mustLoad(t, "testdata/mscclpp-v0.9.0/allreduce_2r_example.json")   // out of place
	rs := mustLoad(t, "testdata/mscclpp-v0.9.0/multi_node__reducescatter.json")
	ai := mustLoad(t, "testdata/mscclpp-v0.9.0/single_node__allreduce.json") // in place
	const base = 1 << 30
	for _, c := range []struct {
		name string
		p    *Plan
		rank int
		b    CallBuffers
		err  error
	}{
		{"allgather rank 1 in its slot", ag, 1, CallBuffers{base + 4096, 4096, base, 8192}, nil},
		{"allgather rank 0 in its slot", ag, 0, CallBuffers{base, 4096, base, 8192}, nil},
		{"allgather rank 1 in rank 0's slot", ag, 1, CallBuffers{base, 4096, base, 8192}, ErrBuffers},
		{"allgather receive too small", ag, 1, CallBuffers{base + 4096, 4096, base, 4096}, ErrBuffers},
		{"allgather disjoint buffers", ag, 0, CallBuffers{base, 4096, 2 * base, 8192}, ErrBuffers},
		{"allreduce in place, one buffer", ai, 2, CallBuffers{base, 4096, base, 4096}, nil},
		{"allreduce in place, two buffers", ai, 2, CallBuffers{base, 4096, 2 * base, 4096}, ErrBuffers},
		{"allreduce in place, sizes differ", ai, 2, CallBuffers{base, 4096, base, 8192}, ErrBuffers},
		{"reducescatter rank 5 slot", rs, 5, CallBuffers{base, 8 * 512, base + 5*512, 512}, nil},
		{"reducescatter wrong slot", rs, 5, CallBuffers{base, 8 * 512, base + 4*512, 512}, ErrBuffers},
		{"out of place, disjoint", ar, 0, CallBuffers{base, 4096, base + 4096, 4096}, nil},
		{"out of place, overlapping", ar, 0, CallBuffers{base, 4096, base + 4095, 4096}, ErrBuffers},
		{"out of place, aliased", ar, 1, CallBuffers{base, 4096, base, 4096}, ErrBuffers},
		{"out of place, an empty buffer", ar, 1, CallBuffers{base, 0, base, 4096}, nil},
		{"a buffer wrapping around", ar, 0, CallBuffers{1<<64 - 16, 32, 0, 16}, ErrBuffers},
		{"no such rank", ar, 2, CallBuffers{}, ErrOutOfRange},
	} {
		err := c.p.CheckBuffers(c.rank, c.b)
		if (c.err == nil) != (err == nil) || !errors.Is(err, c.err) {
			t.Errorf("%s: %v, want %v", c.name, err, c.err)
		}
		var pe *PlanError
		if err != nil && !errors.As(err, &pe) {
			t.Errorf("%s: %T is not a *PlanError", c.name, err)
		}
	}
}

// TestConcurrentUse: a Plan is shared read-only; layouts of many ranks and sizes
// made concurrently must not race (run with -race) and must agree with layouts
// made one at a time.
func TestConcurrentUse(t *testing.T) {
	p := mustLoad(t, "testdata/mscclpp-v0.9.0/allreduce_2nodes_1K_64K.json")
	want := make([]*Layout, len(p.Ranks))
	for r := range p.Ranks {
		l, err := p.Layout(r, 65536, 65536)
		if err != nil {
			t.Fatal(err)
		}
		want[r] = l
	}
	errs := make(chan error, 8*len(p.Ranks))
	done := make(chan struct{})
	for g := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for r := range p.Ranks {
				size := uint64(1024 << (g % 7))
				if _, err := p.Layout(r, size, size); err != nil {
					errs <- err
				}
				l, err := p.Layout(r, 65536, 65536)
				if err != nil {
					errs <- err
					continue
				}
				if l.Lanes[0][0].Src == nil && want[r].Lanes[0][0].Src != nil || l.ScratchSlotBytes != want[r].ScratchSlotBytes {
					errs <- errors.New("layouts differ")
				}
				_ = p.CheckBuffers(r, CallBuffers{SendAddr: 0, SendBytes: 64, RecvAddr: 0, RecvBytes: 64})
				_ = p.ConnectedPeers(r)
			}
		}()
	}
	for range 8 {
		<-done
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
