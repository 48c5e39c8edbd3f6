package collective

import (
	"errors"
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

// TestBuiltinChoiceDeviceBroadcast: broadcasts among more than 2 ranks on device
// memory pipeline deeper from devicePipelineMinBytes, chains sliced, and deeper again
// from deviceDeepPipelineMinBytes; chains from deviceProgramWaitsMinBytes run
// waits-only instead of sliced (and mid sizes sliced: TestBuiltinChoiceDeviceMidSliced);
// 2 ranks and host memory keep the host rule.
func TestBuiltinChoiceDeviceBroadcast(t *testing.T) {
	for _, c := range []struct {
		bytes  uint64
		ranks  int
		mem    executor.Memory
		name   string
		chunks int
		sliced bool
		waits  bool
	}{
		{8, 4, executor.MemoryCUDA, "chain", 0, false, false},
		{pipelineMinBytes, 4, executor.MemoryCUDA, "chain", pipelineChunks, true, false}, // midSliced
		{deviceMidSlicedMaxBytes + 1, 4, executor.MemoryCUDA, "chain", pipelineChunks, false, false},
		{devicePipelineMinBytes - 1, 4, executor.MemoryCUDA, "chain", pipelineChunks, false, false},
		{devicePipelineMinBytes, 4, executor.MemoryCUDA, "chain", devicePipelineChunks, true, false},
		{deviceDeepPipelineMinBytes - 1, 3, executor.MemoryCUDA, "chain", devicePipelineChunks, true, false},
		{deviceDeepPipelineMinBytes, 4, executor.MemoryCUDA, "chain", deviceDeepPipelineChunks, true, false},
		{deviceProgramWaitsMinBytes - 1, 4, executor.MemoryCUDA, "chain", deviceDeepPipelineChunks, true, false},
		{deviceProgramWaitsMinBytes, 4, executor.MemoryCUDA, "chain", deviceDeepPipelineChunks, false, true},
		{1 << 30, 3, executor.MemoryCUDA, "chain", deviceDeepPipelineChunks, false, true},
		{1 << 30, 8, executor.MemoryCUDA, "tree", devicePipelineChunks, false, false},
		{1 << 30, 2, executor.MemoryCUDA, "chain", pipelineChunks, false, false},
		{1 << 30, 4, executor.MemoryHost, "chain", pipelineChunks, false, false},
	} {
		ch := builtinChoice(Request{Collective: Broadcast, Bytes: c.bytes, Ranks: c.ranks, Memory: c.mem})
		if ch.name != c.name || ch.o.Chunks != c.chunks || ch.sliced != c.sliced || ch.programWaits != c.waits {
			t.Errorf("broadcast of %d bytes, %d ranks, %v: %s in %d pieces, sliced %t, waits-only %t; want %s in %d, sliced %t, waits-only %t",
				c.bytes, c.ranks, c.mem, ch.name, ch.o.Chunks, ch.sliced, ch.programWaits, c.name, c.chunks, c.sliced, c.waits)
		}
	}
	for _, kind := range []string{AllReduce, AllGather, ReduceScatter, AllToAll, Reduce} {
		if ch := builtinChoice(Request{Collective: kind, Bytes: 1 << 30, Ranks: 4, Memory: executor.MemoryCUDA}); ch.sliced || ch.programWaits {
			t.Errorf("%s of 1 GiB on 4 devices asks to be sliced or waits-only", kind)
		}
	}
}

// TestBuiltinChoiceDeviceMidSliced: allgather, alltoall and chain broadcasts on
// device memory among more than 2 ranks run sliced from deviceMidSlicedMinBytes to
// deviceMidSlicedMaxBytes; reduce-scatter, allreduce, reduce, 2 ranks, trees and host
// memory never at these sizes.
func TestBuiltinChoiceDeviceMidSliced(t *testing.T) {
	for _, kind := range []string{AllGather, ReduceScatter, AllToAll, Broadcast, AllReduce, Reduce} {
		for _, c := range []struct {
			bytes uint64
			ranks int
			mem   executor.Memory
			want  bool
		}{
			{deviceMidSlicedMinBytes - 1, 4, executor.MemoryCUDA, false},
			{deviceMidSlicedMinBytes, 4, executor.MemoryCUDA, true},
			{deviceMidSlicedMaxBytes, 3, executor.MemoryCUDA, true},
			{deviceMidSlicedMaxBytes + 1, 4, executor.MemoryCUDA, false},
			{1 << 20, 2, executor.MemoryCUDA, false},
			{1 << 20, 4, executor.MemoryHost, false},
		} {
			want := c.want && kind != AllReduce && kind != Reduce && kind != ReduceScatter
			ch := builtinChoice(Request{Collective: kind, Bytes: c.bytes, Ranks: c.ranks, Memory: c.mem})
			if ch.sliced != want || ch.programWaits {
				t.Errorf("%s of %d bytes, %d ranks, %v: sliced %t, waits-only %t; want sliced %t", kind, c.bytes, c.ranks, c.mem, ch.sliced, ch.programWaits, want)
			}
		}
	}
	if ch := builtinChoice(Request{Collective: Broadcast, Bytes: 1 << 20, Ranks: 8, Memory: executor.MemoryCUDA}); ch.sliced {
		t.Error("a device tree broadcast asks to be sliced")
	}
}

// TestBuiltinChoiceDevicePairSliced: between 2 ranks on device memory every
// collective but reduce runs sliced from devicePairSlicedMinBytes to
// devicePairSlicedMaxBytes, allreduce and broadcast to devicePairSlicedWideMaxBytes;
// host memory never.
func TestBuiltinChoiceDevicePairSliced(t *testing.T) {
	for _, kind := range []string{AllGather, ReduceScatter, AllToAll, Broadcast, AllReduce, Reduce} {
		wide := kind == AllReduce || kind == Broadcast
		for _, c := range []struct {
			bytes uint64
			mem   executor.Memory
			want  bool
		}{
			{devicePairSlicedMinBytes - 1, executor.MemoryCUDA, false},
			{devicePairSlicedMinBytes, executor.MemoryCUDA, true},
			{devicePairSlicedMaxBytes, executor.MemoryCUDA, true},
			{devicePairSlicedMaxBytes + 1, executor.MemoryCUDA, wide},
			{devicePairSlicedWideMaxBytes, executor.MemoryCUDA, wide},
			{devicePairSlicedWideMaxBytes + 1, executor.MemoryCUDA, false},
			{devicePairSlicedMinBytes, executor.MemoryHost, false},
		} {
			want := c.want && kind != Reduce
			ch := builtinChoice(Request{Collective: kind, Bytes: c.bytes, Ranks: 2, Memory: c.mem})
			if ch.sliced != want || ch.programWaits {
				t.Errorf("%s of %d bytes, 2 ranks, %v: sliced %t, waits-only %t; want sliced %t", kind, c.bytes, c.mem, ch.sliced, ch.programWaits, want)
			}
		}
	}
}

// TestCommunicatorBuiltinChoice: the communicator names the built-in its calls take,
// as StartCollective runs it: by size and memory, unpipelined where the message has
// fewer pieces than the pipeline needs, padded through all-pairs or with a padded
// tail where the plan does not divide an allreduce; an unknown collective is refused.
func TestCommunicatorBuiltinChoice(t *testing.T) {
	c := formed(t, 2)[0] // world closes them
	for _, tc := range []struct {
		kind          string
		bytes         uint64
		mem           executor.Memory
		name          string
		chunks, lanes int
		uneven        string
	}{
		{AllReduce, 8, executor.MemoryHost, "direct", 0, 0, ""},
		{AllReduce, allPairsMaxBytes, executor.MemoryHost, "allpairs", 0, 0, ""},
		{AllReduce, 100004, executor.MemoryHost, "allpairs", 0, 0, "padded"}, // 25,001 elements: odd
		{AllReduce, 16 << 20, executor.MemoryHost, "ring", pipelineChunks, -1, ""},
		{AllReduce, 16<<20 + 4, executor.MemoryHost, "ring", 1, 1, "tail"},
		{AllReduce, 16 << 20, executor.MemoryCUDA, "allpairs", 0, 0, ""},
		{AllReduce, 16<<20 + 4, executor.MemoryCUDA, "allpairs", 1, 1, "tail"},
		{AllReduce, deviceDirectMaxBytes, executor.MemoryCUDA, "direct", 0, 0, ""},
		{Broadcast, 64, executor.MemoryHost, "chain", 0, 0, ""},
		{AllToAll, 64, executor.MemoryHost, "pairwise", 0, 0, ""},
	} {
		name, o, uneven, err := c.BuiltinChoice(tc.kind, tc.bytes, true, tc.mem, 4, 0)
		if err != nil {
			t.Fatalf("%s %d: %v", tc.kind, tc.bytes, err)
		}
		lanes := tc.lanes
		if lanes < 0 { // the host rule's lanes, which depend on this machine's cores
			lanes = builtinChoice(Request{Collective: tc.kind, Bytes: tc.bytes, InPlace: true, Ranks: 2, ElementBytes: 4,
				Memory: tc.mem, CoresPerRank: c.coresPerRank()}).o.Lanes
		}
		if name != tc.name || o.Chunks != tc.chunks || o.Lanes != lanes || uneven != tc.uneven {
			t.Errorf("%s of %d bytes in %v: %s, %d chunks, %d lanes, uneven %q; want %s, %d, %d, %q", tc.kind, tc.bytes,
				tc.mem, name, o.Chunks, o.Lanes, uneven, tc.name, tc.chunks, lanes, tc.uneven)
		}
	}
	if _, _, _, err := c.BuiltinChoice("allscatter", 8, true, executor.MemoryHost, 4, 0); !errors.Is(err, executor.ErrUnsupported) {
		t.Errorf("an unknown collective: %v, want ErrUnsupported", err)
	}
}

// TestCommunicatorBroadcastPieces: a 4-rank communicator's device broadcast takes
// builtinChoice's pieces where they divide the message, else the deepest pipeline of
// fewer pieces that does (8 → 4 → 2), unpipelined only where none does.
func TestCommunicatorBroadcastPieces(t *testing.T) {
	c := formed(t, 4)[0] // world closes them
	for _, tc := range []struct {
		bytes  uint64
		chunks int
	}{
		{devicePipelineMinBytes, devicePipelineChunks},
		{devicePipelineMinBytes + 16, 4}, // 16,777,220 float32s: 4 pieces divide it, 8 do not
		{devicePipelineMinBytes + 8, 2},  // 16,777,218: 2 pieces
		{devicePipelineMinBytes + 4, 1},  // 16,777,217: odd
	} {
		name, o, uneven, err := c.BuiltinChoice(Broadcast, tc.bytes, true, executor.MemoryCUDA, 4, 0)
		if err != nil {
			t.Fatalf("%d bytes: %v", tc.bytes, err)
		}
		if name != "chain" || max(o.Chunks, 1) != tc.chunks || uneven != "" {
			t.Errorf("broadcast of %d bytes on 4 ranks' devices: %s in %d pieces, uneven %q; want chain in %d", tc.bytes,
				name, o.Chunks, uneven, tc.chunks)
		}
	}
}
