package dag

import (
	"math/rand/v2"
	"testing"
)

// TestSpanListMatchesBytes drives a spanList with random updates and compactions and
// compares it, after each, with a plain per-byte model: the values, the absence of
// overlaps and of mergeable neighbours, the span count, and the chunk bounds.
func TestSpanListMatchesBytes(t *testing.T) {
	const size = 6000
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 5))
		var l spanList[int]
		model := make([]int, size) // 0: nothing kept
		same := func(a, b *int) bool { return *a == *b }
		for step := range 3000 {
			lo := uint64(rng.IntN(size))
			hi := lo + uint64(1+rng.IntN(min(size-int(lo), 1+rng.IntN(400))))
			switch r := rng.IntN(20); {
			case r == 0:
				// Compact, dropping the values divisible by 3.
				l.compact(func(v *int) bool { return *v%3 != 0 }, same)
				for b := range model {
					if model[b]%3 == 0 {
						model[b] = 0
					}
				}
			default:
				val := 1 + rng.IntN(6) // few values: many merges
				mode := rng.IntN(3)
				l.update(lo, hi, func(plo, phi uint64, old int, ok bool) (int, bool) {
					for b := plo; b < phi; b++ {
						if (model[b] != 0) != ok || (ok && model[b] != old) {
							t.Fatalf("seed %d step %d: piece [%d,%d) old %d,%v but byte %d holds %d", seed, step, plo, phi, old, ok, b, model[b])
						}
					}
					switch mode {
					case 0: // set
						return val, true
					case 1: // add where present, else leave a gap
						return old + val, ok
					default: // clear
						return 0, false
					}
				}, same)
				for b := lo; b < hi; b++ {
					switch mode {
					case 0:
						model[b] = val
					case 1:
						if model[b] != 0 {
							model[b] += val
						}
					default:
						model[b] = 0
					}
				}
			}
			checkSpans(t, &l, model)
			if t.Failed() {
				t.Fatalf("seed %d step %d", seed, step)
			}
		}
	}
}

func checkSpans(t *testing.T, l *spanList[int], model []int) {
	t.Helper()
	got := make([]int, len(model))
	n := 0
	var prev *span[int]
	if len(l.ends) != len(l.chunks) {
		t.Errorf("%d ends for %d chunks", len(l.ends), len(l.chunks))
		return
	}
	for ci, c := range l.chunks {
		if len(c.s) == 0 || len(c.s) > maxChunk {
			t.Errorf("chunk %d has %d spans", ci, len(c.s))
			return
		}
		if l.ends[ci] != c.s[len(c.s)-1].hi {
			t.Errorf("chunk %d ends at %d, recorded %d", ci, c.s[len(c.s)-1].hi, l.ends[ci])
		}
		for i := range c.s {
			sp := &c.s[i]
			n++
			if sp.lo >= sp.hi || (prev != nil && prev.hi > sp.lo) {
				t.Errorf("span [%d,%d) after [%d,%d)", sp.lo, sp.hi, prev.lo, prev.hi)
				return
			}
			if prev != nil && prev.hi == sp.lo && prev.val == sp.val {
				t.Errorf("adjacent equal spans [%d,%d) [%d,%d) not merged", prev.lo, prev.hi, sp.lo, sp.hi)
			}
			for b := sp.lo; b < sp.hi; b++ {
				got[b] = sp.val
			}
			prev = sp
		}
	}
	if n != l.len() {
		t.Errorf("len %d, %d spans", l.len(), n)
	}
	for b := range model {
		if got[b] != model[b] {
			t.Errorf("byte %d: %d, want %d", b, got[b], model[b])
			return
		}
	}
	// visit agrees too.
	pos := uint64(0)
	l.visit(0, uint64(len(model)), func(lo, hi uint64, v int, ok bool) {
		if lo != pos || hi <= lo {
			t.Errorf("visit piece [%d,%d) at %d", lo, hi, pos)
		}
		for b := lo; b < hi; b++ {
			if (model[b] != 0) != ok || model[b] != v {
				t.Errorf("visit byte %d: %d,%v, model %d", b, v, ok, model[b])
				return
			}
		}
		pos = hi
	})
}
