package builtin

// All-pairs algorithms: every rank talks to every other directly. Rank r sees its
// peers in the order r+1, r+2, ..., r+n-1 (mod n), so that not every rank starts
// with rank 0; peer r+d is r's peer number d-1, and also the scratch slot that
// data from it lands in on r. A lane talks to at most PeersPerLane peers (0.9
// allows 8 channels per op and 16 remote buffers per lane), so with more peers
// each data lane l becomes Q = groups(n, g) lanes (l, q), lane q talking to the
// peers q·g .. q·g+g-1 of that order. Lane (l, q) is the rank's lane l·Q + q.
//
// Where a rank reduces, its Lanes·Q lanes each reduce one part of the block: the
// chunk counts carry a factor K = Lanes·Q, lane (l, q) reduces sub-chunk
// x = l·Q + q of each block, and moves sub-chunks [l·Q, l·Q+Q) to and from its
// peers. When Q > 1 a barrier of all K lanes separates receiving from reducing and
// reducing from sending; with Q = 1 lane l receives, reduces and sends sub-chunk l
// alone.

// groups returns how many peer groups of g an n-rank all-pairs plan has.
func groups(n, g int) int { return (n - 1 + g - 1) / g }

// slot returns the position of rank s among rank p's peers (s != p): the scratch
// slot on p that data from s goes to.
func slot(s, p, n int) int { return (s-p+n)%n - 1 }

// peerOf returns rank r's peer number i.
func peerOf(r, i, n int) int { return (r + 1 + i) % n }

// mesh is the lanes and channels of an all-pairs plan: lane (l, q) of each rank
// has one channel to each peer of group q, paired with the lane of the peer whose
// group holds this rank.
type mesh struct {
	n, lanes, q, g int
	lane           [][]*laneB       // [rank][l·Q+q]
	ch             []map[[2]int]int // [rank][{l, peer}] -> lane-local channel
}

func newMesh(b *builder, o Options) *mesh {
	n := len(b.ranks)
	m := &mesh{n: n, lanes: o.Lanes, q: groups(n, o.PeersPerLane), g: o.PeersPerLane}
	m.lane = make([][]*laneB, n)
	m.ch = make([]map[[2]int]int, n)
	for r := range n {
		m.ch[r] = map[[2]int]int{}
		for range m.lanes * m.q {
			m.lane[r] = append(m.lane[r], b.lane(r))
		}
	}
	for l := range m.lanes {
		for r := range n {
			for p := r + 1; p < n; p++ {
				x := m.at(r, l, slot(p, r, n)/m.g)
				y := m.at(p, l, slot(r, p, n)/m.g)
				m.ch[r][[2]int{l, p}], m.ch[p][[2]int{l, r}] = connect(x, y)
			}
		}
	}
	return m
}

func (m *mesh) at(r, l, q int) *laneB { return m.lane[r][l*m.q+q] }

// peers returns group q of rank r's peers.
func (m *mesh) peers(r, q int) []int {
	var ps []int
	for i := q * m.g; i < min((q+1)*m.g, m.n-1); i++ {
		ps = append(ps, peerOf(r, i, m.n))
	}
	return ps
}

// chans returns lane (l, q)'s channels to the peers of group q, in group order.
func (m *mesh) chans(r, l, q int) []int {
	var cs []int
	for _, p := range m.peers(r, q) {
		cs = append(cs, m.ch[r][[2]int{l, p}])
	}
	return cs
}

// scatterToScratch appends, on lane (l, q) of rank r, the puts of sub-chunks
// [l·Q, l·Q+Q) of block block(p) of the input (blocks of K chunks) into each group
// peer p's scratch slot for r, then a signal to them and a wait for theirs: once the
// wait returns, this rank's slots for the group's peers hold their sub-chunks
// [l·Q, l·Q+Q).
func (m *mesh) scatterToScratch(r, l, q int, block func(p int) int) {
	ln, k := m.at(r, l, q), m.lanes*m.q
	var src, dst []refJ
	for _, p := range m.peers(r, q) {
		src = append(src, local("i", block(p)*k+l*m.q, m.q))
		dst = append(dst, ln.remote(p, "s", slot(r, p, m.n)*k+l*m.q, m.q))
	}
	ln.put(src, dst)
	ln.nop()
	ln.sync("signal", m.chans(r, l, q)...)
	ln.sync("wait", m.chans(r, l, q)...)
	ln.nop()
}

