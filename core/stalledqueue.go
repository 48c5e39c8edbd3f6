package core

// stalledQueue holds an endpoint's sends that flow control keeps back, oldest first
// (flowcontrol.go). Each has a sequence number that stays its own while older ones
// leave, so a cancelled send is taken out where it is, leaving a gap that pop skips:
// cancelling n of them costs O(n), not O(n²) moves of the sends after each.
type stalledQueue struct {
	items []submission // items[i] has sequence number base+i; a gap has stalled false
	base  uint64
	live  int // items that are not gaps
}

// len is the number of sends held (gaps not counted).
func (q *stalledQueue) len() int { return q.live }

// push appends s, marking it stalled, and returns its sequence number.
func (q *stalledQueue) push(s *submission) uint64 {
	s.stalled = true
	q.items = append(q.items, *s)
	q.live++
	return q.base + uint64(len(q.items)-1)
}

// pop takes the oldest send held; ok is false when none is.
func (q *stalledQueue) pop() (s submission, ok bool) {
	for len(q.items) > 0 {
		s, q.items[0] = q.items[0], submission{}
		q.items = q.items[1:]
		q.base++
		if s.stalled {
			q.live--
			q.compact()
			return s, true
		}
	}
	return submission{}, false
}

// remove takes out the send with sequence number seq and request id id, if it is
// still held.
func (q *stalledQueue) remove(seq, id uint64) (s submission, ok bool) {
	if seq < q.base || seq-q.base >= uint64(len(q.items)) {
		return submission{}, false
	}
	slot := &q.items[seq-q.base]
	if !slot.stalled || slot.id != id {
		return submission{}, false
	}
	s, *slot = *slot, submission{}
	q.live--
	q.compact()
	return s, true
}

// takeAll empties the queue and returns the sends it held, oldest first.
func (q *stalledQueue) takeAll() []submission {
	out := make([]submission, 0, q.live)
	for _, s := range q.items {
		if s.stalled {
			out = append(out, s)
		}
	}
	q.base += uint64(len(q.items))
	q.items, q.live = nil, 0
	return out
}

// compact drops the storage of a queue left with gaps only.
func (q *stalledQueue) compact() {
	if q.live == 0 {
		q.base += uint64(len(q.items))
		q.items = nil
	}
}
