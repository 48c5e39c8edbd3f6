package topology

import (
	"errors"
	"runtime"
	"slices"
	"syscall"
	"testing"
)

func TestPinThreadToCPUs(t *testing.T) {
	onPinnableThread(func() {
		orig, err := ThreadCPUs()
		if err != nil || len(orig) == 0 {
			t.Errorf("ThreadCPUs = %v, %v", orig, err)
			return
		}
		if !slices.IsSorted(orig) {
			t.Errorf("ThreadCPUs = %v, not in order", orig)
		}
		t.Logf("thread CPUs %v", orig)
		// Down to the last allowed CPU alone (beyond the first 64 on a large machine),
		// then back.
		one := orig[len(orig)-1]
		if err := PinThreadToCPUs([]int{one}); err != nil {
			t.Errorf("PinThreadToCPUs([%d]): %v", one, err)
			return
		}
		if got, err := ThreadCPUs(); err != nil || !slices.Equal(got, []int{one}) {
			t.Errorf("after pinning to %d: ThreadCPUs = %v, %v", one, got, err)
		}
		if err := PinThreadToCPUs(orig); err != nil {
			t.Errorf("PinThreadToCPUs(%v): %v", orig, err)
			return
		}
		if got, err := ThreadCPUs(); err != nil || !slices.Equal(got, orig) {
			t.Errorf("after restoring: ThreadCPUs = %v, %v; want %v", got, err, orig)
		}
	})
}

// Pinning one thread leaves the others alone: affinity is per thread.
func TestPinThreadIsPerThread(t *testing.T) {
	var before []int
	onPinnableThread(func() { before, _ = ThreadCPUs() })
	if len(before) < 2 {
		t.Skipf("one CPU allowed (%v): nothing to tell apart", before)
	}
	onPinnableThread(func() {
		if err := PinThreadToCPUs(before[:1]); err != nil {
			t.Errorf("PinThreadToCPUs: %v", err)
		}
	})
	onPinnableThread(func() {
		if got, err := ThreadCPUs(); err != nil || !slices.Equal(got, before) {
			t.Errorf("another thread's CPUs = %v, %v; want %v", got, err, before)
		}
	})
}

func TestPinThreadErrors(t *testing.T) {
	onPinnableThread(func() {
		orig, _ := ThreadCPUs()
		for _, cpus := range [][]int{nil, {}, {-1}, {0, maxCPUID}} {
			if err := PinThreadToCPUs(cpus); err == nil {
				t.Errorf("PinThreadToCPUs(%v) succeeded", cpus)
			}
		}
		// A CPU the machine does not have: the kernel refuses the empty set.
		if err := PinThreadToCPUs([]int{maxCPUID - 1}); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("PinThreadToCPUs([%d]) = %v; want EINVAL", maxCPUID-1, err)
		}
		if got, _ := ThreadCPUs(); !slices.Equal(got, orig) {
			t.Errorf("failed pins changed the thread's CPUs: %v, was %v", got, orig)
		}
	})
}

func TestMaskCPUs(t *testing.T) {
	for _, tc := range []struct {
		mask []uint64
		want []int
	}{
		{nil, nil},
		{[]uint64{0}, nil},
		{[]uint64{0b1011}, []int{0, 1, 3}},
		{[]uint64{1 << 63, 1}, []int{63, 64}},
		{[]uint64{0, 0, 1 << 5}, []int{133}},
	} {
		if got := maskCPUs(tc.mask, 64); !slices.Equal(got, tc.want) {
			t.Errorf("maskCPUs(%b) = %v, want %v", tc.mask, got, tc.want)
		}
	}
}

func TestSamePCIBus(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"0000:3b:00.0", "00000000:3B:00.0", true},
		{"0000:3b:00.0", "0000:3c:00.0", false},
		{"3b:00.0", "00000000:3b:00.0", false}, // no domain on one side: not comparable
		{"0001:3b:00.0", "00000000:3b:00.0", false},
	} {
		if got := SameBusID(tc.a, tc.b); got != tc.want {
			t.Errorf("SameBusID(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// onPinnableThread runs f on a goroutine locked to an OS thread of its own and waits
// for it. The goroutine never unlocks: the thread exits with it, whatever affinity f
// left it with, so no other goroutine inherits a pinned thread.
func onPinnableThread(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		f()
	}()
	<-done
}
