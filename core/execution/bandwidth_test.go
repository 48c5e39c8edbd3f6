package execution

import (
	"testing"

	"github.com/ucxx-go/ucxx-go/core/dag"
	"github.com/ucxx-go/ucxx-go/core/topology"
)

// TestBandwidthMatrixFromLinks: NVLink pairs are faster than PCIe pairs, which are
// faster than pairs across sockets; every GPU reaches the host; unknown links are slow
// but present.
func TestBandwidthMatrixFromLinks(t *testing.T) {
	l := func(level string) topology.GPULink { return topology.GPULink{Level: level} }
	links := [][]topology.GPULink{
		{l("X"), l("NVLINK"), l("SYS"), l("")},
		{l("NVLINK"), l("X"), l("PIX"), l("SYS")},
		{l("SYS"), l("PIX"), l("X"), l("NODE")},
		{l(""), l("SYS"), l("NODE"), l("X")},
	}
	m := bandwidthMatrix(links)
	if m.GPUs() != 4 {
		t.Fatalf("%d GPUs", m.GPUs())
	}
	if !(m.Get(0, 1) > m.Get(1, 2) && m.Get(1, 2) > m.Get(2, 3) && m.Get(2, 3) > m.Get(0, 2)) {
		t.Errorf("NVLink %v, PIX %v, NODE %v, SYS %v: not in that order", m.Get(0, 1), m.Get(1, 2), m.Get(2, 3), m.Get(0, 2))
	}
	for i := range 4 {
		if m.Get(dag.Host, i) <= 0 || m.Get(i, dag.Host) <= 0 {
			t.Errorf("GPU %d has no host link", i)
		}
	}
	if bw := m.Get(0, 3); bw <= 0 || bw >= m.Get(0, 2) {
		t.Errorf("an unknown link: %v", bw)
	}
	// The transfer-time policies accept it: a 2-GPU context's choice prefers where
	// the data is.
	if _, err := dag.NewDeviceSelectionPolicy(dag.MinMaxTransferTime, m, 0); err != nil {
		t.Fatal(err)
	}
}
