package core

import (
	"slices"
	"sort"
)

// regionIndex finds a registered region that covers a range, without scanning every
// region: regions sorted by start address, and the longest region's length, bound the
// candidates to those starting at most that far before the range. With regions of
// similar sizes a lookup reads a few of them, whatever their number. It belongs to
// the progress thread, like the regions it holds.
type regionIndex struct {
	byStart   []*region // ascending addr; regions of equal addr in insertion order
	maxLength uint64    // an upper bound on every region's length (never lowered)
}

// covering returns a region of memType containing [addr, addr+length), or nil.
func (x *regionIndex) covering(addr uintptr, length uint64, memType uint8) *region {
	// Regions starting after addr cannot contain it: start from the last at or before.
	i := sort.Search(len(x.byStart), func(i int) bool { return x.byStart[i].addr > addr })
	for j := i - 1; j >= 0; j-- {
		r := x.byStart[j]
		if uint64(addr-r.addr) > x.maxLength {
			break // this one and every earlier one ends before addr+length
		}
		if r.contains(addr, length, memType) {
			return r
		}
	}
	return nil
}

// add indexes r.
func (x *regionIndex) add(r *region) {
	i := sort.Search(len(x.byStart), func(i int) bool { return x.byStart[i].addr > r.addr })
	x.byStart = slices.Insert(x.byStart, i, r)
	x.maxLength = max(x.maxLength, r.length)
}

// remove drops r from the index (a no-op when it is not there).
func (x *regionIndex) remove(r *region) {
	i := sort.Search(len(x.byStart), func(i int) bool { return x.byStart[i].addr >= r.addr })
	for ; i < len(x.byStart) && x.byStart[i].addr == r.addr; i++ {
		if x.byStart[i] == r {
			x.byStart = slices.Delete(x.byStart, i, i+1)
			return
		}
	}
}
