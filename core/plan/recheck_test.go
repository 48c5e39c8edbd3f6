package plan

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// recheck re-checks a parsed plan's bounds without the validator's code: every id
// an executor indexes with must land inside what it names. It is the property the
// fuzz test asserts for every plan Parse accepts.
func recheck(t testing.TB, p *Plan) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("recheck: "+format, args...)
	}
	n := len(p.Ranks)
	if n == 0 || n > MaxRanks {
		fail("%d ranks", n)
	}
	if p.BufferAlignment == 0 || p.ThreadsPerBlock < 1 || p.MinMessageBytes > p.MaxMessageBytes {
		fail("alignment %d, threads %d, sizes %d..%d", p.BufferAlignment, p.ThreadsPerBlock, p.MinMessageBytes, p.MaxMessageBytes)
	}
	for r := range p.Ranks {
		rk := &p.Ranks[r]
		if rk.ID != r || rk.InputChunks < 1 || rk.OutputChunks < 1 || rk.ScratchChunks < 0 || len(rk.Lanes) > MaxLanes {
			fail("rank %d: id %d chunks %d/%d/%d, %d lanes", r, rk.ID, rk.InputChunks, rk.OutputChunks, rk.ScratchChunks, len(rk.Lanes))
		}
		for _, typ := range []ChannelType{ChannelMemory, ChannelPort} {
			for i, c := range rk.Channels(typ) {
				if c.Peer < 0 || c.Peer >= n || c.Peer == r {
					fail("rank %d channel %d: peer %d", r, i, c.Peer)
				}
				back := p.Ranks[c.Peer].Channels(typ)
				if c.Reverse < 0 || c.Reverse >= len(back) || back[c.Reverse].Peer != r || back[c.Reverse].Reverse != i ||
					back[c.Reverse].Ordinal != c.Ordinal {
					fail("rank %d channel %d: reverse %d does not pair back", r, i, c.Reverse)
				}
			}
		}
		for i, s := range rk.SwitchChannels {
			mine := false
			for _, q := range s.Ranks {
				if q < 0 || q >= n {
					fail("rank %d switch %d: rank %d", r, i, q)
				}
				mine = mine || q == r
			}
			if !mine || s.Buffer < BufferInput || s.Buffer > BufferScratch {
				fail("rank %d switch %d: %+v", r, i, s)
			}
		}
		for i, b := range rk.RemoteBuffers {
			if b.Rank < 0 || b.Rank >= n || b.Rank == r || p.Ranks[b.Rank].Chunks(b.Buffer) == 0 || (!b.Memory && !b.Port) {
				fail("rank %d remote buffer %d: %+v", r, i, b)
			}
		}
		for li := range rk.Lanes {
			l := &rk.Lanes[li]
			if l.ID != li {
				fail("rank %d lane %d: id %d", r, li, l.ID)
			}
			for _, c := range l.MemoryChannels {
				if c < 0 || c >= len(rk.MemoryChannels) {
					fail("rank %d lane %d: memory channel %d", r, li, c)
				}
			}
			for _, c := range l.PortChannels {
				if c < 0 || c >= len(rk.PortChannels) {
					fail("rank %d lane %d: port channel %d", r, li, c)
				}
			}
			for _, c := range l.SwitchChannels {
				if c < 0 || c >= len(rk.SwitchChannels) {
					fail("rank %d lane %d: switch channel %d", r, li, c)
				}
			}
			for _, b := range l.MemoryBuffers {
				if b < 0 || b >= len(rk.RemoteBuffers) || !rk.RemoteBuffers[b].Memory {
					fail("rank %d lane %d: memory buffer %d", r, li, b)
				}
			}
			for _, b := range l.PortBuffers {
				if b < 0 || b >= len(rk.RemoteBuffers) || !rk.RemoteBuffers[b].Port {
					fail("rank %d lane %d: port buffer %d", r, li, b)
				}
			}
			if len(l.MemoryChannels) > MaxLaneChannels || len(l.PortChannels) > MaxLaneChannels ||
				len(l.MemoryBuffers) > MaxLaneBuffers || len(l.PortBuffers) > MaxLaneBuffers {
				fail("rank %d lane %d: lists too long", r, li)
			}
			count := 0
			for oi := range l.Ops {
				op := &l.Ops[oi]
				count += 1 + len(op.Ops)
				recheckOp(t, p, r, l, op, false)
				if op.Code == OpPipeline && (len(op.Ops) == 0 || op.Iter.UnitBytes == 0 || op.Iter.Chunks == 0) {
					fail("rank %d lane %d op %d: empty pipeline", r, li, oi)
				}
				for ii := range op.Ops {
					recheckOp(t, p, r, l, &op.Ops[ii], true)
				}
			}
			if count > MaxOpsPerLane {
				fail("rank %d lane %d: %d ops", r, li, count)
			}
		}
	}
}

