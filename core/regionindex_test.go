package core

import (
	"math/rand/v2"
	"testing"
)

// TestRegionIndexMatchesScan: against a scan of every region, on random regions
// (nested, overlapping, sharing a start, of both memory types) added and removed in
// random order: covering finds a region exactly when the scan does, and one that
// contains the range.
func TestRegionIndexMatchesScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var x regionIndex
	var live []*region
	scan := func(addr uintptr, length uint64, memType uint8) bool {
		for _, r := range live {
			if r.contains(addr, length, memType) {
				return true
			}
		}
		return false
	}
	for step := range 5000 {
		switch op := rng.IntN(10); {
		case op < 4 || len(live) == 0:
			r := &region{id: uint64(step), addr: uintptr(rng.IntN(1 << 16)), length: 1 + uint64(rng.IntN(1<<rng.IntN(14))),
				memType: uint8(rng.IntN(2))}
			x.add(r)
			live = append(live, r)
		case op < 6:
			k := rng.IntN(len(live))
			x.remove(live[k])
			live = append(live[:k], live[k+1:]...)
		default:
			addr, length, mt := uintptr(rng.IntN(1<<16)), 1+uint64(rng.IntN(1<<rng.IntN(12))), uint8(rng.IntN(2))
			got := x.covering(addr, length, mt)
			if want := scan(addr, length, mt); (got != nil) != want {
				t.Fatalf("step %d: covering(%#x, %d, %d) = %v, scan says %v", step, addr, length, mt, got, want)
			}
			if got != nil && !got.contains(addr, length, mt) {
				t.Fatalf("step %d: covering returned %+v, which does not contain the range", step, got)
			}
		}
		if len(x.byStart) != len(live) {
			t.Fatalf("step %d: index holds %d regions, %d live", step, len(x.byStart), len(live))
		}
	}
}
