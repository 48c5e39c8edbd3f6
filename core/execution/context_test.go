package execution

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ucxx-go/ucxx-go/core"
	"github.com/ucxx-go/ucxx-go/core/dag"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

func acc(a dag.ArrayID, off, n uint64, m dag.Mode) dag.Access {
	return dag.Access{Array: a, Off: off, Len: n, Mode: m}
}

const arrA, arrB, arrC dag.ArrayID = 1, 2, 3

// TestHostWorkFollowsByteRanges: a copy of one half of an array runs while a function
// writing the other half is held; the copy of the held half waits for it; the host's
// own access to a range waits only for that range's writer.
func TestHostWorkFollowsByteRanges(t *testing.T) {
	c := newContext(t, Options{})
	const n = 1 << 16
	a, b := make([]byte, n), make([]byte, n)
	for i := range a {
		a[i] = byte(i)
	}
	gate := make(chan struct{})
	fill, err := c.Host("fill low half", func() error {
		<-gate
		for i := range n / 2 {
			a[i] = 0xAB
		}
		return nil
	}, nil, nil, []dag.Access{acc(arrA, 0, n/2, dag.Write)})
	if err != nil {
		t.Fatal(err)
	}
	high, _ := c.Copy(addr(b)+n/2, addr(a)+n/2, n/2, false, []dag.Access{acc(arrA, n/2, n/2, dag.Read), acc(arrB, n/2, n/2, dag.Write)})
	low, _ := c.Copy(addr(b), addr(a), n/2, false, []dag.Access{acc(arrA, 0, n/2, dag.Read), acc(arrB, 0, n/2, dag.Write)})
	if err := high.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if fill.State() != dag.Running || low.State() != dag.Pending {
		t.Fatalf("while the fill is held: fill %v, copy of its half %v", fill.State(), low.State())
	}
	if err := c.Access(context.Background(), []dag.Access{acc(arrB, n/2, n/2, dag.Read)}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b[n/2:], a[n/2:]) {
		t.Fatal("the independent half was not copied")
	}
	accessed := make(chan dag.State)
	go func() {
		c.Access(context.Background(), []dag.Access{acc(arrB, 0, 8, dag.Read)})
		accessed <- low.State()
	}()
	close(gate)
	if st := <-accessed; st != dag.Done {
		t.Fatalf("the host's access returned with the range's writer %v", st)
	}
	if !bytes.Equal(b[:n/2], bytes.Repeat([]byte{0xAB}, n/2)) {
		t.Fatal("the held half was copied before it was written")
	}
}

// TestReductionsIntoOneRange: reductions into one array do not wait for each other
// (no edges between them) and all land; a later read waits for all of them.
func TestReductionsIntoOneRange(t *testing.T) {
	c := newContext(t, Options{})
	const n, k = 4096, 16
	dst := make([]float64, n)
	srcs := make([][]float64, k)
	var vs []*dag.Vertex
	for j := range srcs {
		srcs[j] = make([]float64, n)
		for i := range srcs[j] {
			srcs[j][i] = float64(j + 1)
		}
		src := dag.ArrayID(100 + j)
		v, err := c.Reduce(arrA, f64addr(dst), f64addr(srcs[j]), n, Float64, Sum,
			[]dag.Access{acc(src, 0, 8*n, dag.Read), acc(arrA, 0, 8*n, dag.Reduce)})
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Parents()) != 0 {
			t.Fatalf("reduction %d waits for %d vertices", j, len(v.Parents()))
		}
		vs = append(vs, v)
	}
	if err := c.Access(context.Background(), []dag.Access{acc(arrA, 0, 8*n, dag.Read)}); err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.State() != dag.Done {
			t.Fatalf("the read returned before a reduction ended (%v)", v.State())
		}
	}
	want := float64(k * (k + 1) / 2)
	for i, x := range dst {
		if x != want {
			t.Fatalf("element %d: %v, want %v", i, x, want)
		}
	}
	if _, err := c.Reduce(arrA, f64addr(dst), f64addr(dst), n, Dtype(99), Sum, nil); err == nil {
		t.Fatal("a reduction of an unknown type was taken")
	}
}

