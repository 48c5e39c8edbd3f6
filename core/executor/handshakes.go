package executor

import "github.com/ucxx-go/ucxx-go/core/plan"

// MSCCL++'s plans open with a handshake: each lane first signals every peer it
// talks to and waits for theirs (rlxsignal, rlxwait; the DSL and core/builtin write
// it), so that no rank writes into a peer's scratch before the peer has left its
// previous call. Here every call is announced first, and a rank runs its lanes only
// once every rank has announced the call, which a rank does only after its previous
// call ended: the handshake tells nothing more, and costs a round trip among all
// ranks. The executor therefore skips it, where it can do so on every rank alike.
//
// The ops skipped are each lane's leading run of rlxsignal and rlxwait. Counters
// count signals and a wait waits for its count (context.go), so skipping k signals
// into a counter together with k waits on it leaves every later wait's condition as
// it was. That holds when, for every counter, the skipped signals into it equal the
// skipped waits on it; a plan where it does not (a handshake another lane or rank
// answers later) keeps all its ops.

// handshakeSkip returns, for rank me, how many leading ops of each lane to skip:
// the lanes' leading handshake ops when the whole plan's handshakes balance per
// counter, else zeros. Every rank computes it from the same plan alike.
func handshakeSkip(p *plan.Plan, me int) []int {
	type counter struct {
		rank int
		k    uint64
	}
	balance := map[counter]int{} // skipped signals into the counter minus skipped waits on it
	skips := make([][]int, len(p.Ranks))
	for r := range p.Ranks {
		rk := &p.Ranks[r]
		skips[r] = make([]int, len(rk.Lanes))
		for li := range rk.Lanes {
			lane := &rk.Lanes[li]
			n := 0
			for n < len(lane.Ops) && (lane.Ops[n].Code == plan.OpRelaxedSignal || lane.Ops[n].Code == plan.OpRelaxedWait) {
				op := &lane.Ops[n]
				for _, id := range op.ChannelIDs {
					idx := lane.ChannelList(op.Channel)[id]
					if op.Code == plan.OpRelaxedWait {
						balance[counter{r, counterIndex(p, r, op.Channel, idx)}]--
						continue
					}
					ch := rk.Channels(op.Channel)[idx]
					balance[counter{ch.Peer, counterIndex(p, ch.Peer, op.Channel, ch.Reverse)}]++
				}
				n++
			}
			skips[r][li] = n
		}
	}
	for _, b := range balance {
		if b != 0 {
			return make([]int, len(p.Ranks[me].Lanes))
		}
	}
	return skips[me]
}

// callerWorkFenced reports whether a device call of plan p may let its lanes wait on
// the device for the work its callers queued on their buffers, instead of the host
// waiting for it before the call is announced. A lane's stream then starts with that
// wait, so its own ops and its signals come after the caller's work; what remains is
// a peer reaching this rank's buffers before then. That cannot happen when every lane
// of every rank reaches a peer's buffers (puts, gets, remote reductions) only after a
// wait, earlier in the lane, on a channel from that peer: the peer's signal comes from
// one of its lanes, after its own device wait. Switch (NVLS) refs reach every rank:
// a lane with one needs a wait on each peer first. Barriers pass nothing on here (a
// conservative reading). Every rank computes it from the same plan alike.
func callerWorkFenced(p *plan.Plan) bool {
	for r := range p.Ranks {
		rk := &p.Ranks[r]
		for li := range rk.Lanes {
			lane := &rk.Lanes[li]
			waited := map[int]bool{}
			if !laneFenced(p, rk, r, lane, lane.Ops, waited) {
				return false
			}
		}
	}
	return true
}

// laneFenced walks ops of lane (rank me) in order, adding the peers each wait hears
// from to waited, and reports whether every peer buffer an op reaches was waited on
// before it.
func laneFenced(p *plan.Plan, rk *plan.Rank, me int, lane *plan.Lane, ops []plan.Op, waited map[int]bool) bool {
	for i := range ops {
		op := &ops[i]
		if op.Code == plan.OpPipeline {
			if !laneFenced(p, rk, me, lane, op.Ops, waited) {
				return false
			}
			continue
		}
		for _, refs := range [][]plan.BufferRef{op.Src, op.Dst} {
			for _, ref := range refs {
				switch {
				case ref.Kind == plan.RefSwitch:
					for q := range p.Ranks {
						if q != me && !waited[q] {
							return false
						}
					}
				case ref.Kind == plan.RefRemote && ref.Rank != me && !waited[ref.Rank]:
					return false
				}
			}
		}
		if op.Code == plan.OpWait || op.Code == plan.OpRelaxedWait {
			chans := rk.Channels(op.Channel)
			list := lane.ChannelList(op.Channel)
			for _, id := range op.ChannelIDs {
				waited[chans[list[id]].Peer] = true
			}
		}
	}
	return true
}
