package dag

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// The oracle: random programs of host and (simulated) GPU operations on a few byte
// arrays, through slices that may overlap, run by the graph with the Async policy and
// with the Sync policy, and directly in program order. The final bytes must be
// identical. The race detector watches the same runs: a missing edge between two
// operations touching one byte is a reported race even when the bytes come out right.

const (
	oracleArrays = 3
	oracleSize   = 96
)

type opKind uint8

const (
	opCopy   opKind = iota // dst = src
	opAdd                  // dst += src
	opXor                  // dst ^= src
	opReduce               // dst += src, as a commutative reduction (Reduce mode)
	opFill                 // dst = c
	opKinds
)

type oracleOp struct {
	kind             opKind
	src, dst         ArrayID
	srcOff, dstOff   uint64
	n                uint64
	c                byte
	gpu              bool // a KindGPU vertex on the simulated streams
	hostLane         int  // which host lane, for host ops
	yield            bool // yield mid-operation, to shuffle interleavings
	srcMode, dstMode Mode
}

// oracleMem is the arrays an execution works on, and the locks that make concurrent
// reductions into one array safe (the graph does not order them: Reduce).
type oracleMem struct {
	arr   [oracleArrays][]byte
	locks [oracleArrays]sync.Mutex
}

func (op *oracleOp) accesses() []Access {
	accs := []Access{acc(op.dst, op.dstOff, op.n, op.dstMode)}
	if op.srcMode != 0 {
		accs = append(accs, acc(op.src, op.srcOff, op.n, op.srcMode))
	}
	return accs
}

// apply runs the operation on m.
func (op *oracleOp) apply(m *oracleMem) {
	dst := m.arr[op.dst][op.dstOff : op.dstOff+op.n]
	var src []byte
	if op.srcMode != 0 {
		src = m.arr[op.src][op.srcOff : op.srcOff+op.n]
	}
	half := int(op.n / 2)
	for i := range dst {
		if op.yield && i == half {
			runtime.Gosched()
		}
		switch op.kind {
		case opCopy:
			// Overlapping copy within one array: like memmove, read all first.
			if i == 0 {
				copy(dst, append([]byte(nil), src...))
			}
		case opAdd:
			dst[i] += src[i]
		case opXor:
			dst[i] ^= src[i]
		case opReduce:
			m.locks[op.dst].Lock()
			dst[i] += src[i]
			m.locks[op.dst].Unlock()
		case opFill:
			dst[i] = op.c
		}
	}
}

func randomProgram(rng *rand.Rand, n int, gpus, hostLanes int) []oracleOp {
	ops := make([]oracleOp, n)
	for i := range ops {
		op := oracleOp{
			kind:     opKind(rng.IntN(int(opKinds))),
			src:      ArrayID(rng.IntN(oracleArrays)),
			dst:      ArrayID(rng.IntN(oracleArrays)),
			n:        uint64(1 + rng.IntN(oracleSize/2)),
			c:        byte(rng.Uint32()),
			gpu:      gpus > 0 && rng.IntN(2) == 0,
			hostLane: rng.IntN(hostLanes),
			yield:    rng.IntN(4) == 0,
		}
		op.srcOff = uint64(rng.IntN(oracleSize - int(op.n) + 1))
		op.dstOff = uint64(rng.IntN(oracleSize - int(op.n) + 1))
		switch op.kind {
		case opCopy:
			op.srcMode, op.dstMode = Read, Write
		case opAdd, opXor:
			op.srcMode, op.dstMode = Read, ReadWrite
		case opReduce:
			op.srcMode, op.dstMode = Read, Reduce
			// Many reductions into few places, to exercise concurrent reducers.
			op.dstOff = uint64(rng.IntN(4)) * 8
			op.n = min(op.n, oracleSize-op.dstOff, oracleSize-op.srcOff)
		case opFill:
			op.dstMode = Write
		}
		ops[i] = op
	}
	return ops
}

func initialMem(seed uint64) *oracleMem {
	m := &oracleMem{}
	rng := rand.New(rand.NewPCG(seed, 99))
	for a := range m.arr {
		m.arr[a] = make([]byte, oracleSize)
		for i := range m.arr[a] {
			m.arr[a][i] = byte(rng.Uint32())
		}
	}
	return m
}

