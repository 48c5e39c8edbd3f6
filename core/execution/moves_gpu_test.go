package execution

import (
	"context"
	"encoding/binary"
	"testing"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/core/dag"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// managedWords allocates n managed 32-bit words holding 0..n-1 (written by the host);
// freed by the test.
func managedWords(t *testing.T, d *ucxx.CUDADriver, n int) uintptr {
	t.Helper()
	cu, err := d.RetainPrimary(0)
	if err != nil {
		t.Fatal(err)
	}
	var p uintptr
	if err := cu.Use(func() (err error) { p, err = d.MemAllocManaged(uint64(4 * n)); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cu.Use(func() error { return d.MemFree(p) }); cu.Release() })
	host := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(host[4*i:], uint32(i))
	}
	ucxx.CopyBetween(p, uintptr(unsafe.Pointer(&host[0])), uint64(len(host)))
	return p
}

func managedRead(p uintptr, n int) []uint32 {
	raw := make([]byte, 4*n)
	ucxx.CopyFrom(raw, p)
	out := make([]uint32, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(raw[4*i:])
	}
	return out
}

// lastPrefetch is where [p, p+n) was last prefetched to (asked in device 0's context).
func lastPrefetch(t *testing.T, d *ucxx.CUDADriver, p uintptr, n uint64) (int, error) {
	t.Helper()
	cu, err := d.RetainPrimary(0)
	if err != nil {
		t.Fatal(err)
	}
	defer cu.Release()
	where := ucxx.PrefetchNone
	err = cu.Use(func() (err error) { where, err = d.LastPrefetch(p, n); return err })
	return where, err
}

// accessedBy is which devices [p, p+n) is advised to be accessed by (asked in device 0's
// context), at most four.
func accessedBy(t *testing.T, d *ucxx.CUDADriver, p uintptr, n uint64) ([]int, error) {
	t.Helper()
	cu, err := d.RetainPrimary(0)
	if err != nil {
		t.Fatal(err)
	}
	defer cu.Release()
	var got []int
	err = cu.Use(func() (err error) { got, err = d.AccessedBy(p, n, 4); return err })
	return got, err
}

// needTwoGPUs skips the test on a machine of fewer than two GPUs.
func needTwoGPUs(t *testing.T, d *ucxx.CUDADriver) {
	t.Helper()
	if n, err := d.DeviceCount(); err != nil || n < 2 {
		t.Skipf("needs two GPUs (%d, %v)", n, err)
	}
}

// withMapMode sets mapManaged for the test, restored after it.
func withMapMode(t *testing.T, m mapMode) {
	was := mapManaged
	mapManaged = m
	t.Cleanup(func() { mapManaged = was })
}

