package collective

import (
	"testing"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/core/executor"
	"github.com/ucxx-go/ucxx-go/core/reduce"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// TestUnevenAllReduceKeepsItsPlace: an allreduce run as a head and a padded tail on a
// goroutine takes its places among the rank's calls when it is made, so that a call
// made after it (here while the executor is free) waits for both parts, as the other
// rank, which makes the two calls one after the other, pairs them; otherwise the later
// call would meet the head on the other rank and both fail as a mismatch.
func TestUnevenAllReduceKeepsItsPlace(t *testing.T) {
	comms := formed(t, 2)
	const count = 1<<17 + 1 // float32 elements: more than all-pairs takes, odd
	if _, _, uneven, err := comms[0].BuiltinChoice(AllReduce, count*4, false, executor.MemoryHost, 4, 0); err != nil || uneven != "tail" {
		t.Fatalf("the test's allreduce runs %q (%v), want a head and a tail", uneven, err)
	}
	buffer := func(n int, v float32) ([]float32, executor.Buffer) {
		p := ucxx.CMalloc(uint64(4 * n)) // C memory: the peer writes into it (never freed: a test)
		b := unsafe.Slice((*float32)(p), n)
		for i := range b {
			b[i] = v
		}
		return b, executor.Buffer{Addr: uintptr(p), Bytes: uint64(4 * n)}
	}
	type calls struct {
		big, small       executor.Call
		bigOut, smallOut []float32
	}
	var cs [2]calls
	for r := range 2 {
		_, in := buffer(count, float32(r+1))
		out, o := buffer(count, 0)
		_, sin := buffer(8, float32(10*(r+1)))
		sout, so := buffer(8, 0)
		cs[r] = calls{big: executor.Call{Send: in, Recv: o, DType: reduce.Float32, Op: reduce.Sum},
			small: executor.Call{Send: sin, Recv: so, DType: reduce.Float32, Op: reduce.Sum}, bigOut: out, smallOut: sout}
	}
	restBig, err := comms[0].StartCollective(AllReduce, 0, cs[0].big)
	if err != nil || restBig == nil {
		t.Fatalf("the uneven allreduce: %v, remainder %v", err, restBig != nil)
	}
	restSmall, err := comms[0].StartCollective(AllReduce, 0, cs[0].small)
	if err != nil || restSmall == nil {
		t.Fatalf("the call after it: %v, remainder %v (it must not run or announce before it)", err, restSmall != nil)
	}
	peer := make(chan error, 1)
	go func() {
		if err := comms[1].Collective(AllReduce, 0, cs[1].big); err != nil {
			peer <- err
			return
		}
		peer <- comms[1].Collective(AllReduce, 0, cs[1].small)
	}()
	errs := make(chan error, 2)
	go func() { errs <- restSmall() }()
	time.Sleep(5 * time.Millisecond) // the later call's goroutine first in line
	go func() { errs <- restBig() }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-peer; err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		if v, w := cs[r].bigOut[0], cs[r].bigOut[count-1]; v != 3 || w != 3 {
			t.Fatalf("rank %d: the uneven allreduce's first and last elements %v, %v; want 3", r, v, w)
		}
		if v := cs[r].smallOut[7]; v != 30 {
			t.Fatalf("rank %d: the later call's sum %v, want 30", r, v)
		}
	}
}