// peerBlock and wholeInput are the blocks scatterToScratch sends: peer p's block of
// the input (all-pairs), or the whole input, one block (direct).
func peerBlock(p int) int { return p }
func wholeInput(int) int  { return 0 }

// reduceSlots appends, on lane (l, q) of rank r, dst = own ⊕ every scratch slot's
// sub-chunk x = l·Q + q; with sends, the last op also stores the result there.
func (m *mesh) reduceSlots(r, l, q int, dst, own refJ, sends []refJ) {
	ln, k, x := m.at(r, l, q), m.lanes*m.q, l*m.q+q
	srcs := []refJ{own}
	for s := range m.n - 1 {
		srcs = append(srcs, local("s", s*k+x, 1))
	}
	ln.reduce(dst, srcs, sends)
}

func allReduceAllPairs(b *builder, o Options) {
	m := newMesh(b, o)
	k := m.lanes * m.q
	for r := range m.n {
		for l := range m.lanes {
			for q := range m.q {
				ln, x := m.at(r, l, q), l*m.q+q
				m.scatterToScratch(r, l, q, peerBlock)
				if m.q > 1 {
					ln.barrier(0, k) // every slot's sub-chunk x has arrived
				}
				dst, own := local("o", r*k+x, 1), local("i", r*k+x, 1)
				if m.q == 1 {
					// The lane reduces exactly what it sends: reduce and send in one res.
					var sends []refJ
					for _, p := range m.peers(r, q) {
						sends = append(sends, ln.remote(p, "o", r*k+x, 1))
					}
					m.reduceSlots(r, l, q, dst, own, sends)
				} else {
					m.reduceSlots(r, l, q, dst, own, nil)
					ln.nop()
					ln.barrier(0, k) // sub-chunks [l·Q, l·Q+Q) of the block are reduced
					var src, to []refJ
					for _, p := range m.peers(r, q) {
						src = append(src, local("o", r*k+l*m.q, m.q))
						to = append(to, ln.remote(p, "o", r*k+l*m.q, m.q))
					}
					ln.put(src, to)
				}
				// Publish the stores into the peers' outputs, and wait until the
				// peers' stores into this output are through.
				ln.nop()
				ln.sync("signal", m.chans(r, l, q)...)
				ln.sync("wait", m.chans(r, l, q)...)
			}
		}
	}
}

// allReduceDirect: every rank puts its whole input into every peer's scratch slot
// for it and reduces all n copies into its own output, lane (l, q) sub-chunk l·Q + q:
// one exchange and no stores into peers' outputs (the all-pairs plan's second
// exchange and its single-copy writes into other processes), for n-1 times the data
// sent. The handshake that opens every plan (a rank makes it only after its
// previous call's reductions) keeps the peers from overwriting the slots before
// they are read.
func allReduceDirect(b *builder, o Options) { scatterReduce(b, o, wholeInput) }

// reduceScatterAllPairs: block p of each input into rank p's scratch; each rank
// reduces its own block into its output.
func reduceScatterAllPairs(b *builder, o Options) { scatterReduce(b, o, peerBlock) }

// scatterReduce: each rank sends block block(p) of its input to each peer p's
// scratch, then lane (l, q) reduces output sub-chunk x = l·Q + q from sub-chunk x of
// its own block block(r) and of every slot.
func scatterReduce(b *builder, o Options, block func(p int) int) {
	m := newMesh(b, o)
	k := m.lanes * m.q
	for r := range m.n {
		for l := range m.lanes {
			for q := range m.q {
				ln, x := m.at(r, l, q), l*m.q+q
				m.scatterToScratch(r, l, q, block)
				if m.q > 1 {
					ln.barrier(0, k) // every slot's sub-chunk x has arrived
				}
				m.reduceSlots(r, l, q, local("o", x, 1), local("i", block(r)*k+x, 1), nil)
			}
		}
	}
}

