package dag

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// dgxMatrix returns a bandwidth matrix shaped like GrCUDA's connection_graph_N_v100
// (a DGX-1): host links ~12 GB/s, paired GPUs (i, i^1) over a double NVLink 48 GB/s,
// GPUs of one quad or facing across quads (i^4) 24 GB/s, the rest PCIe 8.5 GB/s.
func dgxMatrix(gpus int) *BandwidthMatrix {
	m := NewBandwidthMatrix(gpus)
	for i := range gpus {
		m.Set(Host, i, 12)
		m.Set(i, Host, 12)
		for j := range gpus {
			switch {
			case i == j:
				m.Set(i, j, 360)
			case i^1 == j:
				m.Set(i, j, 48)
			case i/4 == j/4 || i^4 == j:
				m.Set(i, j, 24)
			default:
				m.Set(i, j, 8.5)
			}
		}
	}
	return m
}

// fixedLoad is a DeviceLoad with given busy streams.
type fixedLoad []int

func (l fixedLoad) Devices() int            { return len(l) }
func (l fixedLoad) BusyStreams(dev int) int { return l[dev] }
func (l fixedLoad) PendingBytes(int) uint64 { return 0 }

func policyFor(t *testing.T, p DevicePolicy, gpus int) DeviceSelectionPolicy {
	t.Helper()
	pol, err := NewDeviceSelectionPolicy(p, dgxMatrix(gpus), 0)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

var topologies = []int{1, 2, 4, 8}

func TestRoundRobin(t *testing.T) {
	for _, n := range topologies {
		pol := policyFor(t, RoundRobin, n)
		for i := range 3 * n {
			if d := pol.SelectDevice(nil, nil, make(fixedLoad, n), NewLocationTracker()); d != i%n {
				t.Errorf("%d GPUs, call %d: device %d", n, i, d)
			}
		}
	}
}

func TestStreamAware(t *testing.T) {
	pol := policyFor(t, StreamAware, 4)
	for _, c := range []struct {
		load fixedLoad
		want int
	}{
		{fixedLoad{3, 1, 2, 4}, 1},
		{fixedLoad{2, 2, 0, 0}, 2}, // lowest on ties
		{fixedLoad{0, 0, 0, 0}, 0},
	} {
		if d := pol.SelectDevice(nil, nil, c.load, nil); d != c.want {
			t.Errorf("load %v: device %d, want %d", c.load, d, c.want)
		}
	}
}

// TestMinTransferSizeByteRanges: the policy counts bytes per range, so two halves of
// one array on two GPUs steer readers of each half to its GPU.
func TestMinTransferSizeByteRanges(t *testing.T) {
	for _, n := range topologies[1:] {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			pol := policyFor(t, MinTransferSize, n)
			loc := NewLocationTracker()
			const size = 1 << 20
			loc.Place(1, 0, size/2, n-1)
			loc.Place(1, size/2, size/4, 0)
			load := make(fixedLoad, n)
			if d := pol.SelectDevice([]Access{acc(1, 0, size/2, Read), acc(2, 0, 1000, Write)}, nil, load, loc); d != n-1 {
				t.Errorf("reader of the first half: device %d, want %d", d, n-1)
			}
			if d := pol.SelectDevice([]Access{acc(1, size/2, size/4, ReadWrite)}, nil, load, loc); d != 0 {
				t.Errorf("reader of the third quarter: device %d, want 0", d)
			}
			// 5% of the bytes read are on a GPU, under the 10% threshold: round-robin.
			loc.Place(3, 0, 50, 1)
			seq := []int{}
			for range n {
				seq = append(seq, pol.SelectDevice([]Access{acc(3, 0, 1000, Read)}, nil, load, loc))
			}
			if want := rrSeq(n); !slices.Equal(seq, want) {
				t.Errorf("below the data threshold: %v, want round-robin %v", seq, want)
			}
		})
	}
}

