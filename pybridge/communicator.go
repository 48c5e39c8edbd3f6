package pybridge

import (
	"fmt"
	"sync"
	"time"

	"github.com/ucxx-go/ucxx-go/core/collective"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Communicators (core/collective) for Python's Communicator: each on an engine of its
// own, created by CommNew (blocking through bootstrap) and used by handle.

// communicatorTable is the process's communicators and the CommNew calls forming them.
type communicatorTable struct {
	sync.Mutex
	next uint64
	byID map[uint64]*collective.Communicator
	// forming: the cancel channels of CommNew calls under way, by their caller's token,
	// and the closed ones CommCancelNew left for calls not begun (tombstones).
	forming map[uint64]chan struct{}
	// tombstones: the tokens CommCancelNew left closed channels for, oldest first. A
	// cancel that comes after its call returned leaves one no call will take; at most
	// maxTombstones are kept.
	tombstones []uint64
}

var comms = communicatorTable{
	byID:    make(map[uint64]*collective.Communicator),
	forming: make(map[uint64]chan struct{}),
}

// maxTombstones bounds the tombstones kept. One dropped before its CommNew begins
// lets that call run: Python, which cancelled it, closes what it forms.
const maxTombstones = 64

func comm(h uint64) (*collective.Communicator, error) {
	comms.Lock()
	defer comms.Unlock()
	if c := comms.byID[h]; c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("communicator %d is closed: %w", h, ucxx.ErrClosed)
}

// CommNew forms rank's communicator of size ranks with rank 0 listening at root
// ("host:port"), waiting up to timeoutMs for the others, and returns its handle.
// secret is the world's shared secret ("": none; collective.Options.Secret). token
// (non-zero, unique among calls under way) names the call for CommCancelNew.
func CommNew(rank, size int, root string, secret string, timeoutMs int, token uint64) (h uint64, err error) {
	defer guard(&err)
	comms.Lock()
	cancel, cancelledFirst := comms.forming[token]
	if token == 0 || cancelledFirst && !isClosed(cancel) {
		comms.Unlock()
		return 0, fmt.Errorf("CommNew: token %d is taken", token)
	}
	if !cancelledFirst {
		cancel = make(chan struct{})
		comms.forming[token] = cancel
	}
	comms.Unlock()
	defer func() {
		comms.Lock()
		delete(comms.forming, token)
		comms.Unlock()
	}()
	c, err := collective.New(collective.Options{Rank: rank, Size: size, Root: root, Secret: []byte(secret),
		Timeout: time.Duration(timeoutMs) * time.Millisecond, Cancel: cancel})
	if err != nil {
		return 0, err
	}
	comms.Lock()
	defer comms.Unlock()
	comms.next++
	comms.byID[comms.next] = c
	return comms.next, nil
}

// CommCancelNew abandons the CommNew call of token: one under way returns
// collective.ErrCanceled's error soon after and lets go of the root's port; one not
// begun yet returns it at once. It reports whether the call was under way.
func CommCancelNew(token uint64) (found bool, err error) {
	defer guard(&err)
	comms.Lock()
	defer comms.Unlock()
	cancel, ok := comms.forming[token]
	switch {
	case !ok:
		cancel = make(chan struct{})
		comms.forming[token] = cancel // CommNew finds it closed
		if len(comms.tombstones) == maxTombstones {
			if old := comms.tombstones[0]; isClosed(comms.forming[old]) {
				delete(comms.forming, old)
			}
			comms.tombstones = append(comms.tombstones[:0], comms.tombstones[1:]...)
		}
		comms.tombstones = append(comms.tombstones, token)
	case isClosed(cancel):
		return false, nil
	}
	close(cancel)
	return ok, nil
}

// isClosed reports whether ch is closed.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// CommBarrier starts a barrier among communicator h's ranks (every rank calls it): 0
// when it ended within spinUs (its error returned), with no thread hop, else a ticket
// for CommWait. Errors as the collectives' (a rank that never came: a timeout naming
// it).
func CommBarrier(h uint64, spinUs int) (ticket int64, err error) {
	defer collectiveGuard(&err)
	c, err := comm(h)
	if err != nil {
		return 0, err
	}
	return startFinish(spinUs, func() (func() error, error) { return c.StartBarrier(time.Duration(spinUs) * time.Microsecond) })
}

// CommClose closes communicator h.
func CommClose(h uint64) (ok bool, err error) {
	defer guard(&err)
	comms.Lock()
	c := comms.byID[h]
	delete(comms.byID, h)
	comms.Unlock()
	if c == nil {
		return false, fmt.Errorf("CommClose: communicator %d: %w", h, ucxx.ErrClosed)
	}
	return true, c.Close()
}

// CommSplit forms the sub-communicator of communicator h's ranks that pass the same
// color (ranked by key, then rank) and returns its handle and its rank and size as
// "handle rank size"; a negative color gives "0 -1 0". Every rank calls it.
func CommSplit(h uint64, color, key int) (res string, err error) {
	defer collectiveGuard(&err)
	c, err := comm(h)
	if err != nil {
		return "", err
	}
	s, err := c.Split(color, key)
	if err != nil || s == nil {
		return "0 -1 0", err
	}
	comms.Lock()
	defer comms.Unlock()
	comms.next++
	comms.byID[comms.next] = s
	return fmt.Sprintf("%d %d %d", comms.next, s.Rank(), s.Size()), nil
}