func allGatherAllPairs(b *builder, o Options) {
	m := newMesh(b, o)
	lanes := m.lanes
	for r := range m.n {
		for l := range lanes {
			for q := range m.q {
				ln := m.at(r, l, q)
				own := local("o", r*lanes+l, 1) // in place: the send buffer is this slot
				if !o.InPlace {
					own = local("i", l, 1)
					if q == 0 {
						ln.copy(local("o", r*lanes+l, 1), own)
					}
				}
				var src, dst []refJ
				for _, p := range m.peers(r, q) {
					src = append(src, own)
					dst = append(dst, ln.remote(p, "o", r*lanes+l, 1))
				}
				ln.put(src, dst)
				ln.nop()
				ln.sync("signal", m.chans(r, l, q)...)
				ln.sync("wait", m.chans(r, l, q)...)
			}
		}
	}
}

func allToAllPairwise(b *builder, o Options) {
	m := newMesh(b, o)
	lanes := m.lanes
	for r := range m.n {
		for l := range lanes {
			for q := range m.q {
				ln := m.at(r, l, q)
				if !o.InPlace && q == 0 {
					ln.copy(local("o", r*lanes+l, 1), local("i", r*lanes+l, 1))
				}
				var src, dst []refJ
				for _, p := range m.peers(r, q) {
					src = append(src, local("i", p*lanes+l, 1))
					if o.InPlace {
						// The peer's block r is its input block r, which it has still
						// to send: stage in its scratch.
						dst = append(dst, ln.remote(p, "s", slot(r, p, m.n)*lanes+l, 1))
					} else {
						dst = append(dst, ln.remote(p, "o", r*lanes+l, 1))
					}
				}
				ln.put(src, dst)
				ln.nop()
				ln.sync("signal", m.chans(r, l, q)...)
				ln.sync("wait", m.chans(r, l, q)...)
				if o.InPlace {
					// This lane has sent block p (to p) before overwriting it.
					ln.nop()
					for _, p := range m.peers(r, q) {
						ln.copy(local("o", p*lanes+l, 1), local("s", slot(p, r, m.n)*lanes+l, 1))
					}
				}
			}
		}
	}
}

// reduceDirect: every other rank's lane l puts sub-chunks [l·Q, l·Q+Q) of its
// input into the root's scratch slot for it and signals; the root's lanes are
// those of an all-pairs rank and reduce as allreduce allpairs does.
func reduceDirect(b *builder, o Options) {
	n, root := len(b.ranks), o.Root
	g := o.PeersPerLane
	nq := groups(n, g)
	k := o.Lanes * nq
	rootLane := make([]*laneB, k)
	for i := range rootLane {
		rootLane[i] = b.lane(root)
	}
	leafLane := make([][]*laneB, n) // [rank][l], every rank but the root
	leafCh := make([][]int, n)
	for p := range n {
		if p == root {
			continue
		}
		leafCh[p] = make([]int, o.Lanes)
		for range o.Lanes {
			leafLane[p] = append(leafLane[p], b.lane(p))
		}
	}
	rootCh := map[[2]int]int{} // {l, peer} -> the root lane's channel
	for l := range o.Lanes {
		for p := range n {
			if p != root {
				x := rootLane[l*nq+slot(p, root, n)/g]
				rootCh[[2]int{l, p}], leafCh[p][l] = connect(x, leafLane[p][l])
			}
		}
	}
	for p := range n {
		if p == root {
			continue
		}
		for l := range o.Lanes {
			ln := leafLane[p][l]
			ln.put([]refJ{local("i", l*nq, nq)}, []refJ{ln.remote(root, "s", slot(p, root, n)*k+l*nq, nq)})
			ln.nop()
			ln.sync("signal", leafCh[p][l])
		}
	}
	for l := range o.Lanes {
		for q := range nq {
			ln, x := rootLane[l*nq+q], l*nq+q
			var chs []int
			for i := q * g; i < min((q+1)*g, n-1); i++ {
				chs = append(chs, rootCh[[2]int{l, peerOf(root, i, n)}])
			}
			ln.sync("wait", chs...)
			ln.nop()
			if nq > 1 {
				ln.barrier(0, k)
			}
			srcs := []refJ{local("i", x, 1)}
			for s := range n - 1 {
				srcs = append(srcs, local("s", s*k+x, 1))
			}
			ln.reduce(local("o", x, 1), srcs, nil)
		}
	}
}
