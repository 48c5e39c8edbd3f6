package builtin

// piecesPerLane is how many pieces one lane of a tree moves: 5 ops each (wait,
// nop, data, nop, signal) within opBudget.
const piecesPerLane = opBudget / 5

// tree is the lanes and channels of a rooted plan: rank root+v (mod n) is tree
// node v, whose children are fanout·v+1 .. fanout·v+fanout (below n): a chain with
// fanout 1, a binary tree with fanout 2. Lane l of a node moves chunks
// [l·c, l·c+c), c = Chunks; more than piecesPerLane pieces are split into
// segments, each a lane of its own (lane l·S + s), connected to the same segment
// lane of its parent and of each child.
type tree struct {
	n, root, fanout int
	lanes, c, nseg  int
	lane            [][]*treeLane // [v][l·S+s]
}

type treeLane struct {
	ln       *laneB
	parent   int   // the channel to the parent (not at the root)
	children []int // the channels to the children, in order
}

func newTree(b *builder, o Options, fanout int) *tree {
	t := &tree{n: len(b.ranks), root: o.Root, fanout: fanout, lanes: o.Lanes, c: o.Chunks}
	t.nseg = (t.c + piecesPerLane - 1) / piecesPerLane
	t.lane = make([][]*treeLane, t.n)
	for v := range t.n {
		for range t.lanes * t.nseg {
			t.lane[v] = append(t.lane[v], &treeLane{ln: b.lane(t.rank(v))})
		}
	}
	for v := range t.n {
		for _, w := range t.children(v) {
			for i := range t.lanes * t.nseg {
				x, y := t.lane[v][i], t.lane[w][i]
				cx, cy := connect(x.ln, y.ln)
				x.children = append(x.children, cx)
				y.parent = cy
			}
		}
	}
	return t
}

func treeLanes(n int, o Options) int {
	return o.Lanes * ((o.Chunks + piecesPerLane - 1) / piecesPerLane)
}

func (t *tree) rank(v int) int { return (v + t.root) % t.n }

func (t *tree) children(v int) []int {
	var cs []int
	for i := 1; i <= t.fanout; i++ {
		if w := t.fanout*v + i; w < t.n {
			cs = append(cs, w)
		}
	}
	return cs
}

// each calls f for every node v, lane l and segment s with the segment's lane and
// its pieces [first, end).
func (t *tree) each(f func(v, l int, tl *treeLane, first, end int)) {
	for v := range t.n {
		for l := range t.lanes {
			for s := range t.nseg {
				f(v, l, t.lane[v][l*t.nseg+s], s*piecesPerLane, min((s+1)*piecesPerLane, t.c))
			}
		}
	}
}

// broadcastTree: each node waits for piece k from its parent (the root has it),
// then puts it into its children's outputs and signals them.
func broadcastTree(b *builder, o Options, fanout int) {
	t := newTree(b, o, fanout)
	t.each(func(v, l int, tl *treeLane, first, end int) {
		ln, c := tl.ln, t.c
		src := "o"
		if v == 0 && !o.InPlace {
			src = "i"
			ln.copy(local("o", l*c+first, end-first), local("i", l*c+first, end-first))
		}
		for k := first; k < end; k++ {
			idx := l*c + k
			if v != 0 {
				ln.sync("wait", tl.parent)
				if len(tl.children) == 0 {
					continue
				}
				ln.nop()
			}
			var srcs, dsts []refJ
			for _, w := range t.children(v) {
				srcs = append(srcs, local(src, idx, 1))
				dsts = append(dsts, ln.remote(t.rank(w), "o", idx, 1))
			}
			ln.put(srcs, dsts)
			ln.nop()
			ln.sync("signal", tl.children...)
		}
	})
}

// reduceTree: each node waits for piece k's partial sums from its children (in
// its scratch, slot i·K + idx for child i, K = Lanes·Chunks), adds its input, and
// sends the result into its parent's slot for it (res, keeping a copy in its own
// scratch slot fanout·K + idx); the root reduces into its output. Leaves put their
// input. Other ranks' outputs are not touched.
func reduceTree(b *builder, o Options, fanout int) {
	t := newTree(b, o, fanout)
	kk := t.lanes * t.c
	t.each(func(v, l int, tl *treeLane, first, end int) {
		ln := tl.ln
		children := t.children(v)
		for k := first; k < end; k++ {
			idx := l*t.c + k
			var up refJ // the parent's slot for this node
			if v != 0 {
				up = ln.remote(t.rank((v-1)/fanout), "s", ((v-1)%fanout)*kk+idx, 1)
			}
			if len(children) == 0 {
				ln.put([]refJ{local("i", idx, 1)}, []refJ{up})
				ln.nop()
				ln.sync("signal", tl.parent)
				continue
			}
			ln.sync("wait", tl.children...)
			ln.nop()
			srcs := []refJ{local("i", idx, 1)}
			for i := range children {
				srcs = append(srcs, local("s", i*kk+idx, 1))
			}
			if v == 0 {
				ln.reduce(local("o", idx, 1), srcs, nil)
				continue
			}
			ln.reduce(local("s", fanout*kk+idx, 1), srcs, []refJ{up})
			ln.nop()
			ln.sync("signal", tl.parent)
		}
	})
}
