package executor

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/bits"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ucxx-go/ucxx-go/core/plan"
)

// A plan context is what a plan keeps between calls, as MSCCL++'s execution
// context: per rank a segment with a counter per channel (the semaphore its peers
// signal) and the scratch buffer, the peers' segments mapped, how many signals each
// channel's waits consumed, the lanes' barriers and the plan's semaphores. Counters
// are never reset: a plan's signals and waits balance within each call.
//
// Context segment layout: counter k (memory channels first, then port channels)
// at counterOffset(k), its words one per slice of a sliced call (slices.go), word 0
// every other call's; the scratch buffer at scratchOff, capacity bytes.

type planContext struct {
	plan     *plan.Plan
	rank     int
	memory   Memory
	hash     uint64
	capacity uint64 // scratch bytes this rank's segment holds
	seg      *segment
	scratch  uintptr

	// Per rank (nil/0 where not connected): the peer's segment and its capacity.
	peers    []*segment
	peerCaps []uint64
	// connected is setupPeers(plan, rank): the ranks the context was made with, whose
	// lives its calls watch.
	connected []int

	// expected[k] is how many signals counter k's waits have consumed.
	expected []uint64
	// skip[l] is how many leading ops (the handshake) lane l leaves out (handshakes.go).
	skip     []int
	barriers [plan.MaxBarriers]laneBarrier
	sems     []rankSemaphore
	// syncTimer wakes the lanes blocked on barriers and semaphores at a call's
	// deadline (lanesync.go); nil until a lane first blocks. syncMu guards it, and
	// syncCall and syncDeadline, the call that armed it last (its flag) and that
	// call's deadline; syncExpired is the last call whose deadline it saw pass.
	syncMu       sync.Mutex
	syncTimer    *time.Timer
	syncCall     uint64
	syncDeadline time.Time
	syncExpired  atomic.Uint64
	// execs counts the calls run on the context (MSCCL++'s launch flag, from 1).
	execs uint64
	// alternate: calls alternate scratch halves as a double scratch buffer's, so that
	// they may run unannounced (unannounced.go); the capacity holds both halves.
	alternate bool
	// gpu holds the device side of a context for device memory (gpu.go).
	gpu *gpuContext
	// released: this rank's counters were let through after a failure
	// (releaseOwnCounters: once a context).
	released atomic.Bool
}

func counterCount(p *plan.Plan, r int) int {
	return len(p.Ranks[r].MemoryChannels) + len(p.Ranks[r].PortChannels)
}

func scratchOff(p *plan.Plan, r int) uint64 {
	return roundUp(counterOffset(uint64(counterCount(p, r))), pageBytes)
}

// counterIndex is where counter of rank r's channel i of type t sits.
func counterIndex(p *plan.Plan, r int, t plan.ChannelType, i int) uint64 {
	if t == plan.ChannelPort {
		return uint64(len(p.Ranks[r].MemoryChannels) + i)
	}
	return uint64(i)
}