func rrSeq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestTransferTimePolicies builds a case where the best-link and worst-link estimates
// disagree: X (400 B) is on GPU 0 only; Y (600 B) is on GPU 1 and the host. GPU 0 gets
// Y over a fast link from GPU 1 or a slow one from the host; GPU 1 gets X at a middle
// speed. MINMIN assumes the fast link (GPU 0: 6 < 20), MINMAX the slow one (GPU 1:
// 20 < 60), MIN_TRANSFER_SIZE counts bytes (GPU 1 holds 60%).
func TestTransferTimePolicies(t *testing.T) {
	bw := NewBandwidthMatrix(2)
	bw.Set(1, 0, 100)
	bw.Set(Host, 0, 10)
	bw.Set(0, 1, 20)
	bw.Set(Host, 1, 10)
	loc := NewLocationTracker()
	loc.Place(1, 0, 400, 0)
	loc.Place(2, 0, 600, 1)
	loc.Record([]Access{acc(2, 0, 600, Read)}, Host)
	accs := []Access{acc(1, 0, 400, Read), acc(2, 0, 600, Read)}
	for p, want := range map[DevicePolicy]int{MinMinTransferTime: 0, MinMaxTransferTime: 1, MinTransferSize: 1} {
		pol, err := NewDeviceSelectionPolicy(p, bw, 0)
		if err != nil {
			t.Fatal(err)
		}
		if d := pol.SelectDevice(accs, nil, fixedLoad{0, 0}, loc); d != want {
			t.Errorf("%v: device %d, want %d", p, d, want)
		}
	}
	// Nothing read: round-robin.
	pol, _ := NewDeviceSelectionPolicy(MinMinTransferTime, bw, 0)
	if a, b := pol.SelectDevice(nil, nil, fixedLoad{0, 0}, loc), pol.SelectDevice(nil, nil, fixedLoad{0, 0}, loc); a != 0 || b != 1 {
		t.Errorf("write-only vertices: %d %d, want round-robin", a, b)
	}
	if _, err := NewDeviceSelectionPolicy(MinMaxTransferTime, nil, 0); err == nil {
		t.Error("a transfer-time policy without a matrix")
	}
}

func TestLocationTracker(t *testing.T) {
	bw := dgxMatrix(4)
	loc := NewLocationTracker()
	loc.Record([]Access{acc(1, 0, 100, Write)}, 2)    // [0,100) only on gpu2
	loc.Record([]Access{acc(1, 50, 100, Read)}, 3)    // [50,100) also on gpu3; [100,150) host+gpu3
	loc.Record([]Access{acc(1, 0, 10, Reduce)}, Host) // [0,10) only on the host
	var got []string
	loc.Holders(1, 0, 200, func(off, n uint64, s LocationSet) { got = append(got, fmt.Sprintf("%d+%d%v", off, n, s)) })
	want := []string{"0+10{host}", "10+40{gpu2}", "50+50{gpu2,gpu3}", "100+50{host,gpu3}", "150+50{host}"}
	if !slices.Equal(got, want) {
		t.Errorf("holders %v\nwant %v", got, want)
	}
	// What GPU 0 must fetch to read [0, 200): each piece from its best-linked holder
	// (gpu2 and gpu3 are both 24 GB/s from gpu0; the lower one wins ties; the host is
	// 12), pieces from one source merged; writes need nothing.
	moves := loc.Missing([]Access{acc(1, 0, 200, Read), acc(2, 0, 64, Write)}, 0, bw)
	wantMoves := []Move{
		{Array: 1, Off: 0, Len: 10, From: Host, To: 0},
		{Array: 1, Off: 10, Len: 90, From: 2, To: 0},
		{Array: 1, Off: 100, Len: 50, From: 3, To: 0},
		{Array: 1, Off: 150, Len: 50, From: Host, To: 0},
	}
	if !slices.Equal(moves, wantMoves) {
		t.Errorf("moves %+v\nwant %+v", moves, wantMoves)
	}
	if m := loc.Missing([]Access{acc(1, 50, 50, Read)}, 3, bw); len(m) != 0 {
		t.Errorf("moves to a holder: %+v", m)
	}
	present, total := loc.Present([]Access{acc(1, 0, 200, Read)}, 4)
	if total != 200 || !slices.Equal(present, []uint64{110, 0, 0, 90, 100}) {
		t.Errorf("present %v of %d", present, total)
	}
	loc.Record([]Access{acc(1, 0, 200, Write)}, Host)
	if len(loc.arrays) != 0 {
		t.Errorf("all bytes back on the host, but %d arrays tracked", len(loc.arrays))
	}
}

