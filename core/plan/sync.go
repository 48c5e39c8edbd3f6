package plan

import (
	"fmt"
	"slices"
)

// Checks that the plan's synchronisation can complete. They catch the plans that
// would hang (a wait nobody signals, a barrier its lanes cannot fill, a semaphore
// acquired more often than it starts at and never released, an NVLS group set up in
// different orders) or leave counters off by some for the next execution (more
// signals than waits). What they cannot catch is a cycle of waits that each would be
// satisfied eventually: that needs running the plan (the executor's waits, its
// barriers and semaphores too, end at the call's timeout).

// pairChannels numbers each memory and port channel among the channels of its type
// to the same peer (Ordinal) and finds its pair on the peer (Reverse): MSCCL++
// builds semaphores per peer in list order, so A's k-th channel of a type to B
// pairs with B's k-th to A. A channel without a pair is ErrUnmatched. MSCCL++ 0.9
// builds an unused semaphore for it so the handshake completes, but a signal on it
// is never waited for, and a wait on it never returns.
func pairChannels(p *Plan) error {
	for _, t := range []ChannelType{ChannelMemory, ChannelPort} {
		// byPeer[r][q]: indices of rank r's channels of type t to q, in order.
		byPeer := make([]map[int][]int, len(p.Ranks))
		for r := range p.Ranks {
			byPeer[r] = map[int][]int{}
			list := p.Ranks[r].Channels(t)
			for i := range list {
				q := list[i].Peer
				list[i].Ordinal = len(byPeer[r][q])
				byPeer[r][q] = append(byPeer[r][q], i)
			}
		}
		for r := range p.Ranks {
			list := p.Ranks[r].Channels(t)
			for i := range list {
				c := &list[i]
				back := byPeer[c.Peer][r]
				if c.Ordinal >= len(back) {
					return rankWhere(r).at("channels").errf(ErrUnmatched,
						"%s channel %d is rank %d's channel #%d to rank %d, but rank %d has only %d %s channels to rank %d",
						t, i, r, c.Ordinal, c.Peer, c.Peer, len(back), t, r)
				}
				c.Reverse = back[c.Ordinal]
			}
		}
	}
	return nil
}

// checkSwitchGroups checks that ranks agree on their NVLS groups: MSCCL++ sets each
// up with a collective call among its members, in each rank's list order, so for
// every two ranks the groups that contain both must come in the same order, with
// the same members, on both.
func checkSwitchGroups(p *Plan) error {
	ids := map[string]int{} // a group's sorted member list -> small id
	type pair struct{ r, q int }
	seq := map[pair][]int{}
	for r := range p.Ranks {
		for _, s := range p.Ranks[r].SwitchChannels {
			members := slices.Clone(s.Ranks)
			slices.Sort(members)
			key := fmt.Sprint(members)
			id, ok := ids[key]
			if !ok {
				id = len(ids)
				ids[key] = id
			}
			for _, q := range members {
				if q != r {
					seq[pair{r, q}] = append(seq[pair{r, q}], id)
				}
			}
		}
	}
	for r := range p.Ranks {
		for q := range p.Ranks {
			if q <= r {
				continue
			}
			a, b := seq[pair{r, q}], seq[pair{q, r}]
			if !slices.Equal(a, b) {
				return rankWhere(r).at("channels").errf(ErrUnmatched,
					"ranks %d and %d list different switch groups containing both (%d and %d groups, or another order)",
					r, q, len(a), len(b))
			}
		}
	}
	return nil
}

// syncKey counts signals or waits on one channel in one context. A context is the
// top level of a lane (unit 0) or a pipeline's iteration (unit, chunks): ops inside
// a pipeline run once per iteration, and a pipeline's iteration count depends only
// on its iter_context and the chunk size, which MSCCL++ assumes every rank shares.
type syncKey struct {
	rank    int         // the signalling rank
	typ     ChannelType // memory or port
	channel int         // the signalling rank's channel index
	unit    uint64
	chunks  int
}

// checkSignalsAndWaits checks that every channel is signalled as often as its pair
// waits, context by context. A wait with no signal hangs; a signal with no wait
// leaves the semaphore ahead, so the next execution's wait returns early.
// pws and pwsf signal as well; relaxed and plain signals and waits share counters.
func checkSignalsAndWaits(p *Plan) error {
	signals, waits := map[syncKey]int{}, map[syncKey]int{}
	var order []syncKey // first-seen order, for a deterministic report
	note := func(m map[syncKey]int, k syncKey) {
		if signals[k] == 0 && waits[k] == 0 {
			order = append(order, k)
		}
		m[k]++
	}
	for r := range p.Ranks {
		rk := &p.Ranks[r]
		for li := range rk.Lanes {
			l := &rk.Lanes[li]
			visit := func(op *Op, unit uint64, chunks int) {
				if !op.Code.signals() && !op.Code.waits() {
					return
				}
				for _, id := range op.ChannelIDs {
					c := l.ChannelList(op.Channel)[id]
					if op.Code.signals() {
						note(signals, syncKey{r, op.Channel, c, unit, chunks})
						continue
					}
					ch := rk.Channels(op.Channel)[c]
					note(waits, syncKey{ch.Peer, op.Channel, ch.Reverse, unit, chunks})
				}
			}
			for oi := range l.Ops {
				op := &l.Ops[oi]
				visit(op, 0, 0)
				for ii := range op.Ops {
					visit(&op.Ops[ii], op.Iter.UnitBytes, op.Iter.Chunks)
				}
			}
		}
	}
	for _, k := range order {
		if s, wt := signals[k], waits[k]; s != wt {
			ch := p.Ranks[k.rank].Channels(k.typ)[k.channel]
			ctx := "at lane level"
			if k.unit != 0 {
				ctx = fmt.Sprintf("in pipelines of unit_size %d over %d chunks", k.unit, k.chunks)
			}
			return rankWhere(k.rank).errf(ErrUnmatched,
				"%s channel %d (to rank %d) is signalled %d times %s, but rank %d waits %d times on its pair",
				k.typ, k.channel, ch.Peer, s, ctx, ch.Peer, wt)
		}
	}
	return nil
}