// TestTransfersAreVertices: a put waits for the host work that writes its source and
// reads nothing else; a receive's reader waits for the receive; the data arrive.
func TestTransfersAreVertices(t *testing.T) {
	client, server, cep, sep := enginePair(t)
	c := newContext(t, Options{Engine: client})

	target := make([]byte, 64)
	region, err := server.RegisterMemory(addr(target), uint64(len(target)), core.MemHost)
	if err != nil {
		t.Fatal(err)
	}
	packed, err := server.PackRegion(region, addr(target), uint64(len(target)))
	if err != nil {
		t.Fatal(err)
	}
	key, err := client.UnpackKey(cep, addr(packed), len(packed))
	if err != nil {
		t.Fatal(err)
	}

	src := make([]byte, 64)
	gate := make(chan struct{})
	write, _ := c.Host("write source", func() error {
		<-gate
		copy(src, bytes.Repeat([]byte("put!"), 16))
		return nil
	}, nil, nil, []dag.Access{acc(arrA, 0, 64, dag.Write)})
	put, err := c.Transfer("put", &Put{EP: cep, T: core.Transfer{Key: key.ID, Addr: addr(src), Size: 64, MemType: core.MemHost}},
		[]dag.Access{acc(arrA, 0, 64, dag.Read)})
	if err != nil {
		t.Fatal(err)
	}
	in := make([]byte, 32)
	recv, _ := c.Transfer("recv", &Recv{EP: cep, Addr: addr(in), Size: 32, Tag: 9, Mask: ^uint64(0), MemType: ucxx.MemoryHost},
		[]dag.Access{acc(arrB, 0, 32, dag.Write)})
	var seen []byte
	reader, _ := c.Host("read what came", func() error { seen = append([]byte(nil), in...); return nil }, nil, nil,
		[]dag.Access{acc(arrB, 0, 32, dag.Read)})
	if put.State() != dag.Pending {
		t.Fatalf("the put is %v while its source's writer is held", put.State())
	}
	if reader.State() != dag.Pending {
		t.Fatalf("the receive's reader is %v before anything was sent", reader.State())
	}
	msg := bytes.Repeat([]byte("recv"), 8)
	sid, err := server.TagSend(sep, addr(msg), uint64(len(msg)), 9, ucxx.MemoryHost, 0)
	if err != nil {
		t.Fatal(err)
	}
	queueWait(t, server, sid)
	close(gate)
	if err := c.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, v := range []*dag.Vertex{write, put, recv, reader} {
		if v.State() != dag.Done {
			t.Fatalf("%s: %v (%v)", v.Name(), v.State(), v.Err())
		}
	}
	if !bytes.Equal(seen, msg) {
		t.Fatalf("the reader saw %q", seen)
	}
	fid, _ := client.Flush(cep)
	queueWait(t, client, fid)
	if !bytes.Equal(target, src) {
		t.Fatalf("the put landed %q", target)
	}
}

