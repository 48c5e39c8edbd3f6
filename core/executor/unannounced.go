package executor

import (
	"errors"
	"fmt"

	"github.com/ucxx-go/ucxx-go/core/plan"
)

// Calls that run without waiting for the board. Every call is announced on the
// board; a call normally waits for every rank's announcement before its lanes run,
// which tells it two things: the ranks make the same call, and each has left its
// previous call (so writing into its scratch is safe). That wait is a round trip
// among all ranks: for a small allreduce, half of the call.
//
// Some plans need neither answer up front. A call ends only once every peer has
// announced it (the comparison below), and a rank announces a call only after its
// previous one ended: so when a rank starts call k+1, every peer has left call k-1.
// A peer still in call k reads the scratch half of call k; with the halves
// alternating between calls (the context's launch count picks one of its two
// halves, of fixed place, as MSCCL++'s double scratch buffer does), call k+1 writes
// the other. Counters count signals, so a signal of call k+1 arriving early
// satisfies no wait of call k that call k's own signal would not. The plans taken
// (runsUnannounced) are those whose ranks write into peers only through the peers'
// scratch; they must also wait, in every call, on every peer whose scratch they
// write: not needed by the argument above, a margin kept on purpose.
//
// Such a call ("unannounced") announces itself as every call does and runs its
// lanes at once, when its context exists with room for the call. The comparison
// of the announcements moves to the end: once its lanes ended, the rank reads every
// peer's announcement of the call (each made it before writing anything) and fails
// with ErrMismatch if one differs; a wait that sleeps also looks at every rank's
// announcement, so a peer making another call fails this one within a sleep slice
// instead of a timeout. Bytes may then have moved into contexts of the
// plans involved, so after a mismatch every rank forgets the contexts of the plans
// that any rank ran unannounced (each announcement says so): every rank reads the
// same announcements and forgets the same contexts, which later calls make again
// with every rank.

// runsUnannounced reports whether calls of p on host memory may run unannounced:
// no packets, switch channels or per-call blocks; remote refs only as destinations
// in peers' scratch; and every rank waits, after its skipped handshake, on a
// channel from every peer whose scratch it writes. It depends on the plan alone, so
// every rank decides alike.
func runsUnannounced(p *plan.Plan) bool {
	if p.VariableBlocks || p.UsesPackets() {
		return false
	}
	for r := range p.Ranks {
		rk := &p.Ranks[r]
		if len(rk.SwitchChannels) > 0 {
			return false
		}
		skip := handshakeSkip(p, r)
		writes, waits := map[int]bool{}, map[int]bool{}
		for li := range rk.Lanes {
			lane := &rk.Lanes[li]
			if !scratchWritesAndWaits(rk, lane, lane.Ops[skip[li]:], writes, waits) {
				return false
			}
		}
		for q := range writes {
			if !waits[q] {
				return false
			}
		}
	}
	return true
}

// scratchWritesAndWaits adds to writes the peers whose scratch ops write and to
// waits the peers they wait on; false if an op reads a peer's memory, writes a
// peer's input or output, or is one the rule does not cover.
func scratchWritesAndWaits(rk *plan.Rank, lane *plan.Lane, ops []plan.Op, writes, waits map[int]bool) bool {
	for i := range ops {
		op := &ops[i]
		switch op.Code {
		case plan.OpGet, plan.OpReadReduce, plan.OpReadReduceSend, plan.OpMultiLoadReduceStore:
			return false
		case plan.OpWait, plan.OpRelaxedWait:
			for _, id := range op.ChannelIDs {
				waits[rk.Channels(op.Channel)[lane.ChannelList(op.Channel)[id]].Peer] = true
			}
		case plan.OpPipeline:
			if !scratchWritesAndWaits(rk, lane, op.Ops, writes, waits) {
				return false
			}
		}
		for _, ref := range op.Src {
			if ref.Kind != plan.RefLocal {
				return false
			}
		}
		for _, ref := range op.Dst {
			switch {
			case ref.Kind == plan.RefSwitch:
				return false
			case ref.Kind == plan.RefRemote && ref.Buffer != plan.BufferScratch:
				return false
			case ref.Kind == plan.RefRemote:
				writes[ref.Rank] = true
			}
		}
	}
	return true
}

// unannounced reports whether p's calls on host memory may run unannounced
// (runsUnannounced, cached per plan).
func (x *Executor) unannounced(p *plan.Plan) bool {
	v, ok := x.unannouncedPlans[p]
	if !ok {
		if x.unannouncedPlans == nil || len(x.unannouncedPlans) >= 4*x.opts.MaxContexts {
			x.unannouncedPlans = make(map[*plan.Plan]bool)
		}
		v = runsUnannounced(p)
		x.unannouncedPlans[p] = v
	}
	return v
}

// readyContext returns p's host context if it exists with room for need scratch
// bytes, else nil; it changes nothing (a call that is not checked yet may not
// replace a context).
func (x *Executor) readyContext(p *plan.Plan, need uint64) *planContext {
	for _, c := range x.ctxs {
		if c.plan == p && c.memory == MemoryHost {
			if c.capacity >= need {
				return c
			}
			return nil
		}
	}
	return nil
}

// runUnannounced runs a call begin announced as unannounced, for Execute: its lanes
// at once, then the check of every rank's announcement; x.mu is held.
func (x *Executor) runUnannounced(st *callStart) error {
	run := x.unannouncedRun(st)
	run.lanes()
	return x.endUnannounced(st, run)
}

