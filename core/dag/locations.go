package dag

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// MaxGPUs is the number of GPUs a LocationSet can name.
const MaxGPUs = 63

// LocationSet is a set of places holding the newest copy of some bytes: Host and
// GPUs 0..MaxGPUs-1. Bit 0 is the host, bit d+1 GPU d.
type LocationSet uint64

// Locations returns the set holding exactly locs.
func Locations(locs ...int) LocationSet {
	var s LocationSet
	for _, l := range locs {
		s = s.With(l)
	}
	return s
}

// With returns s plus loc.
func (s LocationSet) With(loc int) LocationSet { return s | 1<<uint(loc+1) }

// Has reports whether loc is in s.
func (s LocationSet) Has(loc int) bool { return s&(1<<uint(loc+1)) != 0 }

// Each calls f for every location in s, the host first, then GPUs in order.
func (s LocationSet) Each(f func(loc int)) {
	for s != 0 {
		b := bits.TrailingZeros64(uint64(s))
		f(b - 1)
		s &^= 1 << uint(b)
	}
}

// String formats the set as "{host,gpu1}".
func (s LocationSet) String() string {
	var parts []string
	s.Each(func(l int) {
		if l == Host {
			parts = append(parts, "host")
		} else {
			parts = append(parts, fmt.Sprintf("gpu%d", l))
		}
	})
	return "{" + strings.Join(parts, ",") + "}"
}

// Move is a range a vertex needs copied to where it runs before its work.
type Move struct {
	Array    ArrayID
	Off, Len uint64
	From, To int // locations: Host or a GPU
}

// LocationTracker records, per byte range of each array, where the newest copy is,
// updated when work is scheduled (GrCUDA's up-to-date locations, per byte range rather
// than per array): a vertex that writes a range leaves it only where it ran, one that
// reads it adds where it ran (the copy made for it). Bytes it has no record of are on
// the host, where arrays start; Place says otherwise.
//
// The model is optimistic, as GrCUDA's: it describes where the data will be once the
// scheduled work has run, which is what placement decisions need.
//
// A LocationTracker is not safe for concurrent use; the Graph uses it under its lock.
type LocationTracker struct {
	arrays map[ArrayID]*spanList[LocationSet]
	// pinned: arrays whose bytes never move (device memory, which other GPUs reach
	// through peer access, and host memory): work on them records nothing.
	pinned map[ArrayID]bool
	// sizes: the arrays' sizes where known (SetSize), for BlockDevice.
	sizes map[ArrayID]uint64
}

// NewLocationTracker returns a tracker with every byte on the host.
func NewLocationTracker() *LocationTracker {
	return &LocationTracker{arrays: make(map[ArrayID]*spanList[LocationSet]), pinned: make(map[ArrayID]bool),
		sizes: make(map[ArrayID]uint64)}
}

func sameSet(a, b *LocationSet) bool { return *a == *b }

// hostOnly is the set of bytes the tracker has no record of.
var hostOnly = Locations(Host)

// Place records that the newest copy of [off, off+n) of array is at loc only (where it
// was allocated or last written outside the graph).
func (t *LocationTracker) Place(array ArrayID, off, n uint64, loc int) {
	t.set(array, off, n, func(LocationSet) LocationSet { return Locations(loc) })
}

// Pin records that array's bytes stay where they are placed whatever work reads or
// writes them (memory that does not migrate: a GPU's device memory, which the others
// reach through peer access, or host memory). Forget undoes it.
func (t *LocationTracker) Pin(array ArrayID) { t.pinned[array] = true }

// Record updates the locations for work at loc with these accesses: a Write,
// ReadWrite or Reduce leaves its range only at loc, a Read adds loc. Pinned arrays
// stay where they are.
func (t *LocationTracker) Record(accesses []Access, loc int) { t.record(accesses, loc, false) }

// RecordInPlace is Record for work that writes its Write ranges where their bytes lie
// (Task.WritesInPlace): those keep the locations they had.
func (t *LocationTracker) RecordInPlace(accesses []Access, loc int) { t.record(accesses, loc, true) }

func (t *LocationTracker) record(accesses []Access, loc int, inPlace bool) {
	for _, a := range accesses {
		if t.pinned[a.Array] || (inPlace && a.Mode == Write) {
			continue
		}
		if a.Mode == Read {
			t.set(a.Array, a.Off, a.Len, func(s LocationSet) LocationSet { return s.With(loc) })
		} else {
			t.set(a.Array, a.Off, a.Len, func(LocationSet) LocationSet { return Locations(loc) })
		}
	}
}

