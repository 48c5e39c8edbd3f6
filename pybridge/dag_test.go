package pybridge

import (
	"encoding/binary"
	"strings"
	"testing"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/core/dag"
	"github.com/ucxx-go/ucxx-go/core/execution"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// descriptors packs accesses as Python writes them.
func descriptors(acc ...dag.Access) []byte {
	b := make([]byte, execution.AccessDescriptorSize*len(acc))
	for i, a := range acc {
		w := b[execution.AccessDescriptorSize*i:]
		binary.LittleEndian.PutUint64(w, uint64(a.Array))
		binary.LittleEndian.PutUint64(w[8:], a.Off)
		binary.LittleEndian.PutUint64(w[16:], a.Len)
		binary.LittleEndian.PutUint64(w[24:], uint64(a.Mode))
	}
	return b
}

func ptr(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

// TestDagBridge: a host-only context through the bridge: a copy, a Python host vertex
// taken and ended as Python's thread does (a failure and its descendant), a host
// access, waits on vertices, bad descriptors refused, and a closed context refused.
func TestDagBridge(t *testing.T) {
	h, err := DagNew(`{"execution": "async", "host_workers": 2}`)
	if err != nil {
		t.Fatal(err)
	}
	src, dst := []byte("0123456789abcdef"), make([]byte, 16)
	d := descriptors(dag.Access{Array: 1, Len: 16, Mode: dag.Read}, dag.Access{Array: 2, Len: 16, Mode: dag.Write})
	cp, err := DagCopy(h, ptr(dst), ptr(src), 16, false, ptr(d), 2)
	if err != nil {
		t.Fatal(err)
	}
	w := descriptors(dag.Access{Array: 2, Off: 0, Len: 8, Mode: dag.Write})
	hv, err := DagHost(h, ptr(w), 1)
	if err != nil {
		t.Fatal(err)
	}
	r := descriptors(dag.Access{Array: 2, Off: 0, Len: 8, Mode: dag.Read})
	child, _ := DagHost(h, ptr(r), 1)
	got, err := DagTakeHost(h, 5000)
	if err != nil || got != hv {
		t.Fatalf("DagTakeHost: %d, %v; want %d", got, err, hv)
	}
	// Taken, not ended: a bounded wait times out, the vertex untouched.
	for _, ms := range []int{0, 20} {
		ok, err := DagWait(h, hv, ms)
		if text := wantStatusError(t, err, ucxx.StatusTimedOut); ok || !strings.Contains(text, "not finished within") {
			t.Fatalf("DagWait(%d ms) of a running vertex: %v %q", ms, ok, text)
		}
	}
	if _, err := DagEndHost(h, hv, "ValueError: boom"); err != nil {
		t.Fatal(err)
	}
	if ok, err := DagWait(h, cp, 5000); !ok || err != nil {
		t.Fatalf("DagWait(copy): %v %v", ok, err)
	}
	if _, err := DagWait(h, child, -1); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("DagWait of the failed function's child: %v", err)
	}
	a := descriptors(dag.Access{Array: 2, Off: 8, Len: 8, Mode: dag.Read})
	if _, err := DagAccess(h, ptr(a), 1); err != nil {
		t.Fatal(err)
	}
	if string(dst) != string(src) {
		t.Fatalf("copied %q", dst)
	}
	bad := descriptors(dag.Access{Array: 1, Len: 8, Mode: 9})
	if _, err := DagCopy(h, ptr(dst), ptr(src), 8, false, ptr(bad), 1); err == nil {
		t.Fatal("an access of an unknown mode was taken")
	}
	if _, err := DagCopy(h, ptr(dst), ptr(src), 8, true, ptr(d), 2); err == nil {
		t.Fatal("a GPU copy on a context without GPUs was taken")
	}
	if ok, err := DagClose(h); !ok || err != nil {
		t.Fatalf("DagClose: %v %v", ok, err)
	}
	if _, err := DagSynchronize(h); err == nil {
		t.Fatal("DagSynchronize after DagClose succeeded")
	}
	if _, err := DagNew(`{"execution": "sideways"}`); err == nil {
		t.Fatal("an unknown execution policy was taken")
	}
}
