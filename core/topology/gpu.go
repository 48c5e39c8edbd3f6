// Package topology finds the machine's GPUs (through NVML, loaded at run time), the
// links between them and the CPUs near each, and pins OS threads to CPUs: what the
// progress thread needs to run near the GPU it drives. It knows nothing of UCX.
package topology

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"runtime"
	"strconv"
	"strings"
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
	// NUMANode is the host NUMA node the GPU is attached to (the kernel's numa_node of
	// its PCI device, else NVML's memory affinity), or -1 when the machine does not
	// say (no NUMA, or a virtual machine that hides it).
	NUMANode int
	// CPUAffinity lists the CPUs close to the GPU (NVML's ideal CPU affinity), in
	// increasing order; nil when NVML does not say. It may include CPUs this process
	// may not use: PinThreadToCPUs keeps the allowed ones.
	CPUAffinity []int
}

// ErrNoGPU: no NVIDIA driver (libnvidia-ml) or no device on this machine.
var ErrNoGPU = errors.New("topology: no NVIDIA GPU")

var nvmlOnce struct {
	sync.Once
	ret nvml.Return
}

// nvmlDevices initializes NVML once and returns a handle for every device.
func nvmlDevices() ([]nvml.Device, error) {
	nvmlOnce.Do(func() { nvmlOnce.ret = nvml.Init() })
	switch nvmlOnce.ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_NO_PERMISSION:
		return nil, ErrNoGPU
	default:
		return nil, fmt.Errorf("topology: nvml init: %s", nvml.ErrorString(nvmlOnce.ret))
	}
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("topology: nvml device count: %s", nvml.ErrorString(ret))
	}
	if n == 0 {
		return nil, ErrNoGPU
	}
	devs := make([]nvml.Device, n)
	for i := range devs {
		d, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("topology: nvml device %d: %s", i, nvml.ErrorString(ret))
		}
		devs[i] = d
	}
	return devs, nil
}