// partitionedProgram is a multi-GPU pattern: n partitions of one array written by n
// vertices, then each partition read (in reverse order) into a second array.
func partitionedProgram(n int) [][]Access {
	const part = 1 << 16
	var prog [][]Access
	for p := range n {
		prog = append(prog, []Access{acc(1, uint64(p)*part, part, Write)})
	}
	for p := n - 1; p >= 0; p-- {
		prog = append(prog, []Access{acc(1, uint64(p)*part, part, Read), acc(2, uint64(p)*part, part, Write)})
	}
	return prog
}

// TestDevicePoliciesOnTopologies runs the partitioned program through graphs of 1, 2,
// 4 and 8 simulated GPUs. Each reader has one parent, its partition's writer: the
// parent-stream policies that inherit keep it on the writer's device whatever the
// device policy (no moves); where the device policy chooses first
// (multigpu-early-disjoint), the data-aware policies put each reader where its
// partition is, and round-robin does not (when there is more than one GPU).
func TestDevicePoliciesOnTopologies(t *testing.T) {
	for _, n := range topologies {
		for ps := SameAsParent; ps <= MultiGPUDisjoint; ps++ {
			for p := RoundRobin; p <= MinMaxTransferTime; p++ {
				t.Run(fmt.Sprintf("%dgpu/%v/%v", n, ps, p), func(t *testing.T) {
					lanes := make([]Lane, n)
					for i := range lanes {
						lanes[i] = &manualLane{name: fmt.Sprint("gpu", i)}
					}
					g := newGraph(t, Options{GPUs: n, GPULanes: lanes, DeviceSelection: p, ParentStream: ps, Bandwidth: dgxMatrix(n)})
					var vs []*Vertex
					for _, a := range partitionedProgram(n) {
						v, err := g.Add(Task{Kind: KindGPU, Accesses: a})
						if err != nil {
							t.Fatal(err)
						}
						vs = append(vs, v)
					}
					moved := 0
					for i, v := range vs[n:] {
						writer := vs[n-1-i]
						if len(v.Moves()) > 0 {
							moved++
							if m := v.Moves()[0]; m.From != writer.Device() || m.To != v.Device() || m.Len != 1<<16 {
								t.Errorf("reader %d moves %+v, writer on %d", v.ID(), v.Moves(), writer.Device())
							}
						} else if v.Device() != writer.Device() {
							t.Errorf("reader %d on %d without a move, data on %d", v.ID(), v.Device(), writer.Device())
						}
					}
					switch {
					case ps != MultiGPUEarlyDisjoint && moved != 0:
						t.Errorf("%v moved %d partitions: a reader left its writer's device", ps, moved)
					case ps != MultiGPUEarlyDisjoint || p == StreamAware:
						// Placement follows load, not data: nothing to check beyond moves.
					case p != RoundRobin && moved != 0:
						t.Errorf("%v moved %d partitions", p, moved)
					case p == RoundRobin && n > 1 && moved == 0:
						t.Errorf("round-robin moved nothing: the test does not tell policies apart")
					}
					for _, l := range lanes {
						l.(*manualLane).endAll()
					}
					for _, l := range lanes {
						l.(*manualLane).endAll()
					}
				})
			}
		}
	}
}

// TestOneGPUSameScheduleForEveryPolicy: with one GPU, every device policy must give
// the one-GPU schedule: the same device, stream and waits for every vertex of a
// random program as round-robin (which, on one GPU, is the single-GPU policy).
func TestOneGPUSameScheduleForEveryPolicy(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 3))
		var prog [][]Access
		for range 80 {
			var accs []Access
			for range 1 + rng.IntN(3) {
				off := uint64(rng.IntN(256))
				accs = append(accs, acc(ArrayID(rng.IntN(3)), off, uint64(1+rng.IntN(64)), Mode(1+rng.IntN(4))))
			}
			prog = append(prog, accs)
		}
		var ref []string
		for p := RoundRobin; p <= MinMaxTransferTime; p++ {
			gpu := chainingManual{&manualLane{name: "gpu0"}}
			gpu.chain = func(p, v *Vertex) bool { return true }
			g := newGraph(t, Options{GPUs: 1, GPULanes: []Lane{gpu}, DeviceSelection: p, Bandwidth: dgxMatrix(1), MaxStreamsPerDevice: 4})
			var sched []string
			for _, a := range prog {
				v, err := g.Add(Task{Kind: KindGPU, Accesses: a})
				if err != nil {
					t.Fatal(err)
				}
				s, _ := v.Stream()
				var waits []VertexID
				for _, w := range v.Waits() {
					waits = append(waits, w.Parent.ID())
				}
				sched = append(sched, fmt.Sprintf("%d:%v:%v", v.ID(), s, waits))
				if v.Device() != 0 {
					t.Fatalf("%v put vertex %d on device %d of 1", p, v.ID(), v.Device())
				}
			}
			if ref == nil {
				ref = sched
			} else if !slices.Equal(ref, sched) {
				t.Errorf("seed %d: %v gives another schedule:\n%v\nround-robin:\n%v", seed, p, sched, ref)
			}
			gpu.endAll()
		}
	}
}

