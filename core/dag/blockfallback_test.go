package dag

import (
	"fmt"
	"testing"
)

// TestBlockDevice: the device a block distribution gives ranges of arrays of known
// size, weighted by bytes; whole arrays, arrays of unknown size and pinned ones say
// nothing.
func TestBlockDevice(t *testing.T) {
	loc := NewLocationTracker()
	const n = 1 << 20
	for a := ArrayID(1); a <= 3; a++ {
		loc.SetSize(a, n)
	}
	loc.SetSize(4, 1<<10)
	loc.SetSize(5, n)
	loc.Pin(5)
	for _, c := range []struct {
		acc  []Access
		gpus int
		want int
		ok   bool
	}{
		{[]Access{acc(1, 0, n/2, Read)}, 2, 0, true},
		{[]Access{acc(1, n/2, n/2, ReadWrite)}, 2, 1, true},
		{[]Access{acc(1, 3*n/4, n/4, Read), acc(2, 3*n/4, n/4, Write)}, 4, 3, true},
		{[]Access{acc(1, n/4, n/4, Read)}, 4, 1, true},
		{[]Access{acc(1, n/4, n/4, Read)}, 1, 0, true},
		// a whole array (4) beside a part: the part alone decides
		{[]Access{acc(4, 0, 1<<10, Read), acc(2, n/2, n/2, Read)}, 2, 1, true},
		// weighted by bytes: 3/4 of the bytes in the first half of their array
		{[]Access{acc(1, 0, 3*n/8, Read), acc(2, 7*n/8, n/8, Read)}, 2, 0, true},
		{[]Access{acc(1, 0, n, Read)}, 2, 0, false},               // whole
		{[]Access{acc(9, 0, 100, Read)}, 2, 0, false},             // size unknown
		{[]Access{acc(5, 0, n/2, Read)}, 2, 0, false},             // pinned
		{[]Access{acc(1, n-10, 100, Read)}, 2, 0, false},          // past the end: not a part of it
		{[]Access{acc(1, ^uint64(0)-10, 100, Read)}, 2, 0, false}, // its end wraps past 2^64
		{nil, 2, 0, false},
	} {
		d, ok := loc.BlockDevice(c.acc, c.gpus)
		if d != c.want || ok != c.ok {
			t.Errorf("%v on %d GPUs: %d %t, want %d %t", c.acc, c.gpus, d, ok, c.want, c.ok)
		}
	}
	loc.Forget(1)
	if _, ok := loc.BlockDevice([]Access{acc(1, 0, n/2, Read)}, 2); ok {
		t.Error("a forgotten array's size still counts")
	}
}

// TestBlockFallbackKeepsPartitionsTogether: vec's shape (square x and y by halves,
// then a kernel reading both halves of a partition), every byte on the host at the
// start. GrCUDA's round-robin fallback (RoundRobinFallback) sends square(x[p]) and
// square(y[p]) to different GPUs, and the partition's sum moves one of them across;
// the block fallback puts partition p on GPU p, with no move between GPUs. For each
// data-aware policy and parent-stream policy; round-robin and stream-aware never use
// the fallback.
func TestBlockFallbackKeepsPartitionsTogether(t *testing.T) {
	const gpus, parts, part = 2, 2, 1 << 16
	for _, p := range []DevicePolicy{MinTransferSize, MinMinTransferTime, MinMaxTransferTime} {
		for ps := SameAsParent; ps <= MultiGPUDisjoint; ps++ {
			for _, rr := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/%v/rr=%t", p, ps, rr), func(t *testing.T) {
					lanes := make([]Lane, gpus)
					for i := range lanes {
						lanes[i] = &manualLane{name: fmt.Sprint("gpu", i)}
					}
					g := newGraph(t, Options{GPUs: gpus, GPULanes: lanes, DeviceSelection: p, ParentStream: ps,
						Bandwidth: dgxMatrix(gpus), RoundRobinFallback: rr})
					const x, y, sum = 1, 2, 3
					for _, a := range []ArrayID{x, y} {
						g.Describe(a, parts*part, Host, true)
					}
					g.Describe(sum, parts*4, Host, true)
					crossMoves, placedByPartition := 0, true
					for q := range uint64(parts) {
						var devs []int
						for _, a := range [][]Access{
							{acc(x, q*part, part, ReadWrite)},
							{acc(y, q*part, part, ReadWrite)},
							{acc(x, q*part, part, Read), acc(y, q*part, part, Read), acc(sum, q*4, 4, Write)},
						} {
							v, err := g.Add(Task{Kind: KindGPU, Accesses: a})
							if err != nil {
								t.Fatal(err)
							}
							for _, m := range v.Moves() {
								if m.From != Host {
									crossMoves++
								}
							}
							devs = append(devs, v.Device())
						}
						for _, d := range devs {
							placedByPartition = placedByPartition && d == int(q)
						}
					}
					if !rr && (crossMoves != 0 || !placedByPartition) {
						t.Errorf("block fallback: %d moves between GPUs, partitions on their GPUs %t", crossMoves, placedByPartition)
					}
					if rr && ps == MultiGPUEarlyDisjoint && crossMoves == 0 {
						t.Error("GrCUDA's round-robin fallback moved nothing across: the test does not tell them apart")
					}
					for _, l := range lanes {
						l.(*manualLane).endAll()
					}
				})
			}
		}
	}
}

