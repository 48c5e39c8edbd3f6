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