// uniformMatrix returns a matrix with every link (host included) at 10 GB/s.
func uniformMatrix(gpus int) *BandwidthMatrix {
	m := NewBandwidthMatrix(gpus)
	for i := Host; i < gpus; i++ {
		for j := Host; j < gpus; j++ {
			if i != j {
				m.Set(i, j, 10)
			}
		}
	}
	return m
}

// TestDataAwarePoliciesTiesAndFallback pins GrCUDA's choices where the data says
// nothing or says it twice (MinimizeTransferSizeDeviceSelectionPolicy and
// TransferTimeDeviceSelectionPolicy, retrieveImpl): with every byte read on the host
// the data-aware policies rotate like round-robin, a pick made from the data leaves
// that rotation where it was, and two GPUs holding the same bytes (or the same
// transfer time) go to the lower-numbered one.
func TestDataAwarePoliciesTiesAndFallback(t *testing.T) {
	const gpus = 4
	for _, p := range []DevicePolicy{MinTransferSize, MinMinTransferTime, MinMaxTransferTime} {
		t.Run(p.String(), func(t *testing.T) {
			pol, err := NewDeviceSelectionPolicy(p, uniformMatrix(gpus), 0)
			if err != nil {
				t.Fatal(err)
			}
			load := make(fixedLoad, gpus)
			loc := NewLocationTracker()
			onHost := []Access{acc(1, 0, 1000, Read), acc(2, 0, 50, Write)}
			var seq []int
			for range gpus + 1 {
				seq = append(seq, pol.SelectDevice(onHost, nil, load, loc))
			}
			if want := []int{0, 1, 2, 3, 0}; !slices.Equal(seq, want) {
				t.Errorf("every byte on the host: %v, want round-robin %v", seq, want)
			}
			// Array 3 wholly on GPU 2: a data pick, not a turn of the rotation.
			loc.Place(3, 0, 1000, 2)
			if d := pol.SelectDevice([]Access{acc(3, 0, 1000, Read)}, nil, load, loc); d != 2 {
				t.Errorf("data on GPU 2: device %d", d)
			}
			if d := pol.SelectDevice(onHost, nil, load, loc); d != 1 {
				t.Errorf("on the host after a data pick: device %d, want 1 (the rotation goes on)", d)
			}
			// Equal halves on GPUs 3 and 1: the lower.
			loc.Place(4, 0, 500, 3)
			loc.Place(4, 500, 500, 1)
			if d := pol.SelectDevice([]Access{acc(4, 0, 1000, Read)}, nil, load, loc); d != 1 {
				t.Errorf("equal bytes on GPUs 1 and 3: device %d, want 1", d)
			}
			// Equal halves on GPUs 2 and 0, both also on the host: still the lower.
			loc.Place(5, 0, 500, 2)
			loc.Place(5, 500, 500, 0)
			loc.Record([]Access{acc(5, 0, 1000, Read)}, Host)
			if d := pol.SelectDevice([]Access{acc(5, 0, 1000, Read)}, nil, load, loc); d != 0 {
				t.Errorf("equal bytes on GPUs 0 and 2 and the host: device %d, want 0", d)
			}
		})
	}
}

