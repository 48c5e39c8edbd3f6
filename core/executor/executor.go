package executor

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/ucxx-go/ucxx-go/core/plan"
)

// Options configure an Executor.
type Options struct {
	// Timeout bounds every wait of a call for another rank (DefaultTimeout when 0).
	Timeout time.Duration
	// Spin is how many times a wait polls before it sleeps (DefaultSpin when 0;
	// negative: never spin).
	Spin int
	// MaxContexts bounds the plan contexts kept (DefaultMaxContexts when 0).
	MaxContexts int
}

// Defaults of Options.
const (
	DefaultTimeout     = 60 * time.Second
	DefaultSpin        = 4096
	DefaultMaxContexts = 16
)

// Executor runs execution plans among the ranks of a World: every rank calls
// Execute with the same plan and sizes, in the same order. It is safe for
// concurrent use; calls run one at a time, in the order they are made.
//
// Today it runs plans over host memory among ranks of one host: memory and port
// channels alike through shared-memory segments (semaphores and scratch) and
// single-copy transfers into the ranks' own buffers (process_vm_readv/writev).
type Executor struct {
	w    World
	opts Options

	mu sync.Mutex // one call at a time; guards everything below
	// turns orders what waits for mu (turns.go); it has a lock of its own.
	turns turns
	board *board
	ctxs  []*planContext // least recently used first
	nctx  uint64         // contexts made so far (the same on every rank)
	seq   uint64         // calls made so far
	// barriers counts the barriers this rank has entered (barrier.go); retires the
	// device contexts it retired (context.go), every rank at the same calls.
	barriers uint64
	retires  uint64
	broken   error
	// panicked: a panic let the executor go (release) while lanes of the call it
	// broke may still run on goroutines: Close leaks what they may touch.
	panicked bool
	closed   bool
	hashes   map[*plan.Plan]uint64
	layouts  map[layoutKey]*plan.Layout
	// sliceables caches sliceable per plan and sizes (slices.go).
	sliceables map[layoutKey]bool
	// peerCalls is collect's room for the ranks' announcements, reused by every call
	// (calls are serialized; a call's records are not kept past it).
	peerCalls []peerCall
	// unannouncedPlans caches runsUnannounced per plan (unannounced.go).
	unannouncedPlans map[*plan.Plan]bool
	// call, run and lane0 are the state of the call in progress (one at a time),
	// reused by every call; alive and peerLook are its scope's looks, made once.
	call     callStart
	run      callRun
	lane0    laneRun
	alive    func(r int) bool
	peerLook func(int) error
	// gpu is the CUDA side, made by the first call on device memory.
	gpu *gpuState
	// callerStreams is the current device call's distinct caller streams it is ordered
	// on (OrderedStreams): deviceCall's, for runDevice; reused call after call.
	callerStreams []uintptr
}

// New returns an executor for w's ranks. It sets nothing up: the first Execute
// does, with the other ranks.
func New(w World, opts Options) *Executor {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Spin == 0 {
		opts.Spin = DefaultSpin
	} else if opts.Spin < 0 {
		opts.Spin = 0
	}
	if opts.MaxContexts <= 0 {
		opts.MaxContexts = DefaultMaxContexts
	}
	x := &Executor{w: w, opts: opts, hashes: make(map[*plan.Plan]uint64)}
	x.alive = func(r int) bool { return x.board.alive(r) }
	x.peerLook = func(int) error { return x.announcedMismatch(&x.call) }
	return x
}

// Close unmaps every segment; a call in progress finishes first, and so do the
// stream-ordered calls still on the device. Operations waiting for their turn
// (turns.go) do not hold it up: Close goes before them, and they fail with
// ErrClosed. A second Close returns an error wrapping os.ErrClosed.
func (x *Executor) Close() error {
	x.mu.Lock() // no turn: it goes before the operations still waiting for theirs
	defer x.release()
	if x.closed {
		return ErrClosed
	}
	x.closed = true
	if x.gpu != nil {
		// Nothing queued may outlive what it uses (a failure found here has no caller
		// left: Synchronize reports failures): the calls in flight get the timeout to
		// end, and what those that did not may touch is leaked (closeContext). Then
		// the watcher stops before the board it looks at goes.
		x.gpu.settleUntil(0, time.Now().Add(x.opts.Timeout))
		x.gpu.flight.shut()
	}
	if x.panicked {
		// A call that panicked may have lanes still running on goroutines, reading
		// the contexts' segments and the board: unmapping them under those would be
		// a fault. Leak them (this executor is broken anyway).
		x.ctxs, x.board, x.gpu = nil, nil, nil
		return nil
	}
	for _, c := range x.ctxs {
		x.closeContext(c)
	}
	x.ctxs = nil
	x.board.close()
	x.board = nil
	x.gpu.close()
	x.gpu = nil
	return nil
}

