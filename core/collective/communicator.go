package collective

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ucxx-go/ucxx-go/core"
	"github.com/ucxx-go/ucxx-go/core/executor"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Options configure a Communicator.
type Options struct {
	Rank, Size int
	// Root is rank 0's listening address, "host:port", which every rank is given.
	Root string
	// Secret is shared by the world's ranks (every rank is given the same): the root
	// takes a rank only with proof of it, and a rank a table only from a root with it
	// (bootstrap.go). Empty: any engine that reaches the root may join.
	Secret []byte
	// Timeout bounds bootstrap and every step that waits for a peer (DefaultTimeout
	// when 0).
	Timeout time.Duration
	// Engine configures the communicator's own engine.
	Engine core.Options
	// Cancel, when closed, abandons a bootstrap still under way: New stops its engine
	// (the root's listener with it) and returns ErrCanceled. Nil: never.
	Cancel <-chan struct{}
}

// ErrCanceled: New's bootstrap was abandoned (Options.Cancel).
var ErrCanceled = errors.New("collective: bootstrap cancelled")

// DefaultTimeout is Options.Timeout's default.
const DefaultTimeout = 60 * time.Second

// ErrClosed: the communicator was closed.
var ErrClosed = fmt.Errorf("collective: communicator closed: %w", os.ErrClosed)

// canceled is New's error once opts.Cancel is closed.
func (opts *Options) canceled() error {
	return fmt.Errorf("%w (rank %d of %d at %s)", ErrCanceled, opts.Rank, opts.Size, opts.Root)
}

// Communicator is this process's rank among Size processes, with an endpoint to each
// other rank on an engine of its own.
type Communicator struct {
	rank, size int
	timeout    time.Duration
	e          *core.Engine
	r          *completionReader
	peers      *peers
	// x runs the communicator's collectives (execution plans) from registry's.
	x        *executor.Executor
	registry Registry

	mu     sync.Mutex
	closed bool
	// messageBarriers counts this rank's barriers by messages (barrierMessages);
	// barrierHeard holds, for each round, the barrier number of the last message
	// taken from that round's sender (barrierMessage).
	messageBarriers uint64
	barrierHeard    []uint64
}

// New forms a communicator with the other ranks (bootstrap.go); every rank calls it
// with the same Size and Root and its own Rank. It first readies the GPU contexts the
// process already uses for stream-ordered calls (readyActiveContexts), which waits for
// the work queued on those devices, without a limit: work that waits for this thread
// never lets it return.
//
// Errors: ErrBootstrap (bad arguments, a duplicate rank, sizes that disagree, a
// malformed table), ErrTimeout, ErrCanceled (at once, nothing made, when
// opts.Cancel is closed already), the engine's errors.
func New(opts Options) (c *Communicator, err error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	select {
	case <-opts.Cancel:
		return nil, opts.canceled()
	default:
	}
	// Before the bootstrap: a device that never becomes idle holds this rank back
	// there, where the others' bootstrap times out, not their first collective.
	readyActiveContexts()
	e, err := core.New(opts.Engine)
	if err != nil {
		return nil, err
	}
	c = &Communicator{rank: opts.Rank, size: opts.Size, timeout: opts.Timeout, e: e, r: newCompletionReader(e)}
	// The bootstrap ends once: formed (or failed), or cancelled, whichever comes first.
	const running, ended, canceled = 0, 1, 2
	var state atomic.Int32
	done := make(chan struct{})
	if opts.Cancel != nil {
		go func() {
			select {
			case <-opts.Cancel:
				if state.CompareAndSwap(running, canceled) {
					e.Shutdown(time.Second) // every wait of the bootstrap ends
				}
			case <-done:
			}
		}()
	}
	c.peers, err = bootstrap(e, c.r, opts.Rank, opts.Size, opts.Root, opts.Secret, opts.Timeout)
	if !state.CompareAndSwap(running, ended) {
		c.shutdown()
		return nil, opts.canceled()
	}
	close(done)
	if err != nil {
		c.shutdown()
		return nil, err
	}
	c.x = executor.New(c, executor.Options{Timeout: opts.Timeout})
	return c, nil
}

// Rank is this process's rank; Size the number of ranks.
func (c *Communicator) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Communicator) Size() int { return c.size }