// checkBarriers checks rank r's barriers. DeviceSyncer::sync(n) waits until exactly
// n lanes have arrived, so all barrier ops with one id must agree on n, and
// (unless n is 1, which returns at once) exactly n lanes must use the id, each as
// often as the others in every context.
func checkBarriers(p *Plan, r int) error {
	type use struct {
		count int
		where where
		lanes map[int]map[[2]uint64]int // lane -> context -> uses
	}
	var uses [MaxBarriers]*use
	rk := &p.Ranks[r]
	for li := range rk.Lanes {
		l := &rk.Lanes[li]
		visit := func(op *Op, ctx [2]uint64, w where) error {
			if op.Code != OpBarrier {
				return nil
			}
			u := uses[op.BarrierID]
			if u == nil {
				u = &use{count: op.BarrierCount, where: w, lanes: map[int]map[[2]uint64]int{}}
				uses[op.BarrierID] = u
			}
			if op.BarrierCount != u.count {
				return w.errf(ErrUnmatched, "barrier %d with num_threadblocks %d, elsewhere %d", op.BarrierID, op.BarrierCount, u.count)
			}
			if u.lanes[li] == nil {
				u.lanes[li] = map[[2]uint64]int{}
			}
			u.lanes[li][ctx]++
			return nil
		}
		for oi := range l.Ops {
			op := &l.Ops[oi]
			w := rankWhere(r).at("threadblocks").idx(li).at("ops").idx(oi)
			w.lane, w.op = li, oi
			if err := visit(op, [2]uint64{}, w); err != nil {
				return err
			}
			for ii := range op.Ops {
				wi := w.at("ops").idx(ii)
				wi.inner = ii
				if err := visit(&op.Ops[ii], [2]uint64{op.Iter.UnitBytes, uint64(op.Iter.Chunks)}, wi); err != nil {
					return err
				}
			}
		}
	}
	for id, u := range uses {
		if u == nil || u.count == 1 {
			continue
		}
		if len(u.lanes) != u.count {
			return u.where.errf(ErrUnmatched, "barrier %d waits for %d thread blocks, but %d lanes use it", id, u.count, len(u.lanes))
		}
		var first map[[2]uint64]int
		for li := range rk.Lanes {
			m := u.lanes[li]
			if m == nil {
				continue
			}
			if first == nil {
				first = m
			} else if !mapsEqual(first, m) {
				return u.where.errf(ErrUnmatched, "barrier %d: lane %d reaches it a different number of times than the other lanes", id, li)
			}
		}
	}
	return nil
}

func mapsEqual[K comparable](a, b map[K]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// checkSemaphores checks rank r's semaphores where a hang needs no running: one that
// no op of the rank releases. 0.9's DeviceSemaphore::acquire decrements and, if the
// value it read was 0 or less, spins until releases bring the semaphore back to that
// value; with no release the semaphore only falls, so its first init_value acquires
// return and no later one does. Acquires at lane level run every call, so more of
// them than init_value hang the first call. Acquires inside pipelines are not
// counted (a pipeline may run no iteration), nor are acquires past what a call's
// releases restore: a semaphore that is released may still wait forever (a lane
// acquiring what another releases after it, each waiting on the other), or run out
// over calls (nothing resets it between executions). That needs running the plan.
func checkSemaphores(p *Plan, r int) error {
	rk := &p.Ranks[r]
	if len(rk.Semaphores) == 0 {
		return nil
	}
	released := make([]bool, len(rk.Semaphores))
	acquires := make([]int, len(rk.Semaphores))
	stuck := make([]*where, len(rk.Semaphores)) // the lane-level acquire past init_value, in lane order
	for li := range rk.Lanes {
		l := &rk.Lanes[li]
		for oi := range l.Ops {
			op := &l.Ops[oi]
			for ii := range op.Ops {
				if op.Ops[ii].Code == OpSemRelease {
					for _, s := range op.Ops[ii].SemaphoreIDs {
						released[s] = true
					}
				}
			}
			switch op.Code {
			case OpSemRelease:
				for _, s := range op.SemaphoreIDs {
					released[s] = true
				}
			case OpSemAcquire:
				for _, s := range op.SemaphoreIDs {
					acquires[s]++
					if stuck[s] == nil && int64(acquires[s]) > int64(rk.Semaphores[s].InitValue) {
						w := rankWhere(r).at("threadblocks").idx(li).at("ops").idx(oi)
						w.lane, w.op = li, oi
						stuck[s] = &w
					}
				}
			}
		}
	}
	for s, w := range stuck {
		if w != nil && !released[s] {
			return w.errf(ErrUnmatched, "semaphore %d starts at %d and no op of the rank releases it, but its lanes acquire it %d times a call: acquires past the first %d never return",
				s, rk.Semaphores[s].InitValue, acquires[s], max(rk.Semaphores[s].InitValue, 0))
		}
	}
	return nil
}
