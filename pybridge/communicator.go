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

var comms struct {
	sync.Mutex
	next uint64
	byID map[uint64]*collective.Communicator
}

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
func CommNew(rank, size int, root string, timeoutMs int) (h uint64, err error) {
	defer guard(&err)
	c, err := collective.New(collective.Options{Rank: rank, Size: size, Root: root,
		Timeout: time.Duration(timeoutMs) * time.Millisecond})
	if err != nil {
		return 0, err
	}
	comms.Lock()
	defer comms.Unlock()
	if comms.byID == nil {
		comms.byID = make(map[uint64]*collective.Communicator)
	}
	comms.next++
	comms.byID[comms.next] = c
	return comms.next, nil
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
