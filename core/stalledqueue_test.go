package core

import "testing"

// The queue keeps its sends in order; removing one leaves a gap that pop skips, and a
// sequence number names its send until that send leaves, whatever leaves before it.
func TestStalledQueue(t *testing.T) {
	var q stalledQueue
	seq := make([]uint64, 6)
	for i := range seq {
		seq[i] = q.push(&submission{id: uint64(100 + i)})
	}
	if q.len() != 6 {
		t.Fatalf("len %d, want 6", q.len())
	}
	if _, ok := q.remove(seq[1], 999); ok {
		t.Fatal("removed a send under another send's id")
	}
	for _, i := range []int{1, 2, 4} {
		if s, ok := q.remove(seq[i], uint64(100+i)); !ok || s.id != uint64(100+i) {
			t.Fatalf("remove %d: %v %v", i, s.id, ok)
		}
	}
	if _, ok := q.remove(seq[2], 102); ok {
		t.Fatal("removed a send twice")
	}
	if s, ok := q.pop(); !ok || s.id != 100 || !s.stalled {
		t.Fatalf("pop: %d %v", s.id, ok)
	}
	if s, ok := q.pop(); !ok || s.id != 103 { // the gaps of 101 and 102 skipped
		t.Fatalf("pop: %d %v, want 103", s.id, ok)
	}
	if _, ok := q.remove(seq[0], 100); ok {
		t.Fatal("removed a send that had left")
	}
	seq6 := q.push(&submission{id: 106})
	if s, ok := q.remove(seq[5], 105); !ok || s.id != 105 {
		t.Fatalf("remove 5 after pops: %d %v", s.id, ok)
	}
	if got := q.takeAll(); len(got) != 1 || got[0].id != 106 {
		t.Fatalf("takeAll: %v", got)
	}
	if q.len() != 0 || q.items != nil {
		t.Fatalf("after takeAll: len %d, %d items", q.len(), len(q.items))
	}
	if _, ok := q.remove(seq6, 106); ok {
		t.Fatal("removed a send takeAll took")
	}
	if _, ok := q.pop(); ok {
		t.Fatal("popped from an empty queue")
	}
	// A queue left with gaps only gives its storage back.
	s7 := q.push(&submission{id: 107})
	q.remove(s7, 107)
	if q.len() != 0 || q.items != nil {
		t.Fatalf("gaps only: len %d, %d items", q.len(), len(q.items))
	}
}

// An endpoint that stays stalled while its application cancels send after send (each
// a timeout, oldest first or anywhere) keeps storage for about twice the sends it
// holds, not one slot per send ever cancelled.
func TestStalledQueueCancelsDoNotAccumulate(t *testing.T) {
	for _, which := range []string{"oldest", "middle"} {
		var q stalledQueue
		var seqs []uint64
		id := uint64(1)
		for ; id <= 3; id++ { // held throughout
			q.push(&submission{id: id})
		}
		for n := 0; n < 100_000; n++ {
			seqs = append(seqs, q.push(&submission{id: id}))
			id++
			if len(seqs) < 8 {
				continue
			}
			k := 0
			if which == "middle" {
				k = len(seqs) / 2
			}
			if _, ok := q.remove(seqs[k], seqs[k]+1); !ok { // ids 1, 2, ... as sequence numbers 0, 1, ...
				t.Fatalf("%s: cancel %d failed", which, n)
			}
			seqs = append(seqs[:k], seqs[k+1:]...)
		}
		if q.len() != 3+len(seqs) {
			t.Fatalf("%s: len %d, want %d", which, q.len(), 3+len(seqs))
		}
		if n := len(q.items); n > 2*q.len()+compactMin {
			t.Fatalf("%s: %d slots for %d held sends", which, n, q.len())
		}
		// Order kept: the three first, then the rest by id.
		last := uint64(0)
		for s, ok := q.pop(); ok; s, ok = q.pop() {
			if s.id <= last {
				t.Fatalf("%s: id %d after %d", which, s.id, last)
			}
			last = s.id
		}
	}
}
