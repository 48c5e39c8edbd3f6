package collective

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/core/executor"
	"github.com/ucxx-go/ucxx-go/core/reduce"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// BenchmarkAllReduce8B: an in-place 8-byte float32 allreduce between two in-process
// communicators, per call: the collective layer (conventions, the registry's choice,
// the plan) and the executor, without Python.
//
//	go test -run '^$' -bench AllReduce8B -benchmem ./core/collective
func BenchmarkAllReduce8B(b *testing.B) {
	t := &testing.T{}
	comms, errs := world(t, 2, nil, freeRoot(t))
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	bufs := make([]unsafe.Pointer, 2)
	for r := range bufs {
		bufs[r] = ucxx.CMalloc(8)
		defer ucxx.CFree(bufs[r])
	}
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	fails := make([]error, 2)
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := executor.Buffer{Addr: uintptr(bufs[r]), Bytes: 8}
			for range b.N {
				if err := c.Collective(AllReduce, 0, executor.Call{Send: buf, Recv: buf, DType: reduce.Float32, Op: reduce.Sum}); err != nil {
					fails[r] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range fails {
		if err != nil {
			b.Fatal(err)
		}
	}
}