// runOnGraph runs the program through a graph configured by opts (lanes filled in
// here) and returns the final memory.
//
// With deferring, the simulated GPU lanes defer every third vertex (by id) to a
// launcher, as core/execution's lanes do with vertices that prefetch: a goroutine
// per lane, or (seeds 3 mod 4) one shared by all lanes.
func runOnGraph(t *testing.T, seed uint64, ops []oracleOp, opts Options, hostLanes int, deferring bool) *oracleMem {
	t.Helper()
	m := initialMem(seed)
	lanes := make([]*HostLane, hostLanes)
	for i := range lanes {
		lanes[i] = NewHostLane(fmt.Sprintf("host%d", i), 1+i%2)
	}
	var sim *simGPUs
	var launch *Launcher[*simGPULane]
	var launched *atomic.Int64
	if opts.GPUs > 0 {
		sim = newSimGPUs(opts.GPUs)
		opts.GPULanes = sim.Lanes()
		if deferring {
			opts.GPULanes, launch, launched = deferringLanes(sim, seed%4 == 3, func(v *Vertex) bool { return v.ID()%3 == 0 })
		}
		opts.StreamPool = sim
	}
	g := newGraph(t, opts)
	for i := range ops {
		op := &ops[i]
		task := Task{Name: fmt.Sprint(i), Accesses: op.accesses()}
		if op.gpu {
			task.Kind = KindGPU
			task.Payload = func() error { op.apply(m); return nil }
		} else {
			task.Lane = lanes[op.hostLane]
			task.Run = func() error { op.apply(m); return nil }
		}
		if _, err := g.Add(task); err != nil {
			t.Fatal(err)
		}
	}
	waitIdle(t, g)
	if launch != nil {
		launch.Wait()
		gpuOps := 0
		for i := range ops {
			if ops[i].gpu {
				gpuOps++
			}
		}
		if gpuOps >= 3 && launched.Load() == 0 {
			t.Errorf("%d GPU vertices, none deferred", gpuOps)
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	for _, l := range lanes {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if sim != nil {
		sim.Close()
		for _, p := range sim.problems {
			t.Error(p)
		}
	}
	if s := g.Stats(); s.Active != 0 || s.Segments != 0 || s.BusyStreams != 0 {
		t.Errorf("graph not empty after the program: %+v", s)
	}
	return m
}

func TestOracleAsyncMatchesSync(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 40
	}
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 7))
		const hostLanes = 3
		gpus := []int{0, 1, 2, 3}[rng.IntN(4)]
		opts := Options{
			Dependency:          DependencyPolicy(rng.IntN(2)),
			NewStream:           NewStreamPolicy(rng.IntN(2)),
			ParentStream:        ParentStreamPolicy(rng.IntN(4)),
			DeviceSelection:     DevicePolicy(rng.IntN(3)), // the transfer-time ones need a matrix
			GPUs:                gpus,
			MaxStreamsPerDevice: 1 + rng.IntN(4),
		}
		ops := randomProgram(rng, 40+rng.IntN(120), gpus, hostLanes)
		deferring := seed%2 == 1
		name := fmt.Sprintf("seed%d/%dgpu/%v/%v/%v/%v/deferring=%t", seed, gpus, opts.Dependency, opts.NewStream, opts.ParentStream, opts.DeviceSelection, deferring)
		ok := t.Run(name, func(t *testing.T) {
			want := initialMem(seed)
			for i := range ops {
				ops[i].apply(want)
			}
			async := runOnGraph(t, seed, ops, opts, hostLanes, deferring)
			opts.Execution = Sync
			sync := runOnGraph(t, seed, ops, opts, hostLanes, deferring)
			for a := range want.arr {
				if !bytes.Equal(async.arr[a], sync.arr[a]) {
					t.Errorf("array %d: async %x\nsync %x", a, async.arr[a], sync.arr[a])
				}
				if !bytes.Equal(sync.arr[a], want.arr[a]) {
					t.Errorf("array %d: sync %x\nprogram order %x", a, sync.arr[a], want.arr[a])
				}
			}
		})
		if !ok {
			break // one failing program is enough to read
		}
	}
}