// GPUs lists the machine's NVIDIA GPUs through NVML. Without a driver it returns
// ErrNoGPU: libnvidia-ml is opened at run time, so nothing CUDA is loaded or needed.
// NVML numbers GPUs by PCI bus id; CUDA does too only with CUDA_DEVICE_ORDER=PCI_BUS_ID
// (match on UUID or BusID otherwise).
func GPUs() ([]GPU, error) {
	devs, err := nvmlDevices()
	if err != nil {
		return nil, err
	}
	gpus := make([]GPU, 0, len(devs))
	for i, d := range devs {
		g := GPU{Index: i, NUMANode: -1}
		g.Name, _ = d.GetName()
		g.UUID, _ = d.GetUUID()
		if pci, ret := d.GetPciInfo(); ret == nvml.SUCCESS {
			g.BusID = cString(pci.BusIdLegacy[:])
			g.NUMANode = sysfsNUMANode(pci)
		}
		if g.NUMANode < 0 {
			g.NUMANode = nvmlNUMANode(d)
		}
		if mem, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			g.MemoryBytes = mem.Total
		}
		if mask, ret := d.GetCpuAffinity(cpuIDBound()); ret == nvml.SUCCESS {
			g.CPUAffinity = maskCPUs(mask, bits.UintSize)
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// sysfsNUMANode reads the kernel's NUMA node of the GPU's PCI device, -1 if unknown.
func sysfsNUMANode(pci nvml.PciInfo) int {
	// NVML's bus id is "DDDDDDDD:BB:DD.F" in upper case; sysfs names the device
	// "dddd:bb:dd.f", the domain with at least 4 hex digits.
	id := cString(pci.BusId[:])
	_, rest, ok := strings.Cut(id, ":")
	if !ok {
		return -1
	}
	b, err := os.ReadFile(fmt.Sprintf("/sys/bus/pci/devices/%04x:%s/numa_node", pci.Domain, strings.ToLower(rest)))
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// nvmlNUMANode returns the lowest NUMA node in NVML's memory affinity of d, -1 if none.
func nvmlNUMANode(d nvml.Device) int {
	mask, ret := d.GetMemoryAffinity(1024, nvml.AFFINITY_SCOPE_NODE)
	if ret != nvml.SUCCESS {
		return -1
	}
	if nodes := maskCPUs(mask, bits.UintSize); len(nodes) > 0 {
		return nodes[0]
	}
	return -1
}

// cpuIDBound returns a number above every CPU id of the machine: the kernel's
// possible CPUs, or the CPU count when sysfs does not say.
func cpuIDBound() int {
	n := runtime.NumCPU()
	if b, err := os.ReadFile("/sys/devices/system/cpu/possible"); err == nil {
		// "0-255", or a list such as "0-3,8-11".
		s := strings.TrimSpace(string(b))
		last := s[strings.LastIndexAny(s, ",-")+1:]
		if hi, err := strconv.Atoi(last); err == nil && hi+1 > n {
			n = hi + 1
		}
	}
	return max(n, 64)
}

// GPULink is how two GPUs reach each other.
type GPULink struct {
	// Level is the closest path between the two: "X" for a GPU and itself,
	// "NVLINK" when NVML reports peer access over NVLink, otherwise the nearest
	// common PCIe ancestor as nvidia-smi topo names it: "BOARD" (same board), "PIX"
	// (one PCIe switch), "PXB" (several switches), "PHB" (a host bridge), "NODE" (one
	// NUMA node's host bridges), "SYS" (across the SMP interconnect). "" when NVML
	// does not say.
	Level string
	// P2PRead: NVML reports that one GPU can read the other's memory directly.
	P2PRead bool
}

// GPUTopology returns the links between the GPUs that GPUs lists, by the same index:
// links[i][j] is from GPU i to GPU j. It makes three NVML calls per pair: call it once
// at setup, not per connection.
//
// Errors: ErrNoGPU as GPUs returns it, or an NVML error listing the devices.
func GPUTopology() ([][]GPULink, error) {
	devs, err := nvmlDevices()
	if err != nil {
		return nil, err
	}
	links := make([][]GPULink, len(devs))
	for i, a := range devs {
		links[i] = make([]GPULink, len(devs))
		for j, b := range devs {
			if i == j {
				links[i][j] = GPULink{Level: "X", P2PRead: true}
				continue
			}
			var l GPULink
			if lvl, ret := a.GetTopologyCommonAncestor(b); ret == nvml.SUCCESS {
				l.Level = topologyLevels[lvl]
			}
			if st, ret := a.GetP2PStatus(b, nvml.P2P_CAPS_INDEX_NVLINK); ret == nvml.SUCCESS && st == nvml.P2P_STATUS_OK {
				l.Level = "NVLINK"
			}
			if st, ret := a.GetP2PStatus(b, nvml.P2P_CAPS_INDEX_READ); ret == nvml.SUCCESS {
				l.P2PRead = st == nvml.P2P_STATUS_OK
			}
			links[i][j] = l
		}
	}
	return links, nil
}

// topologyLevels names NVML's common-ancestor levels the way nvidia-smi topo does.
var topologyLevels = map[nvml.GpuTopologyLevel]string{
	nvml.TOPOLOGY_INTERNAL:   "BOARD",
	nvml.TOPOLOGY_SINGLE:     "PIX",
	nvml.TOPOLOGY_MULTIPLE:   "PXB",
	nvml.TOPOLOGY_HOSTBRIDGE: "PHB",
	nvml.TOPOLOGY_NODE:       "NODE",
	nvml.TOPOLOGY_SYSTEM:     "SYS",
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

// CPUsNearGPU returns the CPUs NVML reports near the GPU at PCI bus id busID (as CUDA
// writes it), and false when NVML, the GPU or its affinity is unavailable.
func CPUsNearGPU(busID string) ([]int, bool) {
	gpus, err := GPUs()
	if err != nil {
		return nil, false
	}
	for _, g := range gpus {
		if SameBusID(g.BusID, busID) && len(g.CPUAffinity) > 0 {
			return g.CPUAffinity, true
		}
	}
	return nil, false
}

// SameBusID compares PCI bus ids that may differ in case and in the width of the
// domain ("0000:3b:00.0" from CUDA, "00000000:3B:00.0" from NVML).
func SameBusID(a, b string) bool {
	norm := func(s string) string {
		s = strings.ToLower(s)
		if i := strings.IndexByte(s, ':'); i >= 0 {
			s = strings.TrimLeft(s[:i], "0") + s[i:]
		}
		return s
	}
	return norm(a) == norm(b)
}
