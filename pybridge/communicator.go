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

// CommBarrier returns once every rank of communicator h has called it.
func CommBarrier(h uint64) (ok bool, err error) {
	defer guard(&err)
	c, err := comm(h)
	if err != nil {
		return false, err
	}
	return true, c.Barrier()
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
