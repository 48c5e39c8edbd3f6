package execution

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/core/dag"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// GPU tests: they skip where there is no CUDA driver or device.

func needGPU(t *testing.T) *ucxx.CUDADriver {
	t.Helper()
	d, err := ucxx.CUDA()
	if errors.Is(err, ucxx.ErrNoCUDA) {
		t.Skipf("no CUDA: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// deviceWords allocates n 32-bit words on device 0 holding 0..n-1; freed by the test.
func deviceWords(t *testing.T, d *ucxx.CUDADriver, n int) uintptr {
	t.Helper()
	cu, err := d.RetainPrimary(0)
	if err != nil {
		t.Fatal(err)
	}
	var p uintptr
	host := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(host[4*i:], uint32(i))
	}
	if err := cu.Use(func() (err error) {
		if p, err = d.MemAlloc(uint64(4 * n)); err != nil {
			return err
		}
		return d.CopyToDevice(p, host)
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cu.Use(func() error { return d.MemFree(p) }); cu.Release() })
	return p
}

func readWords(t *testing.T, d *ucxx.CUDADriver, p uintptr, n int) []uint32 {
	t.Helper()
	cu, _ := d.RetainPrimary(0)
	defer cu.Release()
	host := make([]byte, 4*n)
	if err := cu.Use(func() error { return d.CopyFromDevice(host, p) }); err != nil {
		t.Fatal(err)
	}
	w := make([]uint32, n)
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(host[4*i:])
	}
	return w
}

func addOne(t testing.TB, c *Context) *Kernel {
	t.Helper()
	ptx, err := os.ReadFile("../../ucxx/testdata/add_one.ptx")
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.LoadModule(ptx)
	if err != nil {
		t.Fatal(err)
	}
	k, err := m.Kernel("add_one")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Kernel("no_such"); err == nil {
		t.Fatal("a kernel the module lacks was found")
	}
	return k
}

func launchAddOne(t *testing.T, c *Context, k *Kernel, p uintptr, first, n int, a dag.ArrayID, more ...dag.Access) *dag.Vertex {
	t.Helper()
	shape := ucxx.LaunchShape{Grid: [3]uint32{uint32(n+255) / 256, 1, 1}, Block: [3]uint32{256, 1, 1}}
	v, err := c.Launch("add_one", &KernelLaunch{Kernel: k, Shape: shape, Args: []uint64{uint64(p) + uint64(4*first), uint64(n)}},
		append([]dag.Access{acc(a, uint64(4*first), uint64(4*n), dag.ReadWrite)}, more...))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestKernelsOnStreams: kernels on disjoint halves of one array have no edge between
// them and, while the first is held on the GPU (behind a receive nobody has sent to
// yet), the second goes to another stream and runs; a kernel on the whole array
// follows both; the host's access waits for it.
func TestKernelsOnStreams(t *testing.T) {
	d := needGPU(t)
	client, server, cep, sep := enginePair(t)
	c := newContext(t, Options{Devices: []int{0}, Engine: client, Graph: dag.Options{Timings: true}})
	k := addOne(t, c)
	const n = 1 << 20
	p := deviceWords(t, d, n)
	gate := make([]byte, 8)
	if _, err := c.Transfer("gate", &Recv{EP: cep, Addr: addr(gate), Size: 8, Tag: 5, Mask: ^uint64(0), MemType: ucxx.MemoryHost},
		[]dag.Access{acc(arrB, 0, 8, dag.Write)}); err != nil {
		t.Fatal(err)
	}
	lo := launchAddOne(t, c, k, p, 0, n/2, arrA, acc(arrB, 0, 8, dag.Read))
	hi := launchAddOne(t, c, k, p, n/2, n/2, arrA)
	if err := hi.Wait(context.Background()); err != nil || lo.State() != dag.Running {
		t.Fatalf("the second half's kernel: %v; the held first half's: %v", err, lo.State())
	}
	all := launchAddOne(t, c, k, p, 0, n, arrA)
	ls, _ := lo.Stream()
	hs, _ := hi.Stream()
	if len(hi.Parents()) != 0 || ls == hs {
		t.Fatalf("disjoint halves: %d parents, streams %v and %v", len(hi.Parents()), ls, hs)
	}
	if ps := all.Parents(); len(ps) != 1 || ps[0] != lo {
		t.Fatalf("the whole-array kernel's parents: %d (want the held one only: the other finished)", len(ps))
	}
	if r := c.Resources(); r.Streams < 2 || r.Modules != 1 {
		t.Fatalf("resources while running: %+v", r)
	}
	sid, _ := server.TagSend(sep, addr(gate), 8, 5, ucxx.MemoryHost, 0)
	queueWait(t, server, sid)
	if err := c.Access(context.Background(), []dag.Access{acc(arrA, 0, 4*n, dag.Read)}); err != nil {
		t.Fatal(err)
	}
	for i, w := range readWords(t, d, p, n) {
		if w != uint32(i)+2 {
			t.Fatalf("word %d: %d, want %d", i, w, i+2)
		}
	}
	if took, ok := GPUTime(all); !ok || took <= 0 {
		t.Errorf("GPU time of a kernel with timings on: %v %v", took, ok)
	}
}

// TestKernelWaitsForReceiveOnGPU: a kernel reading a buffer a receive fills is
// launched before the message comes (it waits on the device, behind the receive's
// done word), and reads what came.
func TestKernelWaitsForReceiveOnGPU(t *testing.T) {
	d := needGPU(t)
	client, server, cep, sep := enginePair(t)
	c := newContext(t, Options{Devices: []int{0}, Engine: client})
	k := addOne(t, c)
	const n = 1024
	p := deviceWords(t, d, n)
	recv, err := c.Transfer("recv", &Recv{EP: cep, Addr: p, Size: 4 * n, Tag: 3, Mask: ^uint64(0), MemType: ucxx.MemoryCUDA},
		[]dag.Access{acc(arrA, 0, 4*n, dag.Write)})
	if err != nil {
		t.Fatal(err)
	}
	kern := launchAddOne(t, c, k, p, 0, n, arrA)
	if recv.State() != dag.Running || kern.State() != dag.Running {
		t.Fatalf("before the message: receive %v, kernel %v (want both running: the kernel waits on the GPU)", recv.State(), kern.State())
	}
	msg := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(msg[4*i:], uint32(1000+i))
	}
	sid, _ := server.TagSend(sep, addr(msg), uint64(len(msg)), 3, ucxx.MemoryHost, 0)
	queueWait(t, server, sid)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Synchronize(ctx); err != nil {
		t.Fatalf("receive %v, kernel %v: %v", recv.State(), kern.State(), err)
	}
	for i, w := range readWords(t, d, p, n) {
		if w != uint32(1000+i)+1 {
			t.Fatalf("word %d: %d, want %d (the kernel ran before the data came?)", i, w, 1000+i+1)
		}
	}
}