// startUnannounced runs a call begin announced as unannounced, for Start: lane 0's
// ops up to its first wait here (its puts and signals go out at once, so that a
// rank arriving later finds them), the other lanes on goroutines; then the rest
// here too if every rank has announced the call within its patience, else it
// hands back the rest, as Start does (within pc's patience). x.mu is held, and stays
// held for rest where there is one (rest lets it go), else for the caller to let go.
func (x *Executor) startUnannounced(st *callStart, pc *patienceClock) (rest func() error, err error) {
	run := x.unannouncedRun(st)
	wait := noLanes
	if len(run.c.Plan.Ranks[run.me].Lanes) > 1 {
		wait = goLanes(run, run.runLane, 1)
	}
	var lane0 *laneRun
	next := 0
	if len(run.c.Plan.Ranks[run.me].Lanes) > 0 {
		lane0 = run.newLane(0)
		next = lane0.run(run.ctx.skip[0], true)
	}
	if !x.announcedWithin(st.seq, pc) {
		return func() error {
			defer x.release()
			return x.finishUnannounced(st, run, lane0, next, wait)
		}, nil
	}
	return nil, x.finishUnannounced(st, run, lane0, next, wait)
}

// finishUnannounced runs the rest of lane 0 from op next, waits for the other lanes
// and ends the call (startUnannounced's second half).
func (x *Executor) finishUnannounced(st *callStart, run *callRun, lane0 *laneRun, next int, wait func()) error {
	if lane0 != nil {
		lane0.run(next, false)
		lane0.free()
	}
	wait()
	run.endLaneSync()
	return x.endUnannounced(st, run)
}

// unannouncedRun readies st's call to run unannounced on its context.
func (x *Executor) unannouncedRun(st *callStart) *callRun {
	ctx := st.ctx
	x.touchContext(ctx)
	ctx.execs++
	st.scope.peer = x.peerLook // looks at x.call, which st is
	run := &x.run
	*run = callRun{x: x, ctx: ctx, l: st.l, me: x.w.Rank(), c: st.c, scope: st.scope, flag: ctx.execs}
	return run
}

// endUnannounced checks the ranks' announcements once the call's lanes ended, and
// gives the call's outcome.
func (x *Executor) endUnannounced(st *callStart, run *callRun) error {
	checkErr := x.checkAnnouncements(st)
	switch {
	case checkErr == nil && run.err == nil:
		return nil
	case errors.Is(checkErr, ErrMismatch):
		return checkErr
	case checkErr == nil:
		checkErr = run.err
	}
	x.broken = checkErr
	return checkErr
}

// announcedMismatch reports, without waiting, a rank whose announcement of st's
// call is there and differs from this rank's: a wait's look while it sleeps. It
// looks at every rank, not only the one waited for: that one may itself wait on a
// rank that made another call.
func (x *Executor) announcedMismatch(st *callStart) error {
	off := slotOff(st.seq)
	for r, s := range x.board.segs {
		if r == x.w.Rank() || s.word(off).load() < st.seq {
			continue
		}
		if err := slotMismatch(s, off, st, r); err != nil {
			return err
		}
	}
	return nil
}

// slotMismatch compares rank r's announcement of st's call (there) with this rank's.
func slotMismatch(s *segment, off uint64, st *callStart, r int) error {
	return callMismatch(st, r, *s.u64(off + slotStatus), *s.u64(off + slotFingerprint), *s.u64(off + slotInBytes),
		*s.u64(off + slotOutBytes))
}

// checkAnnouncements waits, once the lanes ended, for every peer's announcement of
// st's call and compares each with this rank's; after a mismatch it forgets the
// contexts of every plan a rank ran unannounced. It marks the announcements read.
// Errors: ErrMismatch; a *RankError (a rank died, or did not announce in time).
func (x *Executor) checkAnnouncements(st *callStart) error {
	b, me, off := x.board, x.w.Rank(), slotOff(st.seq)
	// The lanes are over: no look at announcements while waiting, and a lane's
	// failure does not cut the wait short (the announcements are needed).
	scope := *st.scope
	scope.peer, scope.aborted = nil, nil
	var first error
	for r := range x.w.Size() {
		if r == me {
			continue
		}
		s := b.segs[r]
		if err := scope.until(s.word(off), func(v uint64) bool { return v >= st.seq }, r,
			func() string { return fmt.Sprintf("call %d: waiting for the rank to make it", st.seq) }); err != nil {
			return err
		}
		if err := slotMismatch(s, off, st, r); err != nil && first == nil {
			first = err
		}
	}
	b.started(me).store(st.seq)
	if first != nil {
		x.forgetUnannounced(st.seq)
	}
	return first
}

// forgetUnannounced closes the host contexts of the plans that any rank, this one
// included, ran unannounced in call seq (its announcements are all there).
func (x *Executor) forgetUnannounced(seq uint64) {
	off := slotOff(seq)
	ran := make(map[uint64]bool)
	for _, s := range x.board.segs {
		if h := *s.u64(off + slotPlan); h != 0 {
			ran[h] = true
		}
	}
	kept := x.ctxs[:0]
	for _, c := range x.ctxs {
		if c.memory == MemoryHost && ran[c.hash|1] {
			x.closeContext(c)
			continue
		}
		kept = append(kept, c)
	}
	clear(x.ctxs[len(kept):])
	x.ctxs = kept
}