func (t *LocationTracker) set(array ArrayID, off, n uint64, f func(LocationSet) LocationSet) {
	if n == 0 {
		return
	}
	l := t.arrays[array]
	if l == nil {
		l = &spanList[LocationSet]{}
		t.arrays[array] = l
	}
	l.update(off, off+n, func(_, _ uint64, old LocationSet, ok bool) (LocationSet, bool) {
		if !ok {
			old = hostOnly
		}
		s := f(old)
		return s, s != hostOnly // host-only is what no record means
	}, sameSet)
	if l.len() == 0 {
		delete(t.arrays, array)
	}
}

// Holders calls f for each piece of [off, off+n) of array, in order, with the set of
// locations holding its newest copy.
func (t *LocationTracker) Holders(array ArrayID, off, n uint64, f func(off, n uint64, s LocationSet)) {
	if n == 0 {
		return
	}
	l := t.arrays[array]
	if l == nil {
		f(off, n, hostOnly)
		return
	}
	l.visit(off, off+n, func(lo, hi uint64, s LocationSet, ok bool) {
		if !ok {
			s = hostOnly
		}
		f(lo, hi-lo, s)
	})
}

// Present returns how many of the bytes the accesses read (every mode but Write)
// have their newest copy at each location, and how many they read in all. present is
// indexed by location+1 (present[0] is the host) and has room for gpus GPUs.
func (t *LocationTracker) Present(accesses []Access, gpus int) (present []uint64, total uint64) {
	present = make([]uint64, gpus+1)
	for _, a := range accesses {
		if !a.Mode.reads() {
			continue
		}
		total += a.Len
		t.Holders(a.Array, a.Off, a.Len, func(_, n uint64, s LocationSet) {
			s.Each(func(l int) {
				if l+1 < len(present) {
					present[l+1] += n
				}
			})
		})
	}
	return present, total
}

// Missing returns the ranges the accesses read that have no newest copy at loc, each
// with the holder to copy it from: the one with the best link to loc in bw (the
// lowest-numbered holder when bw is nil or knows no link). Adjacent ranges with one
// source are merged.
func (t *LocationTracker) Missing(accesses []Access, loc int, bw *BandwidthMatrix) []Move {
	var moves []Move
	for _, a := range accesses {
		if !a.Mode.reads() {
			continue
		}
		t.Holders(a.Array, a.Off, a.Len, func(off, n uint64, s LocationSet) {
			if s.Has(loc) {
				return
			}
			from := bestSource(s, loc, bw)
			if k := len(moves) - 1; k >= 0 && moves[k].Array == a.Array && moves[k].From == from && moves[k].Off+moves[k].Len == off {
				moves[k].Len += n
				return
			}
			moves = append(moves, Move{Array: a.Array, Off: off, Len: n, From: from, To: loc})
		})
	}
	return moves
}

// bestSource returns the holder in s with the fastest link to loc.
func bestSource(s LocationSet, loc int, bw *BandwidthMatrix) int {
	best, bestBW := Host-1, math.Inf(-1)
	s.Each(func(l int) {
		b := 0.0
		if bw != nil {
			b = bw.Get(l, loc)
		}
		if best == Host-1 || b > bestBW {
			best, bestBW = l, b
		}
	})
	return best
}

// Forget drops what the tracker knows of array: its bytes are on the host again, and
// free to move, its size unknown.
func (t *LocationTracker) Forget(array ArrayID) {
	delete(t.arrays, array)
	delete(t.pinned, array)
	delete(t.sizes, array)
}

// SetSize records array's size in bytes (0: unknown), for BlockDevice.
func (t *LocationTracker) SetSize(array ArrayID, size uint64) {
	if size == 0 {
		delete(t.sizes, array)
		return
	}
	t.sizes[array] = size
}

// BlockDevice returns the device a block distribution of arrays over gpus devices
// gives the bytes the accesses touch: the mean, weighted by bytes, of the relative
// positions of their ranges' midpoints in their arrays, times gpus. Only ranges that
// are part of an array of known size count (a whole array, or one of unknown size or
// pinned, says nothing of where its reader belongs); ok is false where none does.
// So the readers of the first halves of x and y go to device 0 of 2, and those of the
// second halves to device 1, as hand-partitioned code places partition q on GPU q.
func (t *LocationTracker) BlockDevice(accesses []Access, gpus int) (device int, ok bool) {
	var bytes, weighted float64
	for _, a := range accesses {
		size := t.sizes[a.Array]
		if size == 0 || a.Len == 0 || a.Len >= size || a.Off >= size || a.Len > size-a.Off || t.pinned[a.Array] {
			continue
		}
		mid := (float64(a.Off) + float64(a.Len)/2) / float64(size)
		bytes += float64(a.Len)
		weighted += mid * float64(a.Len)
	}
	if bytes == 0 || gpus <= 0 {
		return 0, false
	}
	return min(int(weighted/bytes*float64(gpus)), gpus-1), true
}