// coresPerRank is the fewest CPUs any rank may use divided by the rank count, at
// least 1: the same on every rank.
func (c *Communicator) coresPerRank() int { return max(c.peers.cpus/c.size, 1) }

// Engine is the communicator's own engine.
func (c *Communicator) Engine() *core.Engine { return c.e }

// p2pTag is the tag of a point-to-point message from rank src with the user tag tag
// (16 bits), without the receiving endpoint's id (tagids.go): bit 31 marks
// communicator traffic, bits 16-27 the source rank.
func p2pTag(src int, tag uint16) uint64 { return 1<<31 | uint64(src)<<16 | uint64(tag) }

// Send sends b to rank dst with tag and waits for the send to end.
//
// Errors: ErrClosed, a rank out of range, ErrTimeout, the endpoint's failure.
func (c *Communicator) Send(dst int, tag uint16, b []byte) error {
	if err := c.check(dst); err != nil {
		return err
	}
	t, err := c.e.TagSendInline(c.peers.eps[dst], ptr(b), uint64(len(b)), c.peers.sendIDs[dst]|p2pTag(c.rank, tag), ucxx.MemoryHost, 0)
	if err != nil {
		return err
	}
	_, err = c.ended(t, b, fmt.Sprintf("Send to rank %d", dst))
	return err
}

// Recv receives from rank src with tag into b and returns the bytes received.
//
// Errors: as Send; a message longer than b is StatusMessageTruncated.
func (c *Communicator) Recv(src int, tag uint16, b []byte) (int, error) {
	if err := c.check(src); err != nil {
		return 0, err
	}
	t, err := c.e.TagRecvInline(c.peers.eps[src], ptr(b), uint64(len(b)), c.peers.recvIDs[src]|p2pTag(src, tag), ^uint64(0), ucxx.MemoryHost, 0)
	if err != nil {
		return 0, err
	}
	n, err := c.ended(t, b, fmt.Sprintf("Recv from rank %d", src))
	return int(n), err
}

// ended returns the outcome of the transfer behind t, on b: at once when it ended
// within the engine's inline wait (no hop through the completion reader: a 2-rank
// barrier's round trip), else once its completion comes (complete).
func (c *Communicator) ended(t core.Ticket, b []byte, op string) (uint64, error) {
	if t.Done {
		runtime.KeepAlive(b)
		if err := t.Status.Err(op); err != nil {
			return 0, fmt.Errorf("collective: %s: %w", op, err)
		}
		return t.Length, nil
	}
	c.r.hold(t.ID, b)
	return c.complete(t.ID, op)
}

// complete waits up to the timeout for request id and returns its length; a request
// that outlives the timeout is cancelled (and its cancellation awaited, briefly).
func (c *Communicator) complete(id uint64, op string) (uint64, error) {
	cm, err := c.r.wait(id, time.Now().Add(c.timeout))
	if err != nil {
		c.e.Cancel(id)
		c.r.wait(id, time.Now().Add(time.Second))
		return 0, fmt.Errorf("collective: %s: %w", op, err)
	}
	if err := ucxx.Status(cm.Status).Err(op); err != nil {
		return 0, fmt.Errorf("collective: %s: %w", op, err)
	}
	return cm.Length, nil
}

// open returns ErrClosed once the communicator is closed.
func (c *Communicator) open() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	return nil
}

func (c *Communicator) check(peer int) error {
	if err := c.open(); err != nil {
		return err
	}
	if peer < 0 || peer >= c.size || peer == c.rank {
		return fmt.Errorf("collective: rank %d of %d (this is %d): %w", peer, c.size, c.rank, ucxx.StatusInvalidParam)
	}
	return nil
}

// Close shuts the communicator's engine down. A second Close returns an error
// wrapping os.ErrClosed.
func (c *Communicator) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("collective: close: %w", os.ErrClosed)
	}
	c.closed = true
	c.mu.Unlock()
	return c.shutdown()
}

func (c *Communicator) shutdown() error {
	if c.x != nil {
		c.x.Close()
	}
	err := c.e.Shutdown(5 * time.Second)
	<-c.r.done
	c.e.FreeQueue()
	if errors.Is(err, core.ErrEngineClosed) {
		return nil
	}
	return err
}
