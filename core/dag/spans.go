package dag

import (
	"slices"
	"sort"
)

// span is the segment [lo, hi) of an array's bytes and the value kept for it.
type span[T any] struct {
	lo, hi uint64
	val    T
}

// spanList maps the bytes of one array to values: non-overlapping spans sorted by
// offset, with gaps where nothing is kept. Both the dependency state (intervals.go) and
// the locations of copies (locations.go) are kept in one.
//
// Layout: a two-level B+-tree, i.e. a sorted slice of chunks, each a sorted slice of
// at most maxChunk spans. Finding the first span an access touches is two binary
// searches, O(log n); the spans it touches are then contiguous (within a chunk, and
// chunk after chunk), and replacing them moves at most one chunk's tail (a few KiB),
// plus, when a chunk splits or empties, the chunk index (n/maxChunk pointers, every
// ~maxChunk/2 splits). So an update costs O(log n + spans touched) in practice up to
// millions of spans, and the spans a caller walks are adjacent in memory. A single
// sorted slice was the first version: with 10^4 live spans per array its memmove (with
// GC write barriers, the values hold pointers) cost ~20 µs per access; a
// pointer-per-span tree (treap, skip list) would allocate per span and chase a pointer
// per step instead.
type spanList[T any] struct {
	chunks []*spanChunk[T] // in order, none empty
	ends   []uint64        // ends[k] is the end of chunks[k]'s last span: searched without a pointer chase
	n      int             // spans in all chunks
	out    []span[T]       // scratch for update, kept to avoid an allocation per call
}

// spanChunk is a run of consecutive spans.
type spanChunk[T any] struct{ s []span[T] }

// maxChunk bounds the spans of a chunk: 64 spans of depState are 4.5 KiB.
const maxChunk = 64

// seek returns the position (chunk, index in chunk) of the first span that ends after
// lo, or (len(chunks), 0) when there is none.
func (l *spanList[T]) seek(lo uint64) (int, int) {
	ci := sort.Search(len(l.ends), func(k int) bool { return l.ends[k] > lo })
	if ci == len(l.chunks) {
		return ci, 0
	}
	s := l.chunks[ci].s
	return ci, sort.Search(len(s), func(k int) bool { return s[k].hi > lo })
}

// update rewrites the bytes [lo, hi). It calls f once per piece of the range, in
// order: a piece is the part of one span inside the range (old is its value, ok is
// true) or a gap between spans (ok is false). f returns the piece's new value, or keep
// false to leave nothing there. Parts of spans outside the range keep their values.
// Adjacent spans for which same reports true are merged.
func (l *spanList[T]) update(lo, hi uint64, f func(lo, hi uint64, old T, ok bool) (v T, keep bool), same func(a, b *T) bool) {
	if lo >= hi {
		return
	}
	ci, i := l.seek(lo)
	cj, j := ci, i // the end (exclusive) of the spans replaced
	removed := 0
	out := l.out[:0]
	put := func(s span[T]) {
		// Appended first and compared in place: a pointer to s would make it escape.
		out = append(out, s)
		if n := len(out); n > 1 && out[n-2].hi == out[n-1].lo && same(&out[n-2].val, &out[n-1].val) {
			out[n-2].hi = out[n-1].hi
			out[n-1] = span[T]{}
			out = out[:n-1]
		}
	}
	var zero T
	pos := lo
	for cj < len(l.chunks) {
		s := l.chunks[cj].s
		if j == len(s) {
			cj, j = cj+1, 0
			continue
		}
		sp := s[j]
		if sp.lo >= hi {
			break
		}
		if sp.lo < lo {
			out = append(out, span[T]{sp.lo, lo, sp.val})
		} else if sp.lo > pos {
			if v, keep := f(pos, sp.lo, zero, false); keep {
				put(span[T]{pos, sp.lo, v})
			}
		}
		plo, phi := max(sp.lo, lo), min(sp.hi, hi)
		if v, keep := f(plo, phi, sp.val, true); keep {
			put(span[T]{plo, phi, v})
		}
		if sp.hi > hi {
			put(span[T]{hi, sp.hi, sp.val})
		}
		pos = phi
		j++
		removed++
	}
	if pos < hi {
		if v, keep := f(pos, hi, zero, false); keep {
			put(span[T]{pos, hi, v})
		}
	}
	// Merge with the untouched neighbours on either side.
	if len(out) > 0 {
		if left, ok := l.before(ci, i); ok && left.hi == out[0].lo && same(&left.val, &out[0].val) {
			out[0].lo = left.lo
			if i > 0 {
				i--
			} else {
				ci, i = ci-1, len(l.chunks[ci-1].s)-1
			}
			removed++
		}
		if cj < len(l.chunks) && j == len(l.chunks[cj].s) {
			cj, j = cj+1, 0
		}
		last := &out[len(out)-1]
		if cj < len(l.chunks) {
			if right := &l.chunks[cj].s[j]; right.lo == last.hi && same(&right.val, &last.val) {
				last.hi = right.hi
				j++
				removed++
			}
		}
	}
	l.replace(ci, i, cj, j, out)
	l.n += len(out) - removed
	clear(out) // the scratch must not keep vertices alive
	l.out = out[:0]
}

// before returns the span just before position (ci, i), if any.
func (l *spanList[T]) before(ci, i int) (*span[T], bool) {
	if i > 0 {
		return &l.chunks[ci].s[i-1], true
	}
	if ci > 0 {
		s := l.chunks[ci-1].s
		return &s[len(s)-1], true
	}
	return nil, false
}

