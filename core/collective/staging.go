package collective

import (
	"fmt"

	"github.com/ucxx-go/ucxx-go/core/executor"
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
	if mem != executor.MemoryCUDA {
		return &staging{}, nil
	}
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
	for _, s := range streams {
		if s == 0 {
			continue
		}
		if err := cctx.AwaitStream(s); err != nil {
			cctx.Release()
			return nil, fmt.Errorf("collective: wait for stream %#x: %w", s, err)
		}
	}
	return &staging{cuda: true, d: d, cctx: cctx}, nil
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
