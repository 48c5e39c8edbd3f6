package executor

import (
	"errors"
	"fmt"
	"os"
)

// The executor's error sentinels. Plan errors (core/plan's ErrMessageSize,
// ErrBuffers...) pass through unchanged.
var (
	// ErrMismatch: the ranks did not make the same call (a different collective,
	// plan, size, type, operation or root), or a rank could not make it; every rank
	// fails the call with it before any byte moves, and the executor stays usable.
	ErrMismatch = errors.New("executor: the ranks' calls do not match")
	// ErrRankFailed: a rank died, or its call failed while this one waited for it.
	ErrRankFailed = errors.New("executor: a rank failed")
	// ErrTimeout: a rank did not come within the executor's timeout.
	ErrTimeout = errors.New("executor: timed out")
	// ErrUnsupported: the plan or call needs something this executor does not do
	// (yet): ranks on several hosts, GPU memory, an op kind.
	ErrUnsupported = errors.New("executor: not supported")
	// ErrPeerProtocol: a peer sent a setup record that is malformed or out of bounds.
	ErrPeerProtocol = errors.New("executor: malformed record from a peer")
	// ErrBroken: an earlier call failed part-way (a rank died, timed out); the
	// ranks' states may differ, so every later call fails. Make a new communicator.
	ErrBroken = errors.New("executor: broken by an earlier failure")
	// ErrNoBoard: the ranks have no shared board (several hosts, or the setup of the
	// boards failed): Barrier cannot meet on it.
	ErrNoBoard = errors.New("executor: no board shared by the ranks")
	// ErrClosed: the executor was closed.
	ErrClosed = fmt.Errorf("executor: closed: %w", os.ErrClosed)
)

// RankError is a failure that involves one other rank: the one waited for, written
// to or read from.
type RankError struct {
	Rank int    // the other rank
	Op   string // what this rank was doing: "wait on channel 2 (lane 0, op 5)"
	Err  error  // a sentinel above, or the system's error
}

func (e *RankError) Error() string {
	return fmt.Sprintf("executor: %s, rank %d: %v", e.Op, e.Rank, e.Err)
}

func (e *RankError) Unwrap() error { return e.Err }