// planHash identifies a plan's content, so ranks can tell they loaded the same one.
func (x *Executor) planHash(p *plan.Plan) uint64 {
	if h, ok := x.hashes[p]; ok {
		return h
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%+v", *p)
	v := h.Sum64()
	if len(x.hashes) >= 4*x.opts.MaxContexts {
		clear(x.hashes)
	}
	x.hashes[p] = v
	return v
}

// capacityFor rounds a scratch need up to a power of two (at least a page), so
// growing messages make few contexts.
func capacityFor(need uint64) uint64 {
	if need == 0 {
		return 0
	}
	if need <= pageBytes {
		return pageBytes
	}
	return 1 << bits.Len64(need-1)
}

// context returns p's context with room for need scratch bytes, making one with
// the plan's connected peers if there is none (or too small: it is replaced). Every
// rank reaches the same decision: they run the same calls (the board checked it).
func (x *Executor) context(p *plan.Plan, need uint64, mem Memory) (*planContext, error) {
	for i, c := range x.ctxs {
		if c.plan != p || c.memory != mem {
			continue
		}
		if c.capacity >= need {
			x.touchContext(c)
			return c, nil
		}
		x.ctxs = append(x.ctxs[:i:i], x.ctxs[i+1:]...)
		if err := x.retireContext(c); err != nil {
			return nil, err
		}
		break
	}
	if len(x.ctxs) >= x.opts.MaxContexts {
		c := x.ctxs[0]
		x.ctxs = x.ctxs[1:]
		if err := x.retireContext(c); err != nil {
			return nil, err
		}
	}
	x.nctx++
	c, err := x.makeContext(p, capacityFor(need), x.nctx, mem)
	if err != nil {
		return nil, err
	}
	x.ctxs = append(x.ctxs, c)
	return c, nil
}

func (x *Executor) makeContext(p *plan.Plan, capacity, id uint64, mem Memory) (*planContext, error) {
	me, n := x.w.Rank(), x.w.Size()
	off := scratchOff(p, me)
	if off+capacity > maxSegmentBytes {
		return nil, fmt.Errorf("executor: a %d-byte scratch buffer: %w", capacity, ErrUnsupported)
	}
	// Device memory keeps its scratch on the device: the segment has the counters only.
	hostScratch := capacity
	if mem == MemoryCUDA {
		hostScratch = 0
	}
	seg, err := createSegment(max(off+hostScratch, pageBytes))
	if err != nil {
		return nil, err
	}
	c := &planContext{plan: p, rank: me, memory: mem, hash: x.planHash(p), capacity: capacity, seg: seg, scratch: seg.base() + uintptr(off),
		peers: make([]*segment, n), peerCaps: make([]uint64, n), expected: make([]uint64, counterCount(p, me)),
		skip: make([]int, len(p.Ranks[me].Lanes)), alternate: mem == MemoryHost && x.unannounced(p)}
	if mem == MemoryHost {
		// Device lanes keep their handshakes: the announcement says a peer's host left
		// its previous call, not that its streams did, and callerWorkFenced counts on
		// the handshake's waits to keep peers out of buffers the caller's queued work
		// still uses.
		c.skip = handshakeSkip(p, me)
	}
	rk := &p.Ranks[me]
	c.sems = make([]rankSemaphore, len(rk.Semaphores))
	for i, s := range rk.Semaphores {
		c.sems[i].init(s.InitValue)
	}
	mine := &record{kind: recordContext, pid: uint32(os.Getpid()), uid: uint32(os.Getuid()), context: id,
		planHash: c.hash, scratchCap: capacity, segBytes: uint64(len(seg.mem)), name: seg.name}
	if mem == MemoryCUDA {
		if c.gpu, err = x.gpu.newContext(c); err != nil {
			c.close()
			return nil, err
		}
		mine.handle, mine.segAddr = c.gpu.scratchHandle, uint64(c.gpu.scratch)
		binary.LittleEndian.PutUint64(mine.nonce[:8], c.gpu.scratchID)
	}
	peerRecords := make([]*record, n)
	var mu sync.Mutex
	c.connected = setupPeers(p, me)
	err = exchange(x.w, c.connected, mine, func(q int, r *record) error {
		if r.context != id || r.planHash != c.hash {
			return fmt.Errorf("context %d of plan %#x, this rank's is %d of %#x: %w", r.context, r.planHash, id, c.hash, ErrMismatch)
		}
		peerScratch := r.scratchCap
		if mem == MemoryCUDA {
			peerScratch = 0
		}
		want := max(scratchOff(p, q)+peerScratch, pageBytes)
		if r.segBytes != want || r.scratchCap > maxSegmentBytes {
			return fmt.Errorf("a %d-byte segment for %d scratch bytes: %w", r.segBytes, r.scratchCap, ErrPeerProtocol)
		}
		s, err := openSegment(r.name, r.segBytes)
		if err != nil {
			return err
		}
		mu.Lock()
		c.peers[q], c.peerCaps[q], peerRecords[q] = s, r.scratchCap, r
		mu.Unlock()
		return nil
	})
	seg.unlink()
	if err == nil && mem == MemoryCUDA {
		err = x.gpu.connect(c, peerRecords)
	}
	if err != nil {
		x.closeContext(c)
		return nil, err
	}
	return c, nil
}

// touchContext makes c the most recently used context.
func (x *Executor) touchContext(c *planContext) {
	i := len(x.ctxs) - 1
	if x.ctxs[i] == c {
		return
	}
	for i = range x.ctxs {
		if x.ctxs[i] == c {
			break
		}
	}
	copy(x.ctxs[i:], x.ctxs[i+1:])
	x.ctxs[len(x.ctxs)-1] = c
}

// retireContext frees a context a call replaces (its scratch grew) or evicts (too
// many): every rank does so at the same call. A device context is freed only once
// no rank's device can still reach it: this rank's stream-ordered calls ended
// (settle), then a barrier, which every rank enters after settling its own, since a
// peer's ordered call may still be reading this rank's scratch.
func (x *Executor) retireContext(c *planContext) error {
	if c.gpu == nil {
		x.closeContext(c)
		return nil
	}
	serr := x.gpu.settle()
	berr := x.retireBarrier() // entered after a failure too: the peers count on it
	x.closeContext(c)
	if serr != nil {
		return serr
	}
	return berr
}

// retireBarrier counts a retired device context on this rank's board and waits for
// every rank to have counted as many (a word of its own: the user's barriers keep
// their count whatever happens here).
func (x *Executor) retireBarrier() error {
	x.retires++
	x.board.segs[x.w.Rank()].word(boardRetires).store(x.retires)
	return x.awaitBoardCount(boardRetires, x.retires, "retiring device context")
}

// closeContext frees a context, its device side first, once this rank's
// stream-ordered calls in flight ended (ordered.go). A device context that calls a
// failure left behind still hold is leaked instead: what they may yet touch (the
// streams, scratch, registered counters) is neither freed under them nor waited for.
func (x *Executor) closeContext(c *planContext) {
	if c.gpu != nil {
		x.gpu.settle()
		if x.gpu.flight.holds(c) {
			return
		}
		x.gpu.closeContext(c)
	}
	c.close()
}

func (c *planContext) close() {
	c.syncMu.Lock()
	if c.syncTimer != nil {
		c.syncTimer.Stop()
	}
	c.syncMu.Unlock()
	for _, s := range c.peers {
		s.close()
	}
	c.seg.close()
}

// counter is rank r's counter k as this rank maps it.
func (c *planContext) counter(r int, k uint64, me int) sharedWord {
	if r == me {
		return c.seg.word(counterOffset(k))
	}
	return c.peers[r].word(counterOffset(k))
}