// TestTransferTimeMissingLink: GrCUDA's computeBandwidth reduces the links from the
// holders with max (MINMIN) or min (MINMAX), a missing link being 0 GB/s. X (500 B)
// is on GPU 0; Y (500 B) on GPU 1 and the host; GPU 1 has no link to GPU 0. MINMAX
// counts Y's copy to GPU 0 over the missing link (infinite) and picks GPU 1 (X over
// 5 GB/s: 100); MINMIN takes the host's 10 GB/s (GPU 0: 50). With no link either way
// both GPUs are infinite for MINMAX: the lower one.
func TestTransferTimeMissingLink(t *testing.T) {
	bw := NewBandwidthMatrix(2)
	bw.Set(Host, 0, 10)
	bw.Set(Host, 1, 10)
	bw.Set(0, 1, 5)
	loc := NewLocationTracker()
	loc.Place(1, 0, 500, 0)
	loc.Place(2, 0, 500, 1)
	loc.Record([]Access{acc(2, 0, 500, Read)}, Host)
	accs := []Access{acc(1, 0, 500, Read), acc(2, 0, 500, Read)}
	for p, want := range map[DevicePolicy]int{MinMinTransferTime: 0, MinMaxTransferTime: 1} {
		pol, err := NewDeviceSelectionPolicy(p, bw, 0)
		if err != nil {
			t.Fatal(err)
		}
		if d := pol.SelectDevice(accs, nil, fixedLoad{0, 0}, loc); d != want {
			t.Errorf("%v: device %d, want %d", p, d, want)
		}
	}
	bw.Set(0, 1, 0)
	pol, _ := NewDeviceSelectionPolicy(MinMaxTransferTime, bw, 0)
	if d := pol.SelectDevice(accs, nil, fixedLoad{0, 0}, loc); d != 0 {
		t.Errorf("both times infinite: device %d, want 0", d)
	}
}

// TestRoundRobinAmongDevices: asked among some devices, round-robin takes the one its
// position indexes modulo their number, and its position counts over every device, as
// GrCUDA's does.
func TestRoundRobinAmongDevices(t *testing.T) {
	pol := policyFor(t, RoundRobin, 4)
	var got []int
	for _, among := range [][]int{{1, 3}, {1, 3}, nil, {1, 3}, {2}, nil} {
		got = append(got, pol.SelectDevice(nil, among, make(fixedLoad, 4), nil))
	}
	if want := []int{1, 3, 2, 3, 2, 1}; !slices.Equal(got, want) {
		t.Errorf("round-robin chose %v, want %v", got, want)
	}
}

// TestPinnedArraysStayWhereTheyAre: device memory written or read from another GPU
// stays on its GPU for the data-aware policies (before, a kernel on GPU 1 writing GPU
// 0's device memory through peer access moved it to GPU 1 in the tracker, and the
// next reader followed the phantom copy); managed memory still moves with the work.
func TestPinnedArraysStayWhereTheyAre(t *testing.T) {
	lanes := []Lane{&manualLane{name: "gpu0"}, &manualLane{name: "gpu1"}, &manualLane{name: "gpu2"}}
	g := newGraph(t, Options{GPUs: 3, GPULanes: lanes, DeviceSelection: MinTransferSize, ParentStream: MultiGPUEarlyDisjoint})
	const size = 1 << 20
	g.Describe(1, size, 0, false) // device memory of GPU 0
	g.Describe(2, size, 2, true)  // managed, now on GPU 2
	// A kernel placed by its other input (array 2, on GPU 2) writes array 1 there.
	w, err := g.Add(Task{Kind: KindGPU, Accesses: []Access{acc(2, 0, size, Read), acc(2, 0, size, Write), acc(1, 0, size, Write)}})
	if err != nil || w.Device() != 2 {
		t.Fatalf("writer on %d (%v), want 2, where array 2 is", w.Device(), err)
	}
	r, _ := g.Add(Task{Kind: KindGPU, Accesses: []Access{acc(1, 0, size, Read), acc(3, 0, 8, Write)}})
	if r.Device() != 0 {
		t.Errorf("reader of GPU 0's device memory on %d, want 0 (the write from GPU 2 left it there)", r.Device())
	}
	m, _ := g.Add(Task{Kind: KindGPU, Accesses: []Access{acc(2, 0, size, Read), acc(4, 0, 8, Write)}})
	if m.Device() != 2 {
		t.Errorf("reader of the managed array on %d, want 2 (where the writer left it)", m.Device())
	}
	g.Forget(1)
	g.Describe(1, size, 1, true) // the id reused for managed memory on GPU 1: it moves again
	x, _ := g.Add(Task{Kind: KindGPU, Accesses: []Access{acc(1, 0, size, Read), acc(5, 0, 8, Write)}})
	if x.Device() != 1 {
		t.Errorf("reader after the id was described again on %d, want 1", x.Device())
	}
	for _, l := range lanes {
		l.(*manualLane).endAll()
	}
}
