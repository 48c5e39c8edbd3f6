package executor

import "github.com/ucxx-go/ucxx-go/core/plan"

// setupPeers returns the ranks rank shares a context with, in increasing order: its
// channels' peers, the owners of the remote buffers and switch groups it reaches,
// and the ranks that reach it that way (MSCCL++ registers memory with every rank
// that names it, channel or not). Every rank computes the same relation from the
// plan, so the pairs agree.
func setupPeers(p *plan.Plan, rank int) []int {
	seen := make([]bool, len(p.Ranks))
	for _, q := range p.ConnectedPeers(rank) {
		seen[q] = true
	}
	for q := range p.Ranks {
		for _, t := range reachedBy(p, q) {
			if q == rank && t != rank {
				seen[t] = true
			}
			if t == rank && q != rank {
				seen[q] = true
			}
		}
	}
	var peers []int
	for q, ok := range seen {
		if ok {
			peers = append(peers, q)
		}
	}
	return peers
}

// reachedBy lists the ranks whose buffers rank q's ops reach: remote buffers'
// owners and switch groups' members.
func reachedBy(p *plan.Plan, q int) []int {
	rk := &p.Ranks[q]
	var out []int
	for _, b := range rk.RemoteBuffers {
		out = append(out, b.Rank)
	}
	for _, s := range rk.SwitchChannels {
		out = append(out, s.Ranks...)
	}
	return out
}