func recheckOp(t testing.TB, p *Plan, r int, l *Lane, op *Op, inner bool) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("recheck: rank %d lane %d %s: "+format, append([]any{r, l.ID, op.Code}, args...)...)
	}
	rk := &p.Ranks[r]
	if !op.Code.Accepted() || (inner && op.Code == OpPipeline) || (!inner && op.Code != OpPipeline && len(op.Ops) > 0) {
		fail("code or nesting")
	}
	if len(op.ChannelIDs) > MaxOpChannels || len(op.Src) > MaxOpRefs || len(op.Dst) > MaxOpRefs ||
		len(op.SemaphoreIDs) > MaxOpSemaphores {
		fail("lists too long")
	}
	list := map[ChannelType][]int{ChannelMemory: l.MemoryChannels, ChannelPort: l.PortChannels, ChannelSwitch: l.SwitchChannels}[op.Channel]
	for _, c := range op.ChannelIDs {
		if c < 0 || c >= len(list) {
			fail("channel id %d of %d", c, len(list))
		}
	}
	for _, s := range op.SemaphoreIDs {
		if s < 0 || s >= len(rk.Semaphores) {
			fail("semaphore %d of %d", s, len(rk.Semaphores))
		}
	}
	if op.Code == OpBarrier && (op.BarrierID < 0 || op.BarrierID >= MaxBarriers || op.BarrierCount < 1 || op.BarrierCount > len(rk.Lanes)) {
		fail("barrier %d count %d", op.BarrierID, op.BarrierCount)
	}
	if op.Group.Size < 1 || op.Group.ID < 0 || op.Group.ID >= op.Group.Size {
		fail("group %+v", op.Group)
	}
	for _, refs := range [][]BufferRef{op.Src, op.Dst} {
		for _, ref := range refs {
			owners := []int{r}
			switch ref.Kind {
			case RefLocal:
				if ref.Rank != r {
					fail("local ref of rank %d", ref.Rank)
				}
			case RefRemote:
				bl := map[ChannelType][]int{ChannelMemory: l.MemoryBuffers, ChannelPort: l.PortBuffers}[op.Channel]
				if ref.ID < 0 || ref.ID >= len(bl) || bl[ref.ID] != ref.RemoteBuffer {
					fail("remote ref %d", ref.ID)
				}
				rb := rk.RemoteBuffers[ref.RemoteBuffer]
				if rb.Rank != ref.Rank || rb.Buffer != ref.Buffer {
					fail("remote ref resolves to %+v, says rank %d %s", rb, ref.Rank, ref.Buffer)
				}
				owners = []int{rb.Rank}
			case RefSwitch:
				if ref.ID < 0 || ref.ID >= len(l.SwitchChannels) || l.SwitchChannels[ref.ID] != ref.SwitchChannel {
					fail("switch ref %d", ref.ID)
				}
				sc := rk.SwitchChannels[ref.SwitchChannel]
				if sc.Buffer != ref.Buffer {
					fail("switch ref buffer %s, channel %s", ref.Buffer, sc.Buffer)
				}
				owners = sc.Ranks
			default:
				fail("ref kind %d", ref.Kind)
			}
			if ref.Packet && ref.Buffer != BufferScratch {
				fail("packet ref in %s", ref.Buffer)
			}
			for _, o := range owners {
				if ref.Index < 0 || ref.Size < 1 || ref.Index+ref.Size > p.Ranks[o].Chunks(ref.Buffer) {
					fail("ref %+v outside rank %d's %s (%d chunks)", ref, o, ref.Buffer, p.Ranks[o].Chunks(ref.Buffer))
				}
			}
		}
	}
}

