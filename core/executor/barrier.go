package executor

import (
	"errors"
	"fmt"
	"time"
)

// Barrier returns once every rank has entered as many barriers as this one has: each
// rank counts its barriers in a word of its board and waits, spinning and then
// sleeping on the futex as a call's waits do, until every other rank's word has
// reached its own count. Only the board is involved: no call is announced, so a
// barrier that fails (a rank that never came, or died) leaves the executor as it was.
// A rank that gave up on a barrier is one ahead of a late rank, whose barrier then
// passes at once; the next one waits for everyone again.
//
// The first use sets the board up with the other ranks, as a first call does.
//
// Errors: ErrClosed; ErrUnsupported (ranks on several hosts: no board); ErrBroken
// after an earlier failure part-way through a call; a *RankError wrapping ErrTimeout
// or ErrRankFailed, naming a rank that did not come.
func (x *Executor) Barrier() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return ErrClosed
	}
	if x.broken != nil {
		if errors.Is(x.broken, ErrUnsupported) {
			return x.broken
		}
		return fmt.Errorf("%w: %v", ErrBroken, x.broken)
	}
	if x.board == nil {
		if err := x.setUp(); err != nil {
			x.broken = err
			return err
		}
	}
	me := x.w.Rank()
	x.barriers++
	want := x.barriers
	x.board.segs[me].word(boardBarriers).store(want)
	scope := waitScope{deadline: time.Now().Add(x.opts.Timeout), timeout: x.opts.Timeout, spin: x.opts.Spin, alive: x.alive}
	for q := range x.w.Size() {
		if q == me {
			continue
		}
		if err := scope.until(x.board.segs[q].word(boardBarriers), func(v uint64) bool { return v >= want }, q,
			func() string { return fmt.Sprintf("barrier %d", want) }); err != nil {
			return err
		}
	}
	return nil
}
