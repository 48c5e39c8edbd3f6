package core

import "sort"

// stalledQueue holds an endpoint's sends that flow control keeps back, oldest first
// (flowcontrol.go). Each has a sequence number of its own, so a cancelled send is
// found (binary search) and taken out where it is, leaving a gap: cancelling n of
// them costs O(n log n), not O(n²) moves of the sends after each. Gaps at the front
// are dropped at once, and the rest once they outnumber the sends held, so the
// queue's storage stays within about twice what it holds, however many sends are
// cancelled while the endpoint stays stalled.
type stalledQueue struct {
	items []stalledItem // in sequence order; a gap has stalled false, and items[0] is none
	next  uint64        // the next push's sequence number
	live  int           // items that are not gaps
}

// stalledItem is a held-back send and its sequence number.
type stalledItem struct {
	seq uint64
	s   submission
}

// compactMin is the least storage a queue compacts: below it gaps cost little.
const compactMin = 64

// len is the number of sends held (gaps not counted).
func (q *stalledQueue) len() int { return q.live }

// push appends s, marking it stalled, and returns its sequence number.
func (q *stalledQueue) push(s *submission) uint64 {
	s.stalled = true
	seq := q.next
	q.next++
	q.items = append(q.items, stalledItem{seq, *s})
	q.live++
	return seq
}

// pop takes the oldest send held; ok is false when none is.
func (q *stalledQueue) pop() (s submission, ok bool) {
	if len(q.items) == 0 {
		return submission{}, false
	}
	s = q.items[0].s
	q.items[0] = stalledItem{}
	q.items = q.items[1:]
	q.live--
	q.trimFront()
	return s, true
}

// remove takes out the send with sequence number seq and request id id, if it is
// still held.
func (q *stalledQueue) remove(seq, id uint64) (s submission, ok bool) {
	i := sort.Search(len(q.items), func(i int) bool { return q.items[i].seq >= seq })
	if i == len(q.items) || q.items[i].seq != seq || !q.items[i].s.stalled || q.items[i].s.id != id {
		return submission{}, false
	}
	s = q.items[i].s
	q.items[i].s = submission{}
	q.live--
	q.trimFront()
	if gaps := len(q.items) - q.live; gaps > q.live && len(q.items) >= compactMin {
		q.compact()
	}
	return s, true
}

// takeAll empties the queue and returns the sends it held, oldest first.
func (q *stalledQueue) takeAll() []submission {
	out := make([]submission, 0, q.live)
	for i := range q.items {
		if q.items[i].s.stalled {
			out = append(out, q.items[i].s)
		}
	}
	q.items, q.live = nil, 0
	return out
}

// trimFront drops the gaps at the front, and the storage of a queue left empty.
func (q *stalledQueue) trimFront() {
	for len(q.items) > 0 && !q.items[0].s.stalled {
		q.items[0] = stalledItem{}
		q.items = q.items[1:]
	}
	if len(q.items) == 0 {
		q.items = nil
	}
}

// compact moves the sends held into storage of their own, gaps left out; their
// sequence numbers do not change.
func (q *stalledQueue) compact() {
	kept := make([]stalledItem, 0, 2*q.live)
	for i := range q.items {
		if q.items[i].s.stalled {
			kept = append(kept, q.items[i])
		}
	}
	q.items = kept
}
