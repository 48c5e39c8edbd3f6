package executor

import (
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/core/internal/pause"
)

// Waiting for a shared word another rank changes: spin a little (the common case on
// an idle core is a few hundred nanoseconds), then sleep on the word's futex in
// short slices, checking between slices that the rank we wait for is alive, that
// the call was not aborted (another lane failed) and that the deadline has not
// passed. A rank's death is seen within one slice.

const (
	// sleepSlice bounds one futex sleep, and so how late a death is seen.
	sleepSlice = 2 * time.Millisecond
)

// waitScope is what one call's waits share.
type waitScope struct {
	deadline time.Time
	timeout  time.Duration
	spin     int
	aborted  *atomic.Bool
	// alive reports whether rank r still runs; nil: always.
	alive func(r int) bool
	// peer, when set, is a look at the ranks while a wait for rank r sleeps: an error
	// from it ends the wait (an unannounced call's peer announced another call).
	peer func(r int) error
}

// errAborted ends the waits of a call whose other lane failed.
var errAborted = fmt.Errorf("executor: another lane of the call failed: %w", ErrRankFailed)

// until waits until done(w's value) holds. rank is the rank expected to change the
// word (for liveness and errors), what names the wait.
func (s *waitScope) until(w sharedWord, done func(uint64) bool, rank int, what func() string) error {
	for i := 0; i < s.spin; i++ {
		if done(w.load()) {
			return nil
		}
		if i&63 == 63 {
			pause.Yield()
		}
	}
	for {
		v := w.load()
		if done(v) {
			return nil
		}
		if s.aborted != nil && s.aborted.Load() {
			return errAborted
		}
		if s.alive != nil && !s.alive(rank) {
			return &RankError{Rank: rank, Op: what(), Err: fmt.Errorf("the rank's process ended: %w", ErrRankFailed)}
		}
		if s.peer != nil {
			if err := s.peer(rank); err != nil {
				return err
			}
		}
		left := time.Until(s.deadline)
		if left <= 0 {
			return &RankError{Rank: rank, Op: what(), Err: fmt.Errorf("nothing came in %v: %w", s.timeout, ErrTimeout)}
		}
		atomic.AddUint32(w.waiters, 1)
		if v2 := w.load(); v2 == v {
			futexWait(uintptr(unsafe.Pointer(w.v)), uint32(v), min(left, sleepSlice))
		}
		atomic.AddUint32(w.waiters, ^uint32(0))
	}
}

// polled waits as until does for a word that changes without a futex wake (a GPU's
// stream write): spin, then check every pollPause.
func (s *waitScope) polled(w sharedWord, done func(uint64) bool, rank int, what func() string) error {
	for i := 0; ; i++ {
		if done(w.load()) {
			return nil
		}
		if i < s.spin {
			if i&63 == 63 {
				pause.Yield()
			}
			continue
		}
		if s.aborted != nil && s.aborted.Load() {
			return errAborted
		}
		if s.alive != nil && !s.alive(rank) {
			return &RankError{Rank: rank, Op: what(), Err: fmt.Errorf("the rank's process ended: %w", ErrRankFailed)}
		}
		if time.Now().After(s.deadline) {
			return &RankError{Rank: rank, Op: what(), Err: fmt.Errorf("nothing came in %v: %w", s.timeout, ErrTimeout)}
		}
		pause.For(pollPause)
	}
}

// pollPause is how long polled sleeps between looks.
const pollPause = 5 * time.Microsecond