// TestFailureReachesDescendantsOnly: a transfer that fails fails its descendants,
// whose error chain names it and its status; an unrelated vertex completes; the
// context stays usable. The put waits behind a gate until all are added: a vertex
// added after its parent has failed runs normally (the failure is not remembered).
func TestFailureReachesDescendantsOnly(t *testing.T) {
	client, _, cep, _ := enginePair(t)
	c := newContext(t, Options{Engine: client})
	src := make([]byte, 8)
	release := make(chan struct{})
	if _, err := c.Host("gate", func() error { <-release; return nil }, nil, nil, []dag.Access{acc(arrA, 0, 8, dag.Write)}); err != nil {
		t.Fatal(err)
	}
	put, _ := c.Transfer("put with no key", &Put{EP: cep, T: core.Transfer{Key: 12345, Addr: addr(src), Size: 8, MemType: core.MemHost}},
		[]dag.Access{acc(arrA, 0, 8, dag.Read)})
	child, _ := c.Host("overwrite the source", func() error { src[0] = 1; return nil }, nil, nil, []dag.Access{acc(arrA, 0, 8, dag.Write)})
	grandchild, _ := c.Host("read it", func() error { return nil }, nil, nil, []dag.Access{acc(arrA, 0, 8, dag.Read)})
	other, _ := c.Host("unrelated", func() error { return nil }, nil, nil, []dag.Access{acc(arrB, 0, 8, dag.Write)})
	close(release)
	c.Synchronize(context.Background())
	if put.State() != dag.Failed || !errors.Is(put.Err(), ucxx.StatusInvalidParam) {
		t.Fatalf("the put: %v, %v", put.State(), put.Err())
	}
	for _, v := range []*dag.Vertex{child, grandchild} {
		var ve *dag.VertexError
		if v.State() != dag.Failed || !errors.As(v.Err(), &ve) || ve.Root != put.ID() || !errors.Is(v.Err(), ucxx.StatusInvalidParam) {
			t.Fatalf("%s: %v, %v", v.Name(), v.State(), v.Err())
		}
	}
	if src[0] != 0 {
		t.Fatal("a descendant of the failed put ran")
	}
	if other.State() != dag.Done {
		t.Fatalf("the unrelated vertex: %v (%v)", other.State(), other.Err())
	}
	again, err := c.Host("after", func() error { return nil }, nil, nil, []dag.Access{acc(arrA, 0, 8, dag.Write)})
	if err != nil || again.Wait(context.Background()) != nil {
		t.Fatalf("the context after a failure: %v, %v", err, again.Err())
	}
}

// TestCloseCancelsPendingTransfers: a receive nobody sends to and the vertices after
// it end Canceled when the context closes, promptly.
func TestCloseCancelsPendingTransfers(t *testing.T) {
	client, _, cep, _ := enginePair(t)
	c, err := New(Options{Engine: client})
	if err != nil {
		t.Fatal(err)
	}
	in := make([]byte, 8)
	recv, _ := c.Transfer("recv", &Recv{EP: cep, Addr: addr(in), Size: 8, Tag: 1, Mask: ^uint64(0), MemType: ucxx.MemoryHost},
		[]dag.Access{acc(arrA, 0, 8, dag.Write)})
	later, _ := c.Transfer("recv after", &Recv{EP: cep, Addr: addr(in), Size: 8, Tag: 2, Mask: ^uint64(0), MemType: ucxx.MemoryHost},
		[]dag.Access{acc(arrA, 0, 8, dag.Write)})
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Close took %v", took)
	}
	for _, v := range []*dag.Vertex{recv, later} {
		if v.State() != dag.Failed || !errors.Is(v.Err(), ucxx.StatusCanceled) {
			t.Fatalf("%s: %v, %v", v.Name(), v.State(), v.Err())
		}
	}
	if _, err := c.Host("after close", nil, nil, nil, nil); !errors.Is(err, dag.ErrClosed) {
		t.Fatalf("a vertex after Close: %v", err)
	}
	if err := c.Close(); err == nil {
		t.Fatal("a second Close succeeded")
	}
	if r := c.Resources(); r != (Resources{}) {
		t.Fatalf("held after Close: %+v", r)
	}
}

// TestDescribeArrayWithoutGPUs: a context without GPUs takes host arrays and refuses an
// array said to be on a GPU; forgetting drops the record.
func TestDescribeArrayWithoutGPUs(t *testing.T) {
	c := newContext(t, Options{})
	buf := make([]byte, 64)
	if err := c.DescribeArray(arrA, addr(buf), 64, -1); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.arrays.get(arrA); !ok {
		t.Fatal("the described array is not recorded")
	}
	c.ForgetArray(arrA)
	if _, ok := c.arrays.get(arrA); ok {
		t.Fatal("the array is still recorded after ForgetArray")
	}
	if err := c.DescribeArray(arrB, addr(buf), 64, 0); err == nil {
		t.Fatal("an array on GPU 0 of a context without GPUs: no error")
	}
}