func synchronize(t *testing.T, c *Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Synchronize(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestManagedRangesPrefetchedToTheVertexDevice: a managed array whose newest copy is
// on the host is prefetched, the ranges a kernel needs, to the kernel's GPU before it
// runs; device memory described on the GPU needs no move.
func TestManagedRangesPrefetchedToTheVertexDevice(t *testing.T) {
	d := needGPU(t)
	c := newContext(t, Options{Devices: []int{0}})
	k := addOne(t, c)
	const n = 1 << 18
	m := managedWords(t, d, n)
	if err := c.DescribeArray(arrA, m, 4*n, -1); err != nil {
		t.Fatal(err)
	}
	half := launchAddOne(t, c, k, m, 0, n/2, arrA)
	if mv := half.Moves(); len(mv) != 1 || mv[0] != (dag.Move{Array: arrA, Off: 0, Len: 2 * n, From: dag.Host, To: 0}) {
		t.Fatalf("moves of a kernel on half of a host-resident array: %+v", mv)
	}
	synchronize(t, c)
	if where, err := lastPrefetch(t, d, m, 2*n); err != nil || where != 0 {
		t.Fatalf("the kernel's half was last prefetched to %d (%v), want GPU 0", where, err)
	}
	if where, err := lastPrefetch(t, d, m+2*n, 2*n); err != nil || where == 0 {
		t.Fatalf("the other half was prefetched to GPU 0 too (%d, %v): only what the kernel needs moves", where, err)
	}
	for i, w := range managedRead(m, n) {
		want := uint32(i)
		if i < n/2 {
			want++
		}
		if w != want {
			t.Fatalf("word %d: %d, want %d", i, w, want)
		}
	}

	p := deviceWords(t, d, n)
	if err := c.DescribeArray(arrB, p, 4*n, 0); err != nil {
		t.Fatal(err)
	}
	if v := launchAddOne(t, c, k, p, 0, n, arrB); len(v.Moves()) != 0 {
		t.Fatalf("a kernel on an array described on its GPU moves %+v", v.Moves())
	}
	synchronize(t, c)
	if err := c.DescribeArray(arrC, p, 4*n, 5); err == nil {
		t.Fatal("DescribeArray on a GPU the context does not have: no error")
	}
}

// TestMovesBetweenGPUs (two GPUs or more): kernels placed round-robin on GPUs 0 and 1
// over one managed array; the second finds the array's newest copy on GPU 0 and
// prefetches it to GPU 1; a kernel on GPU 1 reads GPU 0's device memory through peer
// access.
func TestMovesBetweenGPUs(t *testing.T) {
	d := needGPU(t)
	needTwoGPUs(t, d)
	// Multigpu-early-disjoint: round-robin chooses for every kernel, the second one's
	// parent included (same-as-parent would keep it on its parent's GPU).
	c := newContext(t, Options{Devices: []int{0, 1}, Graph: dag.Options{DeviceSelection: dag.RoundRobin, ParentStream: dag.MultiGPUEarlyDisjoint}})
	k := addOne(t, c)
	const n = 1 << 18
	m := managedWords(t, d, n)
	if err := c.DescribeArray(arrA, m, 4*n, -1); err != nil {
		t.Fatal(err)
	}
	first := launchAddOne(t, c, k, m, 0, n, arrA)
	second := launchAddOne(t, c, k, m, 0, n, arrA)
	if first.Device() == second.Device() {
		t.Fatalf("round robin put both kernels on GPU %d", first.Device())
	}
	if mv := second.Moves(); len(mv) != 1 || mv[0].From != first.Device() || mv[0].To != second.Device() {
		t.Fatalf("the second kernel's moves: %+v (first on %d, second on %d)", mv, first.Device(), second.Device())
	}
	synchronize(t, c)
	if where, err := lastPrefetch(t, d, m, 4*n); err != nil || where != c.gpus[second.Device()].ordinal {
		t.Fatalf("last prefetched to %d (%v), want GPU %d", where, err, c.gpus[second.Device()].ordinal)
	}
	for i, w := range managedRead(m, n) {
		if w != uint32(i)+2 {
			t.Fatalf("word %d: %d, want %d", i, w, i+2)
		}
	}
	p := deviceWords(t, d, n) // on GPU 0
	if err := c.DescribeArray(arrB, p, 4*n, 0); err != nil {
		t.Fatal(err)
	}
	launchAddOne(t, c, k, p, 0, n, arrB)
	launchAddOne(t, c, k, p, 0, n, arrB) // the other GPU, through peer access
	synchronize(t, c)
	for i, w := range readWords(t, d, p, n) {
		if w != uint32(i)+2 {
			t.Fatalf("device array word %d: %d, want %d", i, w, i+2)
		}
	}
}

// TestManagedArraysMappedOnEveryGPU (two GPUs or more): mapping every array, a managed
// array described to a context of two GPUs is advised accessed by both, and a copy
// into it no longer prefetches its destination and leaves it, in the location model,
// where it was; a context of one GPU leaves the advice alone.
func TestManagedArraysMappedOnEveryGPU(t *testing.T) {
	d := needGPU(t)
	needTwoGPUs(t, d)
	withMapMode(t, mapEveryArray)
	const n = 1 << 18
	one := newContext(t, Options{Devices: []int{0}})
	m1 := managedWords(t, d, n)
	if err := one.DescribeArray(arrA, m1, 4*n, -1); err != nil {
		t.Fatal(err)
	}
	if got, err := accessedBy(t, d, m1, 4*n); err != nil || len(got) != 0 {
		t.Fatalf("one GPU's context advised %v (%v)", got, err)
	}

	c := newContext(t, Options{Devices: []int{0, 1}})
	m := managedWords(t, d, n)
	src := managedWords(t, d, n)
	for _, a := range []struct {
		id dag.ArrayID
		p  uintptr
	}{{arrA, m}, {arrB, src}} {
		if err := c.DescribeArray(a.id, a.p, 4*n, -1); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := accessedBy(t, d, m, 4*n); err != nil || len(got) != 2 || got[0]+got[1] != 1 {
		t.Fatalf("a two-GPU context's managed array is accessed by %v (%v), want GPUs 0 and 1", got, err)
	}
	v, err := c.Copy(m, src, 4*n, true, []dag.Access{{Array: arrB, Len: 4 * n, Mode: dag.Read},
		{Array: arrA, Len: 4 * n, Mode: dag.Write}})
	if err != nil {
		t.Fatal(err)
	}
	if cp, ok := v.Payload().(*DeviceCopy); !ok || cp.ManagedDst {
		t.Fatalf("the copy into a mapped array: %+v, want a device copy that does not prefetch its destination", v.Payload())
	}
	// The copy wrote m where it lies (the host): a kernel on m after it fetches m from
	// there, wherever the copy ran.
	after := launchAddOne(t, c, addOne(t, c), m, 0, n, arrA)
	if mv := after.Moves(); len(mv) != 1 || mv[0].From != dag.Host {
		t.Fatalf("a kernel after the copy (on GPU %d; the copy on %d) moves %+v, want all of it from the host",
			after.Device(), v.Device(), mv)
	}
	synchronize(t, c)
	for i, w := range managedRead(m, n) {
		if w != uint32(i)+1 {
			t.Fatalf("word %d: %d, want %d", i, w, i+1)
		}
	}
}

// TestCopyDestinationsMappedOnEveryGPU (two GPUs or more): mapping copy destinations,
// describing a managed array maps nothing; the first copy on a GPU into it maps it on
// both GPUs and writes it in place (no destination prefetch), while its source stays
// unmapped; a second copy into it keeps to that; a copy from it into device memory
// reads what the first wrote.
func TestCopyDestinationsMappedOnEveryGPU(t *testing.T) {
	d := needGPU(t)
	needTwoGPUs(t, d)
	withMapMode(t, mapCopyDestinations)
	const n = 1 << 18
	c := newContext(t, Options{Devices: []int{0, 1}})
	dst := managedWords(t, d, n)
	src := managedWords(t, d, n)
	seven := make([]byte, 4*n) // src's words become i + 7
	for i := range n {
		binary.LittleEndian.PutUint32(seven[4*i:], uint32(i)+7)
	}
	ucxx.CopyBetween(src, uintptr(unsafe.Pointer(&seven[0])), uint64(len(seven)))
	if err := c.mapOnEveryGPU(managedWords(t, d, 1), 4); err != nil {
		t.Fatalf("mapping a managed range on both GPUs: %v", err)
	}
	for _, a := range []struct {
		id dag.ArrayID
		p  uintptr
	}{{arrA, dst}, {arrB, src}} {
		if err := c.DescribeArray(a.id, a.p, 4*n, -1); err != nil {
			t.Fatal(err)
		}
		if got, err := accessedBy(t, d, a.p, 4*n); err != nil || len(got) != 0 {
			t.Fatalf("array %d described: accessed by %v (%v), want none yet", a.id, got, err)
		}
	}
	v, err := c.Copy(dst, src, 4*n, true, []dag.Access{{Array: arrB, Len: 4 * n, Mode: dag.Read},
		{Array: arrA, Len: 4 * n, Mode: dag.Write}})
	if err != nil {
		t.Fatal(err)
	}
	if cp, ok := v.Payload().(*DeviceCopy); !ok || cp.ManagedDst {
		t.Fatalf("the first copy into a managed array: %+v, want a device copy that does not prefetch its destination", v.Payload())
	}
	if got, err := accessedBy(t, d, dst, 4*n); err != nil || len(got) != 2 || got[0]+got[1] != 1 {
		t.Fatalf("the copy's destination is accessed by %v (%v), want GPUs 0 and 1", got, err)
	}
	if got, err := accessedBy(t, d, src, 4*n); err != nil || len(got) != 0 {
		t.Fatalf("the copy's source is accessed by %v (%v), want none", got, err)
	}
	again, err := c.Copy(dst, src, 4*n, true, []dag.Access{{Array: arrB, Len: 4 * n, Mode: dag.Read},
		{Array: arrA, Len: 4 * n, Mode: dag.Write}})
	if err != nil {
		t.Fatal(err)
	}
	if cp, ok := again.Payload().(*DeviceCopy); !ok || cp.ManagedDst {
		t.Fatalf("the second copy into the mapped array: %+v", again.Payload())
	}
	dev := deviceWords(t, d, n)
	if err := c.DescribeArray(arrC, dev, 4*n, 0); err != nil {
		t.Fatal(err)
	}
	w, err := c.Copy(dev, dst, 4*n, true, []dag.Access{{Array: arrA, Len: 4 * n, Mode: dag.Read},
		{Array: arrC, Len: 4 * n, Mode: dag.Write}})
	if err != nil {
		t.Fatal(err)
	}
	if cp, ok := w.Payload().(*DeviceCopy); !ok || cp.ManagedDst {
		t.Fatalf("a copy into device memory: %+v, want a device copy", w.Payload())
	}
	synchronize(t, c)
	for i, x := range readWords(t, d, dev, n) {
		if x != uint32(i)+7 {
			t.Fatalf("word %d copied twice: %d, want %d", i, x, i+7)
		}
	}
}
