package collective

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/core/executor"
	"github.com/ucxx-go/ucxx-go/core/reduce"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// TestSplit: 5 ranks split by parity, keyed in reverse, form two communicators with
// the ranks in key order (rank 4 passes color -1 and gets none); allreduces run on
// both halves and on the parent at once.
func TestSplit(t *testing.T) {
	comms := formed(t, 5)
	subs := make([]*Communicator, 5)
	var wg sync.WaitGroup
	serrs := make([]error, 5)
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			color := r % 2
			if r == 4 {
				color = -1
			}
			subs[r], serrs[r] = c.Split(color, -r)
		}()
	}
	wg.Wait()
	for r, err := range serrs {
		if err != nil {
			t.Fatalf("split, rank %d: %v", r, err)
		}
	}
	t.Cleanup(func() {
		for _, s := range subs {
			if s != nil {
				s.Close()
			}
		}
	})
	// evens {0, 2} keyed -r: 2 first; odds {1, 3}: 3 first
	want := map[int][2]int{0: {1, 2}, 2: {0, 2}, 1: {1, 2}, 3: {0, 2}}
	for r, s := range subs {
		if r == 4 {
			if s != nil {
				t.Fatal("color -1 got a communicator")
			}
			continue
		}
		if got := [2]int{s.Rank(), s.Size()}; got != want[r] {
			t.Fatalf("rank %d: sub rank and size %v, want %v", r, got, want[r])
		}
	}
	sum := func(c *Communicator, v float64) (float64, error) {
		// C memory: peers write into it from other threads and processes, and a
		// Go slice here could live on a goroutine stack that moves.
		p := ucxx.CMalloc(8 * 1024)
		defer ucxx.CFree(p)
		b := unsafe.Slice((*float64)(p), 1024)
		for i := range b {
			b[i] = v
		}
		buf := executor.Buffer{Addr: uintptr(p), Bytes: 8 * 1024}
		err := c.Collective(AllReduce, 0, executor.Call{Send: buf, Recv: buf, DType: reduce.Float64, Op: reduce.Sum})
		return b[1023], err
	}
	results := make([][2]float64, 5)
	for r := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if subs[r] != nil {
				if results[r][0], err = sum(subs[r], float64(r)); err != nil {
					serrs[r] = err
					return
				}
			}
			results[r][1], serrs[r] = sum(comms[r], float64(r))
		}()
	}
	wg.Wait()
	for r := range comms {
		if serrs[r] != nil {
			t.Fatalf("rank %d: %v", r, serrs[r])
		}
		if results[r][1] != 10 {
			t.Fatalf("rank %d: the parent's sum %v", r, results[r][1])
		}
		if r < 4 && results[r][0] != map[int]float64{0: 2, 1: 4}[r%2] {
			t.Fatalf("rank %d: the half's sum %v", r, results[r][0])
		}
	}
}