// The board: a segment per rank, mapped by every rank, where each call is announced
// before any byte moves: a slot per call (a ring of boardSlots) with the call's
// fingerprint and buffer addresses, and the last call whose slots the rank read; and
// the count of barriers the rank has entered (barrier.go).
const (
	boardNonceOff = 24
	boardStarted  = 64
	boardBarriers = 128
	boardRetires  = 160 // device contexts retired (context.go): a barrier of its own
	boardSlotsOff = 192
	boardSlots    = 4

	// A slot: the call's number (a shared word), then its fields; for device
	// memory, the IPC handles of the allocations holding the buffers and the
	// buffers' offsets in them.
	boardSlotBytes  = 256
	slotFingerprint = 16
	slotStatus      = 24
	slotInAddr      = 32
	slotInBytes     = 40
	slotOutAddr     = 48
	slotOutBytes    = 56
	slotInHandle    = 64
	slotOutHandle   = 128
	slotInOffset    = 192
	slotOutOffset   = 200
	slotMemory      = 208
	slotInID        = 216
	slotOutID       = 224
	slotDevice      = 232
	slotBlocks      = 240 // 1: the call's block tables follow the slots
	slotPlan        = 248 // the plan's hash | 1 when the call runs unannounced, else 0
)

// A call with per-call blocks (alltoallv) publishes its block table after the
// slots: per slot 4n words, the send offsets, send lengths, receive offsets and
// receive lengths of its n blocks, in bytes.
func tablesOff() uint64 { return boardSlotsOff + boardSlots*boardSlotBytes }

func tableOff(seq uint64, n int) uint64 { return tablesOff() + (seq%boardSlots)*uint64(4*n*8) }

// boardBytesFor is the size of a board for n ranks.
func boardBytesFor(n int) uint64 {
	return roundUp(tablesOff()+boardSlots*uint64(4*n*8), pageBytes)
}

// board is this rank's view of every rank's board (own at index rank).
type board struct {
	segs   []*segment
	pids   []int
	pidfds []int
	// self is the segment of this rank's own board.
	self *segment
}

func (b *board) close() {
	if b == nil {
		return
	}
	for i, s := range b.segs {
		s.close()
		if b.pidfds[i] >= 0 {
			closeFD(b.pidfds[i])
		}
	}
}

// alive reports whether rank r's process still runs.
func (b *board) alive(r int) bool { return b.pidfds[r] < 0 || !pidfdExited(b.pidfds[r]) }

func (b *board) started(r int) sharedWord { return b.segs[r].word(boardStarted) }

func slotOff(seq uint64) uint64 { return boardSlotsOff + (seq%boardSlots)*boardSlotBytes }

// setUp makes this rank's board and maps every other rank's, checking that each is
// on this host and that their memory can be reached with process_vm_readv/writev.
func (x *Executor) setUp() error {
	n, me := x.w.Size(), x.w.Rank()
	own, err := createSegment(boardBytesFor(n))
	if err != nil {
		return err
	}
	b := &board{segs: make([]*segment, n), pids: make([]int, n), pidfds: make([]int, n), self: own}
	for i := range b.pidfds {
		b.pidfds[i] = -1
	}
	b.segs[me], b.pids[me] = own, os.Getpid()
	mine := &record{kind: recordBoard, pid: uint32(os.Getpid()), uid: uint32(os.Getuid()), bootID: thisHost(),
		segBytes: boardBytesFor(n), segAddr: uint64(own.base()), nonce: newNonce(), name: own.name}
	copy(own.mem[boardNonceOff:], mine.nonce[:])
	var mu sync.Mutex
	peers := make([]int, 0, n-1)
	for r := range n {
		if r != me {
			peers = append(peers, r)
		}
	}
	err = exchange(x.w, peers, mine, func(p int, r *record) error {
		if r.bootID != mine.bootID || r.uid != mine.uid {
			return fmt.Errorf("rank %d runs on another host or as another user: collectives across hosts are not built yet: %w", p, ErrUnsupported)
		}
		if r.segBytes != boardBytesFor(n) {
			return fmt.Errorf("a %d-byte board: %w", r.segBytes, ErrPeerProtocol)
		}
		s, err := openSegment(r.name, boardBytesFor(n))
		if err != nil {
			return err
		}
		// The nonce in the mapping, in the record, and read from the announced
		// process at the announced address must agree: the pid is the segment's
		// owner, and its memory is reachable (process_vm_readv is allowed).
		probe := make([]byte, 16)
		perr := vmReadInto(int(r.pid), probe, uintptr(r.segAddr)+boardNonceOff)
		if perr != nil || !bytes.Equal(probe, r.nonce[:]) || !bytes.Equal(s.mem[boardNonceOff:boardNonceOff+16], r.nonce[:]) {
			s.close()
			if perr != nil {
				return fmt.Errorf("cannot reach rank %d's memory (process_vm_readv: %v): %w", p, perr, ErrUnsupported)
			}
			return fmt.Errorf("rank %d's board does not belong to process %d: %w", p, r.pid, ErrPeerProtocol)
		}
		fd, err := pidfdOpen(int(r.pid))
		if err != nil {
			s.close()
			return fmt.Errorf("pidfd of rank %d: %w", p, err)
		}
		mu.Lock()
		b.segs[p], b.pids[p], b.pidfds[p] = s, int(r.pid), fd
		mu.Unlock()
		return nil
	})
	own.unlink()
	if err != nil {
		b.close()
		return err
	}
	x.board = b
	return nil
}
