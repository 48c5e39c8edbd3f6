package executor

import (
	"encoding/binary"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ucxx-go/ucxx-go/core/reduce"
)

// TestDeviceWaitLanes: half the hardware queues CUDA_DEVICE_MAX_CONNECTIONS gives (8
// by default, at most 32), and none with one queue, where every device wait would
// hold the queue every other stream shares.
func TestDeviceWaitLanes(t *testing.T) {
	for env, want := range map[string]int{"": 4, "8": 4, "32": 16, "64": 16, "1": 0, "2": 1, "0": 4, "-3": 4, "x": 4} {
		if got := deviceWaitLanesFor(env); got != want {
			t.Errorf("CUDA_DEVICE_MAX_CONNECTIONS=%q: %d lanes may wait on the device, want %d", env, got, want)
		}
	}
}

// The checked-in reduce.ptx holds a kernel for every type and operator, each taking
// the one parameter reduceArgs packs: a stale PTX (another layout, another count of
// sources) would fail calls only on a GPU.
func TestReducePTXTakesReduceArgs(t *testing.T) {
	size := len(reduceArgs(0, nil, 0))
	if size != 8*(3+reduceMaxSources) {
		t.Fatalf("reduceArgs packs %d bytes", size)
	}
	got := map[string]int{}
	re := regexp.MustCompile(`\.entry (reduce_\w+)\(\s*\.param \.align 8 \.b8 \w+\[(\d+)\]\s*\)`)
	for _, m := range re.FindAllSubmatch(reducePTX, -1) {
		got[string(m[1])], _ = strconv.Atoi(string(m[2]))
	}
	want := 0
	for _, tn := range typeNames {
		for _, op := range []reduce.Op{reduce.Sum, reduce.Prod, reduce.Min, reduce.Max} {
			name := "reduce_" + op.String() + "_" + tn
			want++
			if got[name] != size {
				t.Errorf("kernels/reduce.ptx: %s takes %d parameter bytes, want %d", name, got[name], size)
			}
		}
	}
	if len(got) != want || strings.Count(string(reducePTX), ".entry ") != want {
		t.Errorf("kernels/reduce.ptx has %d kernels of the expected form (%d entries), want %d", len(got),
			strings.Count(string(reducePTX), ".entry "), want)
	}
}

// A reduction of more sources than one kernel reads folds dst into each later group.
func TestReduceGroups(t *testing.T) {
	const dst = 1000
	srcs := func(n int) []uintptr {
		s := make([]uintptr, n)
		for i := range s {
			s[i] = uintptr(i + 1)
		}
		return s
	}
	for _, c := range []struct {
		n    int
		want [][]uintptr
	}{
		{2, [][]uintptr{{1, 2}}},
		{8, [][]uintptr{{1, 2, 3, 4, 5, 6, 7, 8}}},
		{9, [][]uintptr{{1, 2, 3, 4, 5, 6, 7, 8}, {dst, 9}}},
		{16, [][]uintptr{{1, 2, 3, 4, 5, 6, 7, 8}, {dst, 9, 10, 11, 12, 13, 14, 15}, {dst, 16}}},
	} {
		if got := reduceGroups(dst, srcs(c.n)); !slices.EqualFunc(got, c.want, slices.Equal) {
			t.Errorf("%d sources: groups %v, want %v", c.n, got, c.want)
		}
	}
	args := reduceArgs(7, []uintptr{11, 12, 13}, 5)
	for i, want := range []uint64{7, 5, 3, 11, 12, 13, 0} {
		if got := binary.LittleEndian.Uint64(args[8*i:]); got != want {
			t.Errorf("reduceArgs word %d = %d, want %d", i, got, want)
		}
	}
}
