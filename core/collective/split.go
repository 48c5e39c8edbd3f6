package collective

import (
	"encoding/binary"
	"fmt"
	"sort"
	"time"
	"unsafe"

	"github.com/ucxx-go/ucxx-go/core"
	"github.com/ucxx-go/ucxx-go/core/executor"
	"github.com/ucxx-go/ucxx-go/core/reduce"
	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Split forms sub-communicators (MPI_Comm_split): the ranks that pass the same
// color form one, ranked by (key, rank); a negative color joins none (nil). Every
// rank calls it. Each sub-communicator has an engine of its own, its worker
// addresses exchanged through this communicator (no listener), so it works beside
// this one and the application's endpoints. As New, it first readies the GPU contexts
// the process uses by now for stream-ordered calls (readyActiveContexts).
//
// Errors: ErrClosed; this communicator's (the colors travel in an allgather);
// ErrBootstrap or ErrTimeout forming the new one.
func (c *Communicator) Split(color, key int) (*Communicator, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	readyActiveContexts()
	// Everyone's (color, key), through an allgather of 16 bytes each.
	mine := ucxx.CMalloc(16)
	all := ucxx.CMalloc(uint64(16 * c.size))
	defer ucxx.CFree(mine)
	defer ucxx.CFree(all)
	binary.LittleEndian.PutUint64(unsafe.Slice((*byte)(mine), 16), uint64(int64(color)))
	binary.LittleEndian.PutUint64(unsafe.Slice((*byte)(mine), 16)[8:], uint64(int64(key)))
	if err := c.Collective(AllGather, 0, executor.Call{Send: executor.Buffer{Addr: uintptr(mine), Bytes: 16},
		Recv: executor.Buffer{Addr: uintptr(all), Bytes: uint64(16 * c.size)}, DType: reduce.Int64}); err != nil {
		return nil, fmt.Errorf("collective: split: %w", err)
	}
	if color < 0 {
		return nil, nil
	}
	b := unsafe.Slice((*byte)(all), 16*c.size)
	type member struct{ key, rank int }
	var group []member
	for r := range c.size {
		if int(int64(binary.LittleEndian.Uint64(b[16*r:]))) == color {
			group = append(group, member{int(int64(binary.LittleEndian.Uint64(b[16*r+8:]))), r})
		}
	}
	sort.Slice(group, func(i, j int) bool {
		if group[i].key != group[j].key {
			return group[i].key < group[j].key
		}
		return group[i].rank < group[j].rank
	})
	ranks := make([]int, len(group))
	me := -1
	for i, m := range group {
		ranks[i] = m.rank
		if m.rank == c.rank {
			me = i
		}
	}
	return c.formSub(ranks, me)
}

// Tags (Communicator's 16 bits) of a split's worker-address exchange.
const (
	tagSplitHello = 0xC101
	tagSplitTable = 0xC102
)

// formSub makes the sub-communicator of ranks (this communicator's ranks, in the
// new order; this rank is ranks[me]): the first gathers the others' worker
// addresses over this communicator and sends everyone the table, as bootstrap's
// root does over TCP.
func (c *Communicator) formSub(ranks []int, me int) (*Communicator, error) {
	e, err := core.New(core.Options{})
	if err != nil {
		return nil, err
	}
	s := &Communicator{rank: me, size: len(ranks), timeout: c.timeout, e: e, r: newCompletionReader(e)}
	fail := func(err error) (*Communicator, error) {
		s.shutdown()
		return nil, fmt.Errorf("collective: split: %w", err)
	}
	self, err := e.WorkerAddress()
	if err != nil {
		return fail(err)
	}
	var addrs [][]byte
	cpus := ownCPUs()
	switch {
	case len(ranks) == 1:
		addrs = [][]byte{self}
	case me == 0:
		addrs = make([][]byte, len(ranks))
		addrs[0] = self
		buf := make([]byte, helloHeader+maxWorkerAddress)
		for i := 1; i < len(ranks); i++ {
			n, err := c.Recv(ranks[i], tagSplitHello, buf)
			if err != nil {
				return fail(err)
			}
			h, err := decodeHello(buf[:n])
			if err != nil || h.rank != i || h.size != len(ranks) {
				return fail(fmt.Errorf("rank %d's hello as member %d of %d: %w", ranks[i], i, len(ranks), ErrBootstrap))
			}
			addrs[i] = append([]byte(nil), h.addr...)
			cpus = min(cpus, h.cpus)
		}
		table := encodeTable(tableOK, cpus, addrs) // over the world's endpoints: no MAC needed
		for i := 1; i < len(ranks); i++ {
			if err := c.Send(ranks[i], tagSplitTable, table); err != nil {
				return fail(err)
			}
		}
	default:
		if err := c.Send(ranks[0], tagSplitHello, encodeHello(hello{rank: me, size: len(ranks), cpus: cpus, addr: self}, nil)); err != nil {
			return fail(err)
		}
		buf := make([]byte, tableBytes(len(ranks)))
		n, err := c.Recv(ranks[0], tagSplitTable, buf)
		if err != nil {
			return fail(err)
		}
		if addrs, cpus, err = decodeTable(buf[:n], len(ranks)); err != nil {
			return fail(err)
		}
	}
	if s.peers, err = connectRanks(e, addrs, me, cpus); err != nil {
		return fail(err)
	}
	if err := exchangeTagIDs(e, s.r, s.peers, me, time.Now().Add(c.timeout)); err != nil {
		return fail(err)
	}
	s.x = executor.New(s, executor.Options{Timeout: c.timeout})
	return s, nil
}
