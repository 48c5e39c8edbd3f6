package topology

import (
	"errors"
	"slices"
	"testing"
)

// needGPUs returns the machine's GPUs, or skips the test where there are none.
func needGPUs(t *testing.T) []GPU {
	t.Helper()
	gpus, err := GPUs()
	if errors.Is(err, ErrNoGPU) {
		t.Skip("no NVIDIA GPU")
	}
	if err != nil {
		t.Fatalf("GPUs: %v", err)
	}
	return gpus
}

// On a machine without an NVIDIA driver, discovery says so with ErrNoGPU; with one,
// every GPU has a name. Either way nothing panics or hangs.
func TestGPUsReportsNoGPUCleanly(t *testing.T) {
	gpus, err := GPUs()
	if errors.Is(err, ErrNoGPU) {
		if gpus != nil {
			t.Fatalf("ErrNoGPU with GPUs %v", gpus)
		}
		if links, err := GPUTopology(); !errors.Is(err, ErrNoGPU) || links != nil {
			t.Fatalf("GPUTopology without a GPU = %v, %v; want ErrNoGPU", links, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("GPUs: %v", err)
	}
	for _, g := range gpus {
		if g.Name == "" {
			t.Errorf("GPU %d has no name", g.Index)
		}
	}
}

// Each GPU's placement: a NUMA node or -1, CPUs in order, and those a thread can be
// pinned to (where the process may use any of them).
func TestGPUPlacement(t *testing.T) {
	gpus := needGPUs(t)
	bound := cpuIDBound()
	for _, g := range gpus {
		t.Logf("GPU %d %s %s: NUMA node %d, CPUs %v", g.Index, g.Name, g.BusID, g.NUMANode, g.CPUAffinity)
		if g.NUMANode < -1 {
			t.Errorf("GPU %d: NUMA node %d", g.Index, g.NUMANode)
		}
		for k, c := range g.CPUAffinity {
			if c < 0 || c >= bound || k > 0 && c <= g.CPUAffinity[k-1] {
				t.Errorf("GPU %d: CPU affinity %v not increasing ids in 0..%d", g.Index, g.CPUAffinity, bound-1)
				break
			}
		}
		onPinnableThread(func() {
			allowed, err := ThreadCPUs()
			if err != nil {
				t.Errorf("ThreadCPUs: %v", err)
				return
			}
			near := slices.DeleteFunc(slices.Clone(g.CPUAffinity), func(c int) bool { return !slices.Contains(allowed, c) })
			if len(near) == 0 {
				t.Logf("GPU %d: none of its CPUs is allowed here (%v)", g.Index, allowed)
				return
			}
			if err := PinThreadToCPUs(near); err != nil {
				t.Errorf("GPU %d: PinThreadToCPUs(%v): %v", g.Index, near, err)
			} else if got, _ := ThreadCPUs(); !slices.Equal(got, near) {
				t.Errorf("GPU %d: pinned to %v, ThreadCPUs = %v", g.Index, near, got)
			}
		})
	}
}

// The topology is a square matrix over the GPUs, "X" on the diagonal, symmetric in
// its levels, with every level one of the documented names.
func TestGPUTopology(t *testing.T) {
	gpus := needGPUs(t)
	links, err := GPUTopology()
	if err != nil {
		t.Fatalf("GPUTopology: %v", err)
	}
	if len(links) != len(gpus) {
		t.Fatalf("%d rows for %d GPUs", len(links), len(gpus))
	}
	known := []string{"", "NVLINK", "BOARD", "PIX", "PXB", "PHB", "NODE", "SYS"}
	for i, row := range links {
		t.Logf("GPU %d: %v", i, row)
		if len(row) != len(gpus) {
			t.Fatalf("row %d has %d entries for %d GPUs", i, len(row), len(gpus))
		}
		for j, l := range row {
			switch {
			case i == j:
				if l.Level != "X" {
					t.Errorf("links[%d][%d] = %+v; want X", i, j, l)
				}
			case !slices.Contains(known, l.Level):
				t.Errorf("links[%d][%d] level %q is not a known name", i, j, l.Level)
			case l.Level != links[j][i].Level:
				t.Errorf("links[%d][%d] = %q but links[%d][%d] = %q", i, j, l.Level, j, i, links[j][i].Level)
			}
		}
	}
}
