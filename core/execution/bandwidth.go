package execution

import (
	"github.com/ucxx-go/ucxx-go/core/dag"
	"github.com/ucxx-go/ucxx-go/core/topology"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Link bandwidths for the DAG's transfer-time device policies, in GB/s, by the path
// NVML reports between two GPUs (topology.GPULink.Level), for one direction. They are
// nominal figures of the link kinds (an NVLink 4 H100 pair with 18 links, PCIe 5 x16
// through switches and host bridges), not measurements: the policies only compare
// them, as GrCUDA's compare its measured matrix.
var linkGBps = map[string]float64{
	"NVLINK": 450,
	"BOARD":  50,
	"PIX":    50,
	"PXB":    40,
	"PHB":    32,
	"NODE":   25,
	"SYS":    16,
}

// hostLinkGBps is a GPU's bandwidth to and from host memory (PCIe 5 x16, nominal).
const hostLinkGBps = 50

// unknownLinkGBps is a pair NVML says nothing of.
const unknownLinkGBps = 10

// bandwidthMatrix is the DAG's matrix for GPUs whose links are links[i][j] (by the
// context's GPU number).
func bandwidthMatrix(links [][]topology.GPULink) *dag.BandwidthMatrix {
	m := dag.NewBandwidthMatrix(len(links))
	for i := range links {
		m.Set(dag.Host, i, hostLinkGBps)
		m.Set(i, dag.Host, hostLinkGBps)
		for j, l := range links[i] {
			if i == j {
				continue
			}
			bw, ok := linkGBps[l.Level]
			if !ok {
				bw = unknownLinkGBps
			}
			m.Set(i, j, bw)
		}
	}
	return m
}

// deviceLinks returns the links between the CUDA devices of ordinals, found in NVML's
// topology by PCI bus id; nil when NVML cannot say (the caller falls back to uniform
// links).
func deviceLinks(drv *ucxx.CUDADriver, ordinals []int) [][]topology.GPULink {
	gpus, err := topology.GPUs()
	if err != nil {
		return nil
	}
	all, err := topology.GPUTopology()
	if err != nil || len(all) != len(gpus) {
		return nil
	}
	index := make([]int, len(ordinals)) // NVML's index of each ordinal
	for k, ord := range ordinals {
		bus, err := drv.PCIBusID(ord)
		if err != nil {
			return nil
		}
		index[k] = -1
		for i, g := range gpus {
			if topology.SameBusID(g.BusID, bus) {
				index[k] = i
			}
		}
		if index[k] < 0 {
			return nil
		}
	}
	links := make([][]topology.GPULink, len(ordinals))
	for a := range ordinals {
		links[a] = make([]topology.GPULink, len(ordinals))
		for b := range ordinals {
			links[a][b] = all[index[a]][index[b]]
		}
	}
	return links
}