// recheckLayout re-checks that every span of a layout, as its op touches it, lies
// inside its buffer, computing the buffers' sizes afresh.
func recheckLayout(t testing.TB, p *Plan, l *Layout) {
	t.Helper()
	rk := &p.Ranks[l.Rank]
	scratchOf := func(r int) uint64 {
		q := &p.Ranks[r]
		if q.ScratchChunks == 0 {
			return 0
		}
		if p.ReuseResources {
			if p.DoubleScratch {
				return DefaultScratchBytes / 2
			}
			return DefaultScratchBytes
		}
		per := (l.InputBytes + uint64(q.InputChunks) - 1) / uint64(q.InputChunks)
		s := per * uint64(q.ScratchChunks)
		if p.UsesPackets() {
			s *= 2
		}
		return s // rounding up to the alignment only adds room
	}
	size := func(r int, b BufferType) uint64 {
		switch b {
		case BufferInput:
			return l.InputBytes
		case BufferOutput:
			return l.OutputBytes
		}
		return scratchOf(r)
	}
	check := func(op *Op, ref *BufferRef, sp Span, pipe *Op, iters uint64) {
		t.Helper()
		owners := []int{ref.Rank}
		if ref.Kind == RefSwitch {
			owners = rk.SwitchChannels[ref.SwitchChannel].Ranks
		}
		var ends []uint64
		switch {
		case pipe != nil && op.Code.Windowed():
			// Every window up to 4096 iterations, then a sample and the last.
			step := max(iters/4096, 1)
			for it := uint64(0); it < iters; it += step {
				if it+step >= iters {
					it = iters - 1
				}
				w := l.Window(pipe, ref, sp, it)
				if it*pipe.Iter.UnitBytes > sp.Length {
					t.Fatalf("recheckLayout: window %d starts past its span %+v", it, sp)
				}
				ends = append(ends, w.End())
			}
		case ref.Packet:
			ends = append(ends, PacketSpan(sp).End())
		default:
			ends = append(ends, sp.End())
		}
		for _, o := range owners {
			for _, e := range ends {
				if e > size(o, ref.Buffer) {
					t.Fatalf("recheckLayout: rank %d %s ref %+v ends at %d, rank %d's %s buffer holds %d",
						l.Rank, op.Code, *ref, e, o, ref.Buffer, size(o, ref.Buffer))
				}
			}
		}
	}
	for li := range rk.Lanes {
		for oi := range rk.Lanes[li].Ops {
			op := &rk.Lanes[li].Ops[oi]
			lay := &l.Lanes[li][oi]
			for i := range op.Src {
				check(op, &op.Src[i], lay.Src[i], nil, 0)
			}
			for i := range op.Dst {
				check(op, &op.Dst[i], lay.Dst[i], nil, 0)
			}
			for ii := range op.Ops {
				in, inLay := &op.Ops[ii], &lay.Ops[ii]
				for i := range in.Src {
					check(in, &in.Src[i], inLay.Src[i], op, lay.Iterations)
				}
				for i := range in.Dst {
					check(in, &in.Dst[i], inLay.Dst[i], op, lay.Iterations)
				}
			}
		}
	}
}

func readFile(path string) ([]byte, error) { return os.ReadFile(path) }

// repairChunks returns a fixture with every rank's input and output chunk counts
// set to cover the refs of all ranks (at least 1).
func repairChunks(t *testing.T, path string) []byte {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber() // keep max_message_size's 2^64-1 exact
	if err := dec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	num := func(v any) int64 {
		n, err := v.(json.Number).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	need := map[string]int64{"i": 1, "o": 1}
	var walk func(ops []any)
	walk = func(ops []any) {
		for _, o := range ops {
			op := o.(map[string]any)
			for _, k := range []string{"src_buff", "dst_buff"} {
				refs, _ := op[k].([]any)
				for _, r := range refs {
					ref := r.(map[string]any)
					if ty, ok := ref["type"].(string); ok && (ty == "i" || ty == "o") {
						need[ty] = max(need[ty], num(ref["index"])+num(ref["size"]))
					}
				}
			}
			inner, _ := op["ops"].([]any)
			walk(inner)
		}
	}
	gpus := d["gpus"].([]any)
	for _, g := range gpus {
		for _, tb := range g.(map[string]any)["threadblocks"].([]any) {
			walk(tb.(map[string]any)["ops"].([]any))
		}
	}
	for _, g := range gpus {
		gm := g.(map[string]any)
		gm["input_chunks"] = max(num(gm["input_chunks"]), need["i"])
		gm["output_chunks"] = max(num(gm["output_chunks"]), need["o"])
	}
	out, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