// replace replaces the spans from position (ci, i) up to (cj, j), exclusive, with
// out, and rebalances the chunks touched.
func (l *spanList[T]) replace(ci, i, cj, j int, out []span[T]) {
	if ci == len(l.chunks) {
		// Nothing at or after the range: append to the last chunk.
		if len(out) == 0 {
			return
		}
		if ci == 0 {
			l.chunks = append(l.chunks, &spanChunk[T]{})
			l.ends = append(l.ends, 0)
		}
		ci = len(l.chunks) - 1
		i = len(l.chunks[ci].s)
		cj, j = ci, i
	}
	if ci == cj {
		c := l.chunks[ci]
		c.s = slices.Replace(c.s, i, j, out...)
		l.fix(ci)
		return
	}
	a := l.chunks[ci]
	a.s = slices.Replace(a.s, i, len(a.s), out...)
	hasB := cj < len(l.chunks)
	if hasB {
		b := l.chunks[cj]
		b.s = slices.Delete(b.s, 0, j)
	}
	l.deleteChunks(ci+1, cj) // whole chunks in between
	if hasB {
		l.fix(ci + 1) // b, now just after a; fixing it leaves a at ci
	}
	l.fix(ci)
}

// fix rebalances chunk k after a change: an empty chunk goes, a large one splits in
// halves, a small one merges into a neighbour when they fit together.
func (l *spanList[T]) fix(k int) {
	c := l.chunks[k]
	switch {
	case len(c.s) == 0:
		l.deleteChunks(k, k+1)
	case len(c.s) > maxChunk:
		// Keep the first half here; the rest goes to new chunks, half full.
		var pieces []*spanChunk[T]
		for rest := c.s[maxChunk/2:]; len(rest) > 0; {
			n := min(maxChunk/2, len(rest))
			s := make([]span[T], n, maxChunk)
			copy(s, rest[:n])
			pieces = append(pieces, &spanChunk[T]{s: s})
			rest = rest[n:]
		}
		clear(c.s[maxChunk/2:])
		c.s = c.s[:maxChunk/2]
		l.ends[k] = c.s[len(c.s)-1].hi
		l.chunks = slices.Insert(l.chunks, k+1, pieces...)
		l.ends = slices.Insert(l.ends, k+1, make([]uint64, len(pieces))...)
		for i, p := range pieces {
			l.ends[k+1+i] = p.s[len(p.s)-1].hi
		}
	case len(c.s) < maxChunk/4:
		if k+1 < len(l.chunks) && len(c.s)+len(l.chunks[k+1].s) <= maxChunk {
			c.s = append(c.s, l.chunks[k+1].s...)
			l.ends[k] = l.ends[k+1]
			l.deleteChunks(k+1, k+2)
		} else if k > 0 && len(c.s)+len(l.chunks[k-1].s) <= maxChunk {
			p := l.chunks[k-1]
			p.s = append(p.s, c.s...)
			l.ends[k-1] = c.s[len(c.s)-1].hi
			l.deleteChunks(k, k+1)
		} else {
			l.ends[k] = c.s[len(c.s)-1].hi
		}
	default:
		l.ends[k] = c.s[len(c.s)-1].hi
	}
}

// deleteChunks removes chunks [i, j).
func (l *spanList[T]) deleteChunks(i, j int) {
	l.chunks = slices.Delete(l.chunks, i, j)
	l.ends = slices.Delete(l.ends, i, j)
}

// visit calls f for each piece of [lo, hi), in order: the part of a span inside the
// range (ok true) or a gap (ok false, v the zero value).
func (l *spanList[T]) visit(lo, hi uint64, f func(lo, hi uint64, v T, ok bool)) {
	var zero T
	pos := lo
	ci, i := l.seek(lo)
	for ; ci < len(l.chunks); ci, i = ci+1, 0 {
		s := l.chunks[ci].s
		for ; i < len(s) && s[i].lo < hi; i++ {
			sp := &s[i]
			if sp.lo > pos {
				f(pos, sp.lo, zero, false)
			}
			plo, phi := max(sp.lo, lo), min(sp.hi, hi)
			f(plo, phi, sp.val, true)
			pos = phi
		}
		if i < len(s) {
			break
		}
	}
	if pos < hi {
		f(pos, hi, zero, false)
	}
}

// compact calls keep on every span's value, which may rewrite it; spans for which it
// returns false are dropped, adjacent spans with same values merged, and small chunks
// merged. In place, O(n).
func (l *spanList[T]) compact(keep func(v *T) bool, same func(a, b *T) bool) {
	var last *span[T]
	w := 0
	for _, c := range l.chunks {
		k := 0
		for r := range c.s {
			sp := &c.s[r]
			if !keep(&sp.val) {
				continue
			}
			if last != nil && last.hi == sp.lo && same(&last.val, &sp.val) {
				last.hi = sp.hi
				continue
			}
			c.s[k] = *sp
			last = &c.s[k]
			k++
		}
		clear(c.s[k:])
		c.s = c.s[:k]
		if k > 0 {
			l.chunks[w] = c
			w++
		}
	}
	clear(l.chunks[w:])
	l.chunks = l.chunks[:w]
	l.n = 0
	for k := 0; k < len(l.chunks); k++ {
		c := l.chunks[k]
		for k+1 < len(l.chunks) && len(c.s) < maxChunk/2 && len(c.s)+len(l.chunks[k+1].s) <= maxChunk {
			c.s = append(c.s, l.chunks[k+1].s...)
			l.chunks = slices.Delete(l.chunks, k+1, k+2)
		}
		l.n += len(c.s)
	}
	l.ends = l.ends[:0]
	for _, c := range l.chunks {
		l.ends = append(l.ends, c.s[len(c.s)-1].hi)
	}
}

// len returns the number of spans.
func (l *spanList[T]) len() int { return l.n }
