package execution

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/core"
	"github.com/ucxx-go/ucxx-go/core/dag"
	"github.com/ucxx-go/ucxx-go/notifier"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// The oracle on a real GPU (core/dag's oracle_test.go runs the same idea on simulated
// streams): random programs of kernels, device copies, copies between host and device,
// host functions, host accesses and send/receive pairs through a peer, over slices of
// three device arrays and one host array that may overlap, run through a context with
// random stream policies, asynchronously and with the Sync policy. After every host
// access and at the end, the bytes must be what running the program in order gives.
// A missing edge shows as a kernel or copy that ran beside one it should have
// followed, on another stream.

const (
	gpuOracleDevArrays = 3
	gpuOracleWords     = 1 << 18 // 1 MiB an array: kernels long enough to overlap
	gpuOracleHost      = dag.ArrayID(10)
)

type gpuOpKind uint8

const (
	gpuOpAddOne   gpuOpKind = iota // kernel: dev[dst] += 1
	gpuOpDevCopy                   // dev[dst] = dev[src] on a stream
	gpuOpToHost                    // host[dst] = dev[src] on a stream
	gpuOpToDevice                  // dev[dst] = host[src] on a stream
	gpuOpHostFill                  // host[dst] = c, a host function
	gpuOpHostAdd                   // host[dst] += c, a host function
	gpuOpAccess                    // the host reads host[dst] and checks it
	gpuOpEcho                      // dev[dst] = dev[src], sent to a peer and received back
	gpuOpKinds
)

type gpuOracleOp struct {
	kind           gpuOpKind
	srcArr, dstArr int // device arrays
	src, dst, n    int // word offsets and count
	c              uint32
}

// gpuOracleMem is the program-order model: the words of every array.
type gpuOracleMem struct {
	dev  [gpuOracleDevArrays][]uint32
	host []uint32
}

func (m *gpuOracleMem) apply(op *gpuOracleOp) {
	switch op.kind {
	case gpuOpAddOne:
		for i := range op.n {
			m.dev[op.dstArr][op.dst+i]++
		}
	case gpuOpDevCopy, gpuOpEcho:
		copy(m.dev[op.dstArr][op.dst:op.dst+op.n], m.dev[op.srcArr][op.src:op.src+op.n])
	case gpuOpToHost:
		copy(m.host[op.dst:op.dst+op.n], m.dev[op.srcArr][op.src:op.src+op.n])
	case gpuOpToDevice:
		copy(m.dev[op.dstArr][op.dst:op.dst+op.n], m.host[op.src:op.src+op.n])
	case gpuOpHostFill:
		for i := range op.n {
			m.host[op.dst+i] = op.c
		}
	case gpuOpHostAdd:
		for i := range op.n {
			m.host[op.dst+i] += op.c
		}
	}
}

// randomGPUProgram makes n ops. A copy within one array never overlaps itself
// (cuMemcpyAsync's ranges may not), everything else may overlap anything.
func randomGPUProgram(rng *rand.Rand, n int) []gpuOracleOp {
	ops := make([]gpuOracleOp, n)
	for i := range ops {
		op := gpuOracleOp{
			kind:   gpuOpKind(rng.IntN(int(gpuOpKinds))),
			srcArr: rng.IntN(gpuOracleDevArrays),
			dstArr: rng.IntN(gpuOracleDevArrays),
			n:      1 + rng.IntN(gpuOracleWords/2),
			c:      rng.Uint32(),
		}
		op.src = rng.IntN(gpuOracleWords - op.n + 1)
		op.dst = rng.IntN(gpuOracleWords - op.n + 1)
		if op.kind == gpuOpDevCopy && op.srcArr == op.dstArr && op.src < op.dst+op.n && op.dst < op.src+op.n {
			op.dstArr = (op.srcArr + 1) % gpuOracleDevArrays
		}
		ops[i] = op
	}
	return ops
}

// gpuOracleRun runs ops through one context and checks every host access and the end.
type gpuOracleRun struct {
	c        *Context
	k        *Kernel
	dev      [gpuOracleDevArrays]uintptr
	host     []uint32
	cep, sep uint64
	server   *core.Engine
	echoes   chan gpuEcho
	echoDone chan error
	want     *gpuOracleMem
	nextTag  uint64
}

type gpuEcho struct {
	tag  uint64
	size uint64
}

func words(p uintptr, off int) uintptr { return p + uintptr(4*off) }

