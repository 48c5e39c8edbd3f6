package collective

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ucxx-go/ucxx-go/core/executor"
	"github.com/ucxx-go/ucxx-go/core/internal/pause"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// staging is room of a call's memory kind for what the plans cannot take directly
// (a padded tail), and copies in that memory: host memory with C's allocator and
// memmove, device memory with the driver on the buffers' GPU.
type staging struct {
	cuda bool
	d    *ucxx.CUDADriver
	cctx ucxx.CUDAContext
}

// stagingFor returns the staging of a call whose buffers include addr, once the work
// the call's streams hold is done (staging copies must not read a buffer a kernel
// is still writing).
func stagingFor(mem executor.Memory, addr uintptr, streams []uintptr) (*staging, error) {
	return stagingWithin(mem, addr, streams, -1)
}

// errStreamsBusy: the caller's streams still held work when stagingWithin's patience
// passed; nothing was done, and the call goes elsewhere whole.
var errStreamsBusy = errors.New("collective: the caller's streams are still busy")

// stagingWithin is stagingFor waiting for the streams, polled, within patience
// (negative: as long as it takes), else errStreamsBusy. A per-thread default stream
// among them, which only the calling thread can name, is waited for as long as it
// takes.
func stagingWithin(mem executor.Memory, addr uintptr, streams []uintptr, patience time.Duration) (*staging, error) {
	if mem != executor.MemoryCUDA {
		return &staging{}, nil
	}
	st, err := deviceStaging(addr)
	if err != nil {
		return nil, err
	}
	if slices.Contains(streams, ucxx.StreamPerThread) {
		patience = -1
	}
	if err := st.awaitStreams(streams, patience); err != nil {
		st.close()
		return nil, err
	}
	return st, nil
}

// awaitStreams waits until the work streams hold now is done, within patience
// (negative: as long as it takes; errStreamsBusy past it, polled).
func (s *staging) awaitStreams(streams []uintptr, patience time.Duration) error {
	if patience < 0 {
		for _, stream := range streams {
			if stream == 0 {
				continue
			}
			if err := s.cctx.AwaitStream(stream); err != nil {
				return fmt.Errorf("collective: wait for stream %#x: %w", stream, err)
			}
		}
		return nil
	}
	var evs []ucxx.CUDAEvent
	defer func() {
		for _, ev := range evs {
			ev.Destroy()
		}
	}()
	for _, stream := range streams {
		if stream == 0 {
			continue
		}
		ev, err := s.cctx.MarkStream(stream)
		if err != nil {
			return fmt.Errorf("collective: wait for stream %#x: %w", stream, err)
		}
		if !ev.IsZero() {
			evs = append(evs, ev)
		}
	}
	deadline := time.Now().Add(patience)
	for {
		done, err := ucxx.EventsDone(evs)
		if err != nil {
			return fmt.Errorf("collective: wait for the call's streams: %w", err)
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return errStreamsBusy
		}
		pause.Yield()
	}
}

// deviceStaging returns the device staging of the GPU that holds addr, its primary
// context retained (close releases it).
func deviceStaging(addr uintptr) (*staging, error) {
	d, err := ucxx.CUDA()
	if err != nil {
		return nil, fmt.Errorf("collective: %v: %w", err, executor.ErrUnsupported)
	}
	p, err := d.Pointer(addr)
	if err != nil {
		return nil, err
	}
	cctx, err := d.RetainPrimary(max(p.Device, 0))
	if err != nil {
		return nil, err
	}
	return &staging{cuda: true, d: d, cctx: cctx}, nil
}

// orderedCopy queues a one-rank stream-ordered call's copy of n bytes from src to dst
// on its caller's streams, as NCCL's one-rank collectives are a copy on the stream:
// the copy on the first stream after the work the others hold, the others after the
// copy; nothing waits on the host. It reports false, queuing nothing, where the call
// is not ordered on device memory or has no stream to be ordered on (none given, or
// the per-thread default stream, which names the calling thread's own): the caller
// then copies as for an ordinary call.
func orderedCopy(call executor.Call, dst, src uintptr, n uint64) (queued bool, err error) {
	if !call.Ordered || call.Memory != executor.MemoryCUDA || n == 0 {
		return false, nil
	}
	streams := executor.OrderedStreams(&call, nil)
	if len(streams) == 0 {
		return false, nil
	}
	st, err := deviceStaging(src)
	if err != nil {
		return false, err
	}
	defer st.close()
	return true, st.cctx.Use(func() error {
		first, others := streams[0], streams[1:]
		if err := st.after(first, others); err != nil {
			return err
		}
		if err := st.d.CopyAsync(dst, src, n, first); err != nil {
			return err
		}
		for _, s := range others {
			if err := st.after(s, streams[:1]); err != nil {
				return err
			}
		}
		return nil
	})
}

// after makes stream s wait, on the device, for the work streams hold now (nothing
// for a stream that is idle already).
func (s *staging) after(stream uintptr, streams []uintptr) error {
	for _, o := range streams {
		ev, err := s.cctx.MarkStream(o)
		if err != nil {
			return err
		}
		if ev.IsZero() {
			continue
		}
		err = s.d.StreamWaitEvent(stream, ev)
		ev.Destroy() // its resources go once the wait is past it
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *staging) close() {
	if s.cuda {
		s.cctx.Release()
	}
}

// alloc returns n bytes (free them with free).
func (s *staging) alloc(n uint64) (uintptr, error) {
	if !s.cuda {
		return uintptr(ucxx.CMalloc(n)), nil
	}
	var p uintptr
	err := s.cctx.Use(func() (err error) { p, err = s.d.MemAlloc(n); return err })
	return p, err
}

func (s *staging) free(p uintptr) {
	if !s.cuda {
		ucxx.CFreeAddr(p)
		return
	}
	s.cctx.Use(func() error { return s.d.MemFree(p) })
}

// copy copies n bytes from src to dst and returns once they are there.
func (s *staging) copy(dst, src uintptr, n uint64) error {
	if n == 0 {
		return nil
	}
	if !s.cuda {
		ucxx.CopyBetween(dst, src, n)
		return nil
	}
	return s.cctx.Use(func() error {
		st, err := s.d.NewStream()
		if err != nil {
			return err
		}
		defer st.Destroy()
		if err := s.d.CopyAsync(dst, src, n, st.Handle()); err != nil {
			return err
		}
		return st.Sync()
	})
}
