package execution

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/ucxx-go/ucxx-go/core/dag"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// The host cost of one kernel vertex, without Python: b.N one-block launches of
// add_one through Context.Launch, then the wait for the last. "chain": every launch
// on one range (one stream, a RAW edge each); "independent": round-robin over 8
// arrays (8 streams, no edges). "raw": the driver alone, cuLaunchKernel on one
// stream, with and without a cuEventRecord after each (the floor under a vertex).
// "raw-polled": raw launches with events while pollers (1 or 2 threads, as 1 or 2 GPU
// lanes) spin on cuEventQuery of another event, as a lane's poller does: what the
// driver's own locking costs a launch. Skipped without a GPU.
//
//	go test -run '^$' -bench Launch -benchtime 20000x -cpuprofile cpu.out ./core/execution

const benchArrays = 8

func BenchmarkLaunchChain(b *testing.B)       { benchLaunch(b, 1, dag.Options{}) }
func BenchmarkLaunchIndependent(b *testing.B) { benchLaunch(b, benchArrays, dag.Options{}) }
func BenchmarkLaunchSyncIndependent(b *testing.B) {
	benchLaunch(b, benchArrays, dag.Options{Execution: dag.Sync})
}

func BenchmarkLaunchRaw(b *testing.B)            { benchRaw(b, false, 0) }
func BenchmarkLaunchRawWithEvents(b *testing.B)  { benchRaw(b, true, 0) }
func BenchmarkLaunchRawPolled(b *testing.B)      { benchRaw(b, true, 1) }
func BenchmarkLaunchRawPolledTwice(b *testing.B) { benchRaw(b, true, 2) }

func benchRaw(b *testing.B, events bool, pollers int) {
	c, d, k, bufs := benchSetup(b, 1, dag.Options{})
	cu := c.gpus[0].cu
	var s ucxx.CUDAStream
	var ev, polled ucxx.CUDAEvent
	if err := cu.Use(func() (err error) {
		if s, err = d.NewStream(); err != nil {
			return err
		}
		if polled, err = d.NewEvent(false); err != nil {
			return err
		}
		ev, err = d.NewEvent(false)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	shape := ucxx.LaunchShape{Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{benchWords, 1, 1}}
	args := []uint64{uint64(bufs[0]), benchWords}
	fn := k.fns[0]
	stop := make(chan struct{})
	var polling sync.WaitGroup
	for range pollers {
		polling.Add(1)
		go func() {
			defer polling.Done()
			var spin spinner
			for {
				select {
				case <-stop:
					return
				default:
				}
				polled.Done()
				spin.turn()
			}
		}()
	}
	b.ReportAllocs()
	b.ResetTimer()
	err := cu.Use(func() error {
		for range b.N {
			if err := fn.Launch(shape, s.Handle(), args); err != nil {
				return err
			}
			if events {
				if err := ev.Record(s.Handle()); err != nil {
					return err
				}
			}
		}
		return s.Sync()
	})
	b.StopTimer()
	close(stop)
	polling.Wait()
	if err != nil {
		b.Fatal(err)
	}
	cu.Use(func() error { ev.Destroy(); polled.Destroy(); return s.Destroy() })
}

const benchWords = 32

// benchSetup makes a one-GPU context with add_one loaded and arrays device buffers of
// benchWords words; the benchmark's cleanup frees them and closes the context.
func benchSetup(b *testing.B, arrays int, graph dag.Options) (*Context, *ucxx.CUDADriver, *Kernel, []uintptr) {
	d, err := ucxx.CUDA()
	if errors.Is(err, ucxx.ErrNoCUDA) {
		b.Skipf("no CUDA: %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	c, err := New(Options{Devices: []int{0}, Graph: graph})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	k := addOne(b, c)
	cu := c.gpus[0].cu
	bufs := make([]uintptr, arrays)
	for i := range bufs {
		if err := cu.Use(func() (err error) { bufs[i], err = d.MemAlloc(4 * benchWords); return err }); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		c.Synchronize(context.Background())
		cu.Use(func() error {
			for _, p := range bufs {
				d.MemFree(p)
			}
			return nil
		})
	})
	return c, d, k, bufs
}

func benchLaunch(b *testing.B, arrays int, graph dag.Options) {
	c, _, k, bufs := benchSetup(b, arrays, graph)
	const words = benchWords
	shape := ucxx.LaunchShape{Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{words, 1, 1}}
	launches := make([]KernelLaunch, arrays)
	accs := make([][]dag.Access, arrays)
	for i, p := range bufs {
		launches[i] = KernelLaunch{Kernel: k, Shape: shape, Args: []uint64{uint64(p), words}}
		accs[i] = []dag.Access{acc(dag.ArrayID(100+i), 0, 4*words, dag.ReadWrite)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var last *dag.Vertex
	var err error
	for i := range b.N {
		j := i % arrays
		if last, err = c.Launch("add_one", &launches[j], accs[j]); err != nil {
			b.Fatal(err)
		}
	}
	if err := last.Wait(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := c.Synchronize(context.Background()); err != nil {
		b.Fatal(err)
	}
}