func (r *gpuOracleRun) devAcc(a, off, n int, m dag.Mode) dag.Access {
	return acc(dag.ArrayID(1+a), uint64(4*off), uint64(4*n), m)
}

func (r *gpuOracleRun) hostAcc(off, n int, m dag.Mode) dag.Access {
	return acc(gpuOracleHost, uint64(4*off), uint64(4*n), m)
}

func (r *gpuOracleRun) add(i int, op *gpuOracleOp) error {
	name := fmt.Sprintf("op%d", i)
	hostAddr := uintptr(unsafe.Pointer(unsafe.SliceData(r.host)))
	var err error
	switch op.kind {
	case gpuOpAddOne:
		shape := ucxx.LaunchShape{Grid: [3]uint32{uint32(op.n+255) / 256, 1, 1}, Block: [3]uint32{256, 1, 1}}
		_, err = r.c.Launch(name, &KernelLaunch{Kernel: r.k, Shape: shape, Args: []uint64{uint64(words(r.dev[op.dstArr], op.dst)), uint64(op.n)}},
			[]dag.Access{r.devAcc(op.dstArr, op.dst, op.n, dag.ReadWrite)})
	case gpuOpDevCopy:
		_, err = r.c.Copy(words(r.dev[op.dstArr], op.dst), words(r.dev[op.srcArr], op.src), uint64(4*op.n), true,
			[]dag.Access{r.devAcc(op.srcArr, op.src, op.n, dag.Read), r.devAcc(op.dstArr, op.dst, op.n, dag.Write)})
	case gpuOpToHost:
		_, err = r.c.Copy(words(hostAddr, op.dst), words(r.dev[op.srcArr], op.src), uint64(4*op.n), true,
			[]dag.Access{r.devAcc(op.srcArr, op.src, op.n, dag.Read), r.hostAcc(op.dst, op.n, dag.Write)})
	case gpuOpToDevice:
		_, err = r.c.Copy(words(r.dev[op.dstArr], op.dst), words(hostAddr, op.src), uint64(4*op.n), true,
			[]dag.Access{r.hostAcc(op.src, op.n, dag.Read), r.devAcc(op.dstArr, op.dst, op.n, dag.Write)})
	case gpuOpHostFill, gpuOpHostAdd:
		h, kind, dst, n, c := r.host, op.kind, op.dst, op.n, op.c
		mode := dag.Write
		if kind == gpuOpHostAdd {
			mode = dag.ReadWrite
		}
		_, err = r.c.Host(name, func() error {
			for j := dst; j < dst+n; j++ {
				if kind == gpuOpHostFill {
					h[j] = c
				} else {
					h[j] += c
				}
			}
			return nil
		}, nil, nil, []dag.Access{r.hostAcc(dst, n, mode)})
	case gpuOpAccess:
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err = r.c.Access(ctx, []dag.Access{r.hostAcc(op.dst, op.n, dag.Read)}); err != nil {
			return err
		}
		for j := op.dst; j < op.dst+op.n; j++ {
			if r.host[j] != r.want.host[j] {
				return fmt.Errorf("host access after op %d: word %d is %#x, want %#x", i, j, r.host[j], r.want.host[j])
			}
		}
	case gpuOpEcho:
		r.nextTag++
		tag, size := r.nextTag, uint64(4*op.n)
		r.echoes <- gpuEcho{tag: tag, size: size}
		if _, err = r.c.Transfer(name+" send", &Send{EP: r.cep, Addr: words(r.dev[op.srcArr], op.src), Size: size, Tag: tag, MemType: ucxx.MemoryCUDA},
			[]dag.Access{r.devAcc(op.srcArr, op.src, op.n, dag.Read)}); err != nil {
			return err
		}
		_, err = r.c.Transfer(name+" recv", &Recv{EP: r.cep, Addr: words(r.dev[op.dstArr], op.dst), Size: size, Tag: tag | 1<<40, Mask: ^uint64(0), MemType: ucxx.MemoryCUDA},
			[]dag.Access{r.devAcc(op.dstArr, op.dst, op.n, dag.Write)})
	}
	return err
}

