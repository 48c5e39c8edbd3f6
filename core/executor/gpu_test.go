package executor

import "testing"

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
