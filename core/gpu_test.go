package core

import (
	"errors"
	"testing"
)

// On a machine without an NVIDIA driver, discovery says so with ErrNoGPU; with one,
// every GPU has a name. Either way nothing panics or hangs.
func TestGPUsReportsNoGPUCleanly(t *testing.T) {
	gpus, err := GPUs()
	if errors.Is(err, ErrNoGPU) {
		if gpus != nil {
			t.Fatalf("ErrNoGPU with GPUs %v", gpus)
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