// echo sends back, in order, what the context's sends bring (tag | 1<<40).
func (r *gpuOracleRun) echo() {
	buf := make([]byte, 4*gpuOracleWords)
	base := addr(buf) // held past a completion that never came (the engine may still write it)
	for e := range r.echoes {
		id, err := r.server.TagRecv(r.sep, base, e.size, e.tag, ^uint64(0), ucxx.MemoryHost, 0)
		if err == nil {
			err = r.completion(id, "echo receive")
		}
		if err == nil {
			id, err = r.server.TagSend(r.sep, base, e.size, e.tag|1<<40, ucxx.MemoryHost, 0)
			if err == nil {
				err = r.completion(id, "echo send")
			}
		}
		if err != nil {
			r.echoDone <- err
			for range r.echoes {
			}
			return
		}
	}
	r.echoDone <- nil
}

// completion waits for the server's completion of id (queueWait, for a goroutine
// that is not the test's).
func (r *gpuOracleRun) completion(id uint64, what string) error {
	var buf [16]notifier.Completion
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		n := r.server.Queue().Pop(buf[:])
		for _, c := range buf[:n] {
			if c.ID == id {
				if c.Status != 0 {
					return fmt.Errorf("%s: %v", what, ucxx.Status(c.Status))
				}
				return nil
			}
		}
		if n == 0 {
			r.server.Queue().Wait(50 * time.Millisecond)
		}
	}
	return fmt.Errorf("%s: no completion in 30 s", what)
}

func runGPUProgram(t *testing.T, d *ucxx.CUDADriver, seed uint64, ops []gpuOracleOp, graph dag.Options) {
	client, server, cep, sep := enginePair(t)
	c := newContext(t, Options{Devices: []int{0}, Engine: client, Graph: graph})
	r := &gpuOracleRun{c: c, k: addOne(t, c), cep: cep, sep: sep, server: server,
		echoes: make(chan gpuEcho, len(ops)), echoDone: make(chan error, 1)}
	r.want = &gpuOracleMem{host: make([]uint32, gpuOracleWords)}
	rng := rand.New(rand.NewPCG(seed, 5))
	for a := range r.dev {
		r.dev[a] = deviceWords(t, d, gpuOracleWords) // 0..n-1
		r.want.dev[a] = make([]uint32, gpuOracleWords)
		for i := range r.want.dev[a] {
			r.want.dev[a][i] = uint32(i)
		}
	}
	r.host = make([]uint32, gpuOracleWords)
	for i := range r.host {
		r.host[i] = rng.Uint32()
		r.want.host[i] = r.host[i]
	}
	go r.echo()
	for i := range ops {
		r.want.apply(&ops[i])
		if err := r.add(i, &ops[i]); err != nil {
			close(r.echoes)
			t.Fatalf("op %d (%+v): %v", i, ops[i], err)
		}
	}
	close(r.echoes)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Synchronize(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-r.echoDone; err != nil {
		t.Fatal(err)
	}
	for j := range r.host {
		if r.host[j] != r.want.host[j] {
			t.Fatalf("host word %d: %#x, want %#x", j, r.host[j], r.want.host[j])
		}
	}
	for a := range r.dev {
		got := readWords(t, d, r.dev[a], gpuOracleWords)
		for j := range got {
			if got[j] != r.want.dev[a][j] {
				t.Fatalf("device array %d word %d: %#x, want %#x", a, j, got[j], r.want.dev[a][j])
			}
		}
	}
	if s := c.Graph().Stats(); s.Active != 0 {
		t.Errorf("vertices still active after the program: %+v", s)
	}
}

// TestGPUOracleAsyncMatchesProgramOrder: random programs on the GPU, each policy
// combination asynchronous and serial, against the program order.
func TestGPUOracleAsyncMatchesProgramOrder(t *testing.T) {
	d := needGPU(t)
	seeds := 24
	if testing.Short() {
		seeds = 6
	}
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 11))
		graph := dag.Options{
			Dependency:          dag.DependencyPolicy(rng.IntN(2)),
			NewStream:           dag.NewStreamPolicy(rng.IntN(2)),
			ParentStream:        dag.ParentStreamPolicy(rng.IntN(4)),
			MaxStreamsPerDevice: 1 + rng.IntN(6),
		}
		ops := randomGPUProgram(rng, 30+rng.IntN(70))
		for _, exec := range []dag.ExecutionPolicy{dag.Async, dag.Sync} {
			graph.Execution = exec
			name := fmt.Sprintf("seed%d/%v/%v/%v/%v/streams%d", seed, exec, graph.Dependency, graph.NewStream, graph.ParentStream, graph.MaxStreamsPerDevice)
			if !t.Run(name, func(t *testing.T) { runGPUProgram(t, d, seed, ops, graph) }) {
				return // one failing program is enough to read
			}
		}
	}
}
