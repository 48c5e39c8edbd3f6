package executor

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/ucxx-go/ucxx-go/core/builtin"
	"github.com/ucxx-go/ucxx-go/core/plan"
)

// The built-ins the GPU calls take at large sizes run sliced: their extents match.
func TestSliceableBuiltins(t *testing.T) {
	for _, c := range []struct {
		key string
		o   builtin.Options
	}{
		{"broadcast.chain", builtin.Options{InPlace: true, Chunks: 8}},
		{"broadcast.chain", builtin.Options{Chunks: 32}},
		{"reducescatter.allpairs", builtin.Options{}},
		{"reducescatter.allpairs", builtin.Options{Lanes: 2}},
		{"allreduce.allpairs", builtin.Options{InPlace: true}},
		{"allgather.allpairs", builtin.Options{}},
		{"alltoall.pairwise", builtin.Options{}},
		{"allreduce.ring", builtin.Options{InPlace: true, Chunks: 4}},
	} {
		a, ok := builtin.Lookup(splitKey(c.key))
		if !ok {
			t.Fatalf("no built-in %s", c.key)
		}
		for _, n := range []int{2, 4} {
			_, p, err := a.Generate(n, c.o)
			if err != nil {
				t.Fatalf("%s on %d ranks: %v", c.key, n, err)
			}
			in, out := a.Chunks(n, c.o)
			unit := uint64(1 << 20)
			if !sliceable(p, uint64(in)*unit, uint64(out)*unit) {
				t.Errorf("%s %+v on %d ranks: not sliceable", c.key, c.o, n)
			}
		}
	}
}

func splitKey(k string) (string, string) {
	for i := range k {
		if k[i] == '.' {
			return k[:i], k[i+1:]
		}
	}
	return k, ""
}

// A rank forwarding two pieces in one put reads, in each block, bytes another block
// of its upstream wrote: not sliceable. The same plan with the pieces forwarded as
// received is.
func TestSliceableRefusesMismatchedExtents(t *testing.T) {
	text, p, err := builtin.BroadcastChain(4, builtin.Options{InPlace: true, Chunks: 4})
	if err != nil {
		t.Fatal(err)
	}
	if !sliceable(p, 4<<20, 4<<20) {
		t.Fatal("the chain itself is not sliceable")
	}
	var doc map[string]any
	d := json.NewDecoder(bytes.NewReader(text))
	d.UseNumber() // max_message_size is past a float64's integers
	if err := d.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	// Rank 1's first put (piece 0) takes pieces 0 and 1.
	rank1 := doc["gpus"].([]any)[1].(map[string]any)
	ops := rank1["threadblocks"].([]any)[0].(map[string]any)["ops"].([]any)
	widened := false
	for _, o := range ops {
		op := o.(map[string]any)
		if op["name"] == "put" {
			op["src_buff"].([]any)[0].(map[string]any)["size"] = 2
			op["dst_buff"].([]any)[0].(map[string]any)["size"] = 2
			widened = true
			break
		}
	}
	if !widened {
		t.Fatal("rank 1 has no put")
	}
	text, err = json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	q, err := plan.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	if sliceable(q, 4<<20, 4<<20) {
		t.Fatal("a put over two received pieces is sliceable")
	}
}

func TestConsistentExtents(t *testing.T) {
	w := func(o, n uint64) access { return access{plan.Span{Offset: o, Length: n}, true} }
	r := func(o, n uint64) access { return access{plan.Span{Offset: o, Length: n}, false} }
	for _, c := range []struct {
		name string
		as   []access
		want bool
	}{
		{"reads only", []access{r(0, 10), r(5, 10)}, true},
		{"same write twice", []access{w(0, 16), w(0, 16), r(0, 16)}, true},
		{"disjoint writes and reads", []access{w(0, 16), w(16, 16), r(0, 16), r(16, 16), r(32, 64)}, true},
		{"overlapping writes", []access{w(0, 16), w(8, 16)}, false},
		{"a write inside another", []access{w(0, 32), w(0, 16)}, false},
		{"a read over two writes", []access{w(0, 16), w(16, 16), r(0, 32)}, false},
		{"a read inside a write", []access{w(0, 32), r(8, 8)}, false},
		{"a read ending in a write", []access{w(16, 16), r(0, 20)}, false},
		{"a read starting in a write", []access{w(0, 16), r(15, 20)}, false},
		{"a read touching a write's end", []access{w(0, 16), r(16, 20)}, true},
	} {
		if got := consistentExtents(c.as); got != c.want {
			t.Errorf("%s: %t, want %t", c.name, got, c.want)
		}
	}
}

// A device call is sliced where it asks and its plan allows; host memory, calls
// that do not ask (below UCXGO_SLICED_MIN_BYTES, unset: never) and per-call blocks
// are not.
func TestSlicesFor(t *testing.T) {
	_, chain, err := builtin.BroadcastChain(4, builtin.Options{InPlace: true, Chunks: 8})
	if err != nil {
		t.Fatal(err)
	}
	_, wide, err := builtin.BroadcastChain(4, builtin.Options{InPlace: true, Chunks: 4})
	if err != nil {
		t.Fatal(err)
	}
	var x Executor
	call := func(p *plan.Plan, m Memory, sliced bool) uint8 {
		c := Call{Plan: p, Send: Buffer{Bytes: 64 << 20}, Recv: Buffer{Bytes: 64 << 20}, Memory: m, Sliced: sliced}
		l, err := p.Layout(0, c.Send.Bytes, c.Recv.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return x.slicesFor(c, l)
	}
	if got := call(chain, MemoryCUDA, true); got != uint8(slicedBlocks) {
		t.Errorf("a device chain that asks: %d blocks, want %d", got, slicedBlocks)
	}
	if got := call(chain, MemoryCUDA, false); got != 0 {
		t.Errorf("a device chain that does not ask: %d blocks", got)
	}
	if got := call(chain, MemoryHost, true); got != 0 {
		t.Errorf("a host chain: %d blocks", got)
	}
	if got := call(wide, MemoryCUDA, true); got != uint8(slicedBlocks) {
		t.Errorf("another plan: %d blocks (the cache is per plan)", got)
	}
	if len(x.sliceables) != 2 {
		t.Errorf("%d plans cached, want 2", len(x.sliceables))
	}
}

// consistentExtents agrees with the definition checked pair by pair, on random sets
// of extents over a small range (so that they meet often).
func TestConsistentExtentsAgainstPairs(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 27))
	byPairs := func(as []access) bool {
		for i, a := range as {
			for j, b := range as {
				if i == j || !a.write && !b.write {
					continue
				}
				meet := a.span.Offset < b.span.End() && b.span.Offset < a.span.End()
				if meet && a.span != b.span {
					return false
				}
			}
		}
		return true
	}
	agreed := map[bool]int{}
	for range 20000 {
		as := make([]access, 1+rng.IntN(6))
		for i := range as {
			o, n := uint64(rng.IntN(8))*8, uint64(1+rng.IntN(4))*8
			as[i] = access{plan.Span{Offset: o, Length: n}, rng.IntN(3) == 0}
		}
		want := byPairs(as)
		if got := consistentExtents(as); got != want {
			t.Fatalf("%+v: %t, pair by pair %t", as, got, want)
		}
		agreed[want]++
	}
	if agreed[true] < 1000 || agreed[false] < 1000 {
		t.Fatalf("too few cases of each answer: %v", agreed)
	}
}
