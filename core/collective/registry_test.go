package collective

import (
	"testing"

	"github.com/ucxx-go/ucxx-go/core/executor"
)

// TestBuiltinChoiceLanes: large ring allreduces run on 4 lanes a rank where every
// rank has 4 cores or more, and on one otherwise or below lanesMinBytes.
func TestBuiltinChoiceLanes(t *testing.T) {
	for _, c := range []struct {
		bytes      uint64
		cores      int
		name       string
		lanes      int
		pipelining int
	}{
		{lanesMinBytes, maxLanes, "ring", maxLanes, pipelineChunks},
		{16 << 20, 8, "ring", maxLanes, pipelineChunks},
		{lanesMinBytes, maxLanes - 1, "ring", 0, pipelineChunks},
		{lanesMinBytes - 1, 16, "ring", 0, 0},
		{directMaxBytes, 16, "direct", 0, 0},
	} {
		ch := builtinChoice(Request{Collective: AllReduce, Bytes: c.bytes, Ranks: 2, CoresPerRank: c.cores})
		if ch.name != c.name || ch.o.Lanes != c.lanes || ch.o.Chunks != c.pipelining {
			t.Errorf("%d bytes, %d cores a rank: %s with %d lanes, %d chunks; want %s, %d, %d", c.bytes, c.cores,
				ch.name, ch.o.Lanes, ch.o.Chunks, c.name, c.lanes, c.pipelining)
		}
	}
}

// TestBuiltinChoiceDevice: allreduces of device memory take direct to
// deviceDirectMaxBytes and all-pairs above, never pipelined or on extra lanes,
// whatever the host rule would pick at that size.
func TestBuiltinChoiceDevice(t *testing.T) {
	for _, c := range []struct {
		bytes uint64
		name  string
	}{
		{8, "direct"},
		{allPairsMaxBytes + 1, "direct"},
		{deviceDirectMaxBytes, "direct"},
		{deviceDirectMaxBytes + 1, "allpairs"},
		{1 << 30, "allpairs"},
	} {
		for _, ranks := range []int{2, 4, 8} {
			ch := builtinChoice(Request{Collective: AllReduce, Bytes: c.bytes, Ranks: ranks, Memory: executor.MemoryCUDA})
			if ch.name != c.name || ch.o.Lanes > 1 || ch.o.Chunks > 1 {
				t.Errorf("%d bytes, %d ranks on device: %s with %d lanes, %d chunks; want %s on one lane, unpipelined",
					c.bytes, ranks, ch.name, ch.o.Lanes, ch.o.Chunks, c.name)
			}
		}
	}
	if ch := builtinChoice(Request{Collective: AllReduce, Bytes: 1 << 30, Ranks: 4, CoresPerRank: 16}); ch.name != "ring" {
		t.Errorf("1 GiB on host: %s, want the ring", ch.name)
	}
}
