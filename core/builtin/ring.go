package builtin

import "github.com/ucxx-go/ucxx-go/core/plan"

// opBudget is how many ops a segment lane may spend on its work: MSCCL++ 0.9 runs
// at most 64 per lane, and the handshake takes up to 5 (16 channels).
const opBudget = plan.MaxOpsPerLane - 5

// allReduceRing: the ring r -> r+1. Block b of the buffers is chunks
// [b·K, b·K+K), K = Lanes·Chunks; lane l moves chunks b·K + l·c + k, k < c, of
// every block, c = Chunks, as its own ring. Each (lane, piece k) goes through
// 2n-1 steps t; step t on rank r waits for step t-1 of its ring predecessor:
//
//	t = 0:           put input block r into next's scratch slot 0
//	t = 1..n-2:      out[b] = in[b] + scratch slot t-1, also stored into next's
//	                 scratch slot t (res), b = r-t
//	t = n-1:         out[b] = in[b] + scratch slot n-2, also stored into next's
//	                 output, b = r+1: the block is complete
//	t = n..2n-3:     put out[b] into next's output, b = r+n-t
//	t = 2n-2:        wait for the last block
//
// and signals next after each data op. In place, out[b] is in[b]: step t writes it
// after its only read, and the predecessor's stores into it (allgather) are
// causally after this rank's step that read it, around the ring.
//
// A lane runs its (t, k) units in order; a ring of 2n-1 steps needs about 5n ops,
// so units are cut into segments of at most opBudget ops, each segment a lane of
// its own (lane l·S + s), the same on every rank. Step t of segment a on a rank
// signals step t+1, of segment b, on the next rank through a channel of their own
// for each (a, b): each channel end belongs to one lane. No order between a rank's
// segments is needed: every unit waits only for its ring predecessor's unit.
func allReduceRing(b *builder, o Options) {
	n := len(b.ranks)
	lanes, c := o.Lanes, o.Chunks
	kk := lanes * c
	chunk := func(blk, l, k int) int { return blk*kk + l*c + k }
	scratch := func(t, l, k int) int { return t*kk + l*c + k }
	steps := 2*n - 1
	nseg, seg := ringSegments(n, c, true)
	lane := make([][]*laneB, n)
	for r := range n {
		for range lanes * nseg {
			lane[r] = append(lane[r], b.lane(r))
		}
	}
	at := func(r, l, s int) *laneB { return lane[r][l*nseg+s] }
	type key struct{ r, l, a, b int } // sender rank, lane, sender segment, receiver segment
	type ends struct{ send, recv int }
	chans := map[key]ends{}
	edge := func(r, l, t, k int) ends { // the channel from (t, k) on r to (t+1, k) on r+1
		kx := key{r, l, seg[t][k], seg[t+1][k]}
		e, ok := chans[kx]
		if !ok {
			e.send, e.recv = connect(at(r, l, kx.a), at((r+1)%n, l, kx.b))
			chans[kx] = e
		}
		return e
	}
	for r := range n {
		next, prev := (r+1)%n, (r+n-1)%n
		for l := range lanes {
			for t := range steps {
				for k := range c {
					ln := at(r, l, seg[t][k])
					if t > 0 {
						ln.sync("wait", edge(prev, l, t-1, k).recv)
						if t == steps-1 {
							continue
						}
						ln.nop()
					}
					switch {
					case t == 0:
						ln.put([]refJ{local("i", chunk(r, l, k), 1)}, []refJ{ln.remote(next, "s", scratch(0, l, k), 1)})
					case t < n-1:
						blk := (r - t + n) % n
						ln.reduce(local("o", chunk(blk, l, k), 1),
							[]refJ{local("i", chunk(blk, l, k), 1), local("s", scratch(t-1, l, k), 1)},
							[]refJ{ln.remote(next, "s", scratch(t, l, k), 1)})
					case t == n-1:
						blk := (r + 1) % n
						ln.reduce(local("o", chunk(blk, l, k), 1),
							[]refJ{local("i", chunk(blk, l, k), 1), local("s", scratch(t-1, l, k), 1)},
							[]refJ{ln.remote(next, "o", chunk(blk, l, k), 1)})
					default:
						blk := (r + n - t + n) % n
						ln.put([]refJ{local("o", chunk(blk, l, k), 1)}, []refJ{ln.remote(next, "o", chunk(blk, l, k), 1)})
					}
					ln.nop()
					ln.sync("signal", edge(r, l, t, k).send)
				}
			}
		}
	}
}

// ringSegments cuts a ring lane's units (t, k), t < 2n-1, k < c, in order into
// segments of at most opBudget ops; it returns their count and, if seg is true,
// each unit's segment.
func ringSegments(n, c int, record bool) (count int, seg [][]int) {
	steps := 2*n - 1
	cost := func(t int) int {
		switch t {
		case 0:
			return 3 // put, nop, signal
		case steps - 1:
			return 1 // wait
		}
		return 5 // wait, nop, data, nop, signal
	}
	if record {
		seg = make([][]int, steps)
	}
	used := 0
	for t := range steps {
		if record {
			seg[t] = make([]int, c)
		}
		for k := range c {
			if used+cost(t) > opBudget {
				count, used = count+1, 0
			}
			if record {
				seg[t][k] = count
			}
			used += cost(t)
		}
	}
	return count + 1, seg
}
