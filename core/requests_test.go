package core

import (
	"testing"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// TestRequestTableCountsCUDA: requests marked as moving CUDA memory are counted once
// each until removed; host memory is not counted.
func TestRequestTableCountsCUDA(t *testing.T) {
	tab := newRequestTable()
	a, b, c := tab.add(1, opTagSend, nil), tab.add(2, opTagRecv, nil), tab.add(3, opRMA, nil)
	tab.markCUDA(a, ucxx.MemoryCUDA)
	tab.markCUDA(a, ucxx.MemoryCUDA) // a put whose both sides are CUDA memory
	tab.markCUDA(b, ucxx.MemoryHost)
	tab.markCUDA(c, ucxx.MemoryCUDA)
	if tab.cuda != 2 {
		t.Fatalf("cuda = %d after marking two CUDA requests and one host; want 2", tab.cuda)
	}
	for _, step := range []struct {
		id   uint64
		want int
	}{{2, 2}, {1, 1}, {3, 0}} {
		tab.recycle(tab.remove(step.id))
		if tab.cuda != step.want {
			t.Fatalf("cuda = %d after removing request %d; want %d", tab.cuda, step.id, step.want)
		}
	}
}
