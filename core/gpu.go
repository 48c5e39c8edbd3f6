package core

import (
	"errors"
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// GPU describes one NVIDIA GPU as NVML reports it.
type GPU struct {
	Index       int
	Name        string
	UUID        string
	BusID       string
	MemoryBytes uint64
}

// ErrNoGPU: no NVIDIA driver (libnvidia-ml) or no device on this machine.
var ErrNoGPU = errors.New("core: no NVIDIA GPU")

var nvmlOnce struct {
	sync.Once
	ret nvml.Return
}

// GPUs lists the machine's NVIDIA GPUs through NVML. Without a driver it returns
// ErrNoGPU: libnvidia-ml is opened at run time, so nothing CUDA is loaded or needed.
func GPUs() ([]GPU, error) {
	nvmlOnce.Do(func() { nvmlOnce.ret = nvml.Init() })
	switch nvmlOnce.ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_NO_PERMISSION:
		return nil, ErrNoGPU
	default:
		return nil, fmt.Errorf("core: nvml init: %s", nvml.ErrorString(nvmlOnce.ret))
	}
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("core: nvml device count: %s", nvml.ErrorString(ret))
	}
	if n == 0 {
		return nil, ErrNoGPU
	}
	gpus := make([]GPU, 0, n)
	for i := 0; i < n; i++ {
		d, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("core: nvml device %d: %s", i, nvml.ErrorString(ret))
		}
		g := GPU{Index: i}
		g.Name, _ = d.GetName()
		g.UUID, _ = d.GetUUID()
		if pci, ret := d.GetPciInfo(); ret == nvml.SUCCESS {
			g.BusID = cString(pci.BusIdLegacy[:])
		}
		if mem, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			g.MemoryBytes = mem.Total
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

func cString[T ~int8 | ~uint8](b []T) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
