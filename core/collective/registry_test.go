package collective

import "testing"

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
