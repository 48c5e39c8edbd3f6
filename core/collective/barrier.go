package collective

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/ucxx-go/ucxx-go/core/executor"
)

// barrierTag is the user tag of barrier messages (p2pTag's 16 bits), plus the round.
const barrierTag = 0xB000

// Barrier returns once every rank has called it. Ranks of one host meet on the
// executor's board (shared memory: executor.Barrier), a few microseconds; ranks
// without a shared board by barrierMessages.
//
// Errors: ErrClosed; the executor's (a *executor.RankError wrapping
// executor.ErrTimeout or ErrRankFailed, naming the rank waited for), or
// barrierMessages'.
func (c *Communicator) Barrier() error {
	return runHere(c.StartBarrier(0))
}

// StartBarrier makes the barrier Barrier makes, as StartCollective makes a collective:
// when every rank came within patience it returns (nil, its error); otherwise rest,
// the remainder, which the caller must run exactly once. Ranks without a shared board
// (executor.ErrNoBoard: several hosts, or their boards could not be set up: every
// rank of such a world finds none) meet by barrierMessages, always in the remainder.
func (c *Communicator) StartBarrier(patience time.Duration) (rest func() error, err error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if c.size == 1 {
		return nil, nil
	}
	wait, err := c.x.StartBarrier(patience)
	switch {
	case wait != nil:
		return func() error { return c.barrierDone(wait()) }, nil
	case errors.Is(err, executor.ErrNoBoard):
		return c.barrierMessages, nil
	}
	return nil, c.barrierDone(err)
}

// barrierDone is a board barrier's outcome: the dissemination barrier instead where
// the ranks have no board.
func (c *Communicator) barrierDone(err error) error {
	switch {
	case errors.Is(err, executor.ErrNoBoard):
		return c.barrierMessages()
	case err != nil:
		return fmt.Errorf("collective: barrier: %w", err)
	}
	return nil
}

// barrierMessages is a dissemination barrier over the communicator's endpoints,
// ceil(log2 size) rounds, in round k a message to rank+2^k and one from rank-2^k.
// Messages of one round between two ranks are matched in the order they were sent,
// so a rank that runs ahead into the next barrier cannot be mistaken for this one.
// Each message carries the sender's barrier number: one a barrier that gave up
// (ErrTimeout) left behind is dropped when it comes, not taken for a later barrier's.
// A sender's numbers only grow: one that repeats or goes back is out of step, so a
// rank cannot hold another's barrier by sending old numbers again and again.
//
// Errors: ErrClosed, ErrTimeout (a rank that never comes), a peer's failure (one that
// died: its endpoint breaks), ErrBarrierOutOfStep (a message of a later barrier than
// this rank's: the ranks' barriers no longer pair), each naming the rank waited for.
func (c *Communicator) barrierMessages() error {
	c.messageBarriers++
	n := c.messageBarriers
	if c.barrierHeard == nil {
		c.barrierHeard = make([]uint64, bits.Len(uint(c.size-1)))
	}
	out := binary.LittleEndian.AppendUint64(nil, n)
	in := make([]byte, 8)
	for k, dist := 0, 1; dist < c.size; k, dist = k+1, dist*2 {
		to, from := (c.rank+dist)%c.size, (c.rank-dist+c.size)%c.size
		sent := make(chan error, 1)
		go func() { sent <- c.Send(to, uint16(barrierTag+k), out) }()
		err := c.barrierMessage(from, k, n, in)
		if serr := <-sent; err == nil && serr != nil {
			return fmt.Errorf("collective: barrier, round %d, to rank %d: %w", k, to, serr)
		}
		if err != nil {
			return fmt.Errorf("collective: barrier, round %d, waiting for rank %d: %w", k, from, err)
		}
	}
	return nil
}

// ErrBarrierOutOfStep: a rank's barrier message came from a later barrier than the
// receiver's (a barrier that gave up on one rank and not the other).
var ErrBarrierOutOfStep = errors.New("collective: the ranks' barriers are out of step")

// barrierMessage receives rank from's message of round k of barrier n into in,
// dropping those of earlier barriers.
func (c *Communicator) barrierMessage(from, k int, n uint64, in []byte) error {
	for {
		got, err := c.Recv(from, uint16(barrierTag+k), in)
		if err != nil {
			return err
		}
		if got != 8 {
			return fmt.Errorf("%w: a barrier message of %d bytes", ErrBarrierOutOfStep, got)
		}
		m := binary.LittleEndian.Uint64(in)
		switch heard := c.barrierHeard[k]; {
		case m > n:
			return fmt.Errorf("%w: rank %d's barrier %d met this rank's %d", ErrBarrierOutOfStep, from, m, n)
		case m <= heard:
			return fmt.Errorf("%w: rank %d's barrier %d came after its %d", ErrBarrierOutOfStep, from, m, heard)
		}
		c.barrierHeard[k] = m
		if m == n {
			return nil
		}
	}
}