// TestBlockBreaksTies: cg's reduction of its partial sums, partition q's gather
// buffer holding one slot written on each of 4 GPUs (every GPU holds as many bytes,
// and costs as much, as the others), into partition q's own scalar. GrCUDA's rule
// (RoundRobinFallback) sends every partition's reduction to GPU 0, whose output then
// keeps every partition's scalar step there; with the block distribution on, the tie
// goes to the partition's own GPU.
func TestBlockBreaksTies(t *testing.T) {
	const gpus, stride = 4, 1 << 16
	const gath, scalar = 1, 2
	for _, p := range []DevicePolicy{MinTransferSize, MinMinTransferTime, MinMaxTransferTime} {
		for _, rr := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/rr=%t", p, rr), func(t *testing.T) {
				pol, err := NewDeviceSelectionPolicy(p, uniformMatrix(gpus), 0)
				if err != nil {
					t.Fatal(err)
				}
				if !rr {
					pol = withBlockFallback(pol)
				}
				loc := NewLocationTracker()
				loc.SetSize(gath, gpus*stride)
				loc.SetSize(scalar, gpus*stride)
				for q := range uint64(gpus) {
					for o := range uint64(gpus) {
						loc.Place(gath, q*stride+4*o, 4, int(o)) // slot o of partition q's buffer, written on GPU o
					}
				}
				for q := range gpus {
					reduce := []Access{acc(gath, uint64(q)*stride, 4*gpus, Read), acc(scalar, uint64(q)*stride, 4, ReadWrite)}
					want := q
					if rr {
						want = 0
					}
					if d := pol.SelectDevice(reduce, nil, make(fixedLoad, gpus), loc); d != want {
						t.Errorf("partition %d's reduction on GPU %d, want %d", q, d, want)
					}
				}
				// Only ties are broken: the block device is not among the devices
				// asked (the lowest of those), or holds less than another (that one).
				reduce1 := []Access{acc(gath, stride, 4*gpus, Read), acc(scalar, stride, 4, ReadWrite)}
				if d := pol.SelectDevice(reduce1, []int{0, 2, 3}, make(fixedLoad, gpus), loc); d != 0 {
					t.Errorf("among GPUs 0, 2, 3: GPU %d, want 0", d)
				}
				loc.Place(gath, stride+4, 4, 2) // slot 1 of partition 1's buffer moved to GPU 2
				if d := pol.SelectDevice(reduce1, nil, make(fixedLoad, gpus), loc); d != 2 {
					t.Errorf("GPU 2 holding two slots: GPU %d, want 2", d)
				}
			})
		}
	}
}

// BenchmarkBlockTieBreak: a data-aware choice's cost with the block distribution on
// (the default) and with GrCUDA's rules, for a vertex whose data sits on one GPU (no
// tie: the block distribution is not asked) and for cg's reduction (a tie it breaks).
func BenchmarkBlockTieBreak(b *testing.B) {
	const gpus, stride = 4, 1 << 16
	const gath, scalar, part = 1, 2, 3
	loc := NewLocationTracker()
	for _, a := range []ArrayID{gath, scalar, part} {
		loc.SetSize(a, gpus*stride)
	}
	for o := range uint64(gpus) {
		loc.Place(gath, stride+4*o, 4, int(o))
	}
	loc.Place(part, stride, stride, 1)
	for _, c := range []struct {
		name string
		acc  []Access
	}{
		{"no-tie", []Access{acc(part, stride, stride, Read), acc(scalar, stride, 4, ReadWrite)}},
		{"tie", []Access{acc(gath, stride, 4*gpus, Read), acc(scalar, stride, 4, ReadWrite)}},
	} {
		for _, rr := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/rr=%t", c.name, rr), func(b *testing.B) {
				pol, err := NewDeviceSelectionPolicy(MinMinTransferTime, uniformMatrix(gpus), 0)
				if err != nil {
					b.Fatal(err)
				}
				if !rr {
					pol = withBlockFallback(pol)
				}
				load := make(fixedLoad, gpus)
				b.ReportAllocs()
				for b.Loop() {
					pol.SelectDevice(c.acc, nil, load, loc)
				}
			})
		}
	}
}
