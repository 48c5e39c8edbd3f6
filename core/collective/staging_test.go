package collective

import (
	"bytes"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/core/executor"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// TestStagingWaitsForBusyStreams: of a device call's streams, one held on the device
// (waiting for a host word) keeps the staging waits and the one-rank ordered copy
// behind it, in either order of the streams, and an idle one holds nothing up: the
// polled wait gives up on the held stream alone and passes the idle one at once, and
// the ordered copy lands, queued behind the held stream, once the word is written.
func TestStagingWaitsForBusyStreams(t *testing.T) {
	d, err := ucxx.CUDA()
	if errors.Is(err, ucxx.ErrNoCUDA) {
		t.Skipf("no CUDA: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.RetainPrimary(0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	gate := ucxx.CAllocPage(8)
	defer ucxx.CFree(gate)
	const n = 1 << 20
	want := make([]byte, n)
	for i := range want {
		want[i] = byte(i*7 + 1)
	}
	err = c.Use(func() error {
		gateDev, err := d.MapHost(uintptr(gate), 8)
		if err != nil {
			return err
		}
		defer d.UnmapHost(uintptr(gate))
		var streams [2]ucxx.CUDAStream
		for i := range streams {
			if streams[i], err = d.NewStream(); err != nil {
				return err
			}
			defer streams[i].Destroy()
		}
		src, err := d.MemAlloc(n)
		if err != nil {
			return err
		}
		defer d.MemFree(src)
		if err := d.CopyToDevice(src, want); err != nil {
			return err
		}
		for round, order := range [][2]int{{0, 1}, {1, 0}} {
			held, idle := streams[order[0]].Handle(), streams[order[1]].Handle()
			(*atomic.Uint64)(gate).Store(0)
			if err := d.StreamWaitAtLeast(held, gateDev, 1); err != nil {
				return err
			}
			opened := false
			open := func() {
				if !opened {
					(*atomic.Uint64)(gate).Store(1)
					opened = true
				}
			}
			defer open() // a failure below leaves no stream held

			if _, err := stagingWithin(executor.MemoryCUDA, src, []uintptr{idle, held}, 20*time.Millisecond); !errors.Is(err, errStreamsBusy) {
				t.Errorf("round %d: staging behind a held stream: %v, want errStreamsBusy", round, err)
			}
			st, err := stagingWithin(executor.MemoryCUDA, src, []uintptr{idle}, 0)
			if err != nil {
				t.Errorf("round %d: staging behind an idle stream with no patience: %v", round, err)
			} else {
				st.close()
			}

			dst, err := d.MemAlloc(n)
			if err != nil {
				return err
			}
			defer d.MemFree(dst)
			if err := d.CopyToDevice(dst, make([]byte, n)); err != nil {
				return err
			}
			call := executor.Call{Ordered: true, Memory: executor.MemoryCUDA, Streams: []uintptr{streams[0].Handle(), streams[1].Handle()}}
			queued, err := orderedCopy(call, dst, src, n)
			if err != nil || !queued {
				t.Fatalf("round %d: orderedCopy = %v, %v", round, queued, err)
			}
			for _, s := range streams {
				if done, err := s.Done(); done || err != nil {
					t.Errorf("round %d: stream %#x done %v (%v) before the gate opened", round, s.Handle(), done, err)
				}
			}
			open()
			for _, s := range streams {
				if err := s.Sync(); err != nil {
					return err
				}
			}
			got := make([]byte, n)
			if err := d.CopyFromDevice(got, dst); err != nil {
				return err
			}
			if !bytes.Equal(got, want) {
				t.Errorf("round %d: the ordered copy's bytes differ", round)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
