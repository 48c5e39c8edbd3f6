package plan

import (
	"fmt"
	"io"
	"math"
	"unicode/utf8"
)

// Load reads a plan from r (at most MaxPlanBytes) and parses it with Parse.
//
// Errors: a read error from r, wrapped with "plan: read"; otherwise Parse's.
func Load(r io.Reader) (*Plan, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxPlanBytes+1))
	if err != nil {
		return nil, fmt.Errorf("plan: read: %w", err)
	}
	return Parse(data)
}

// Parse decodes an MSCCL++ 0.9 execution plan and validates it. Unknown fields are
// ignored, as MSCCL++ ignores them; everything the executor indexes with is then
// checked: the plan returned has every id, index and count in range, paired
// channels, balanced signals and waits, reachable barriers, and no semaphore that
// its first call's acquires exhaust with nothing to release it (see the package
// documentation for the full list).
//
// Errors: a *PlanError wrapping ErrMalformed, ErrUnsupportedOp, ErrOutOfRange,
// ErrLimit or ErrUnmatched. The plan is nil whenever the error is not.
func Parse(data []byte) (*Plan, error) {
	if len(data) > MaxPlanBytes {
		return nil, nowhere.errf(ErrLimit, "plan text longer than %d bytes", MaxPlanBytes)
	}
	if !utf8.Valid(data) {
		return nil, nowhere.errf(ErrMalformed, "plan text is not UTF-8")
	}
	d := newDecoder(data)
	p, err := d.plan()
	if err == nil {
		err = d.end()
	}
	if err == nil {
		err = validate(p)
	}
	if err == nil && p.VariableBlocks {
		err = checkVariableBlocks(p)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// plan decodes the top-level object.
func (d *decoder) plan() (*Plan, error) {
	p := &Plan{
		ThreadsPerBlock: 1024,
		BufferAlignment: 16,
		MaxMessageBytes: math.MaxUint64,
	}
	var seen fields
	err := d.object(nowhere, &seen, func(key string, w where) error {
		var err error
		switch key {
		case "name":
			p.Name, err = d.str(w)
		case "collective":
			p.Collective, err = d.str(w)
		case "protocol":
			p.Protocol, err = d.str(w)
		case "inplace":
			p.InPlace, err = d.boolean(w)
		case "reuse_resources":
			p.ReuseResources, err = d.boolean(w)
		case "use_double_scratch_buffer":
			p.DoubleScratch, err = d.boolean(w)
		case "num_threads_per_block":
			p.ThreadsPerBlock, err = d.int(w, 1, MaxThreadsPerBlock)
		case "buffer_alignment":
			p.BufferAlignment, err = d.uint64(w, MaxBufferAlignment)
			if err == nil && p.BufferAlignment == 0 {
				err = w.errf(ErrOutOfRange, "buffer_alignment is 0: MSCCL++ 0.9 divides by it")
			}
		case "min_message_size":
			p.MinMessageBytes, err = d.uint64(w, math.MaxUint64)
		case "max_message_size":
			p.MaxMessageBytes, err = d.uint64(w, math.MaxUint64)
		case "ucxxgo_variable_blocks":
			p.VariableBlocks, err = d.boolean(w)
		case "gpus":
			p.Ranks = p.Ranks[:0]
			err = d.array(w, MaxRanks, "ranks", func(i int, w where) error {
				w.rank = i
				r, err := d.rank(w)
				p.Ranks = append(p.Ranks, r)
				return err
			})
		default:
			err = d.skip(w)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := seen.require(nowhere, "name", "collective", "protocol", "inplace", "gpus"); err != nil {
		return nil, err
	}
	if len(p.Ranks) == 0 {
		return nil, nowhere.at("gpus").errf(ErrMalformed, "no ranks")
	}
	if p.MinMessageBytes > p.MaxMessageBytes {
		return nil, nowhere.at("min_message_size").errf(ErrOutOfRange,
			"min_message_size %d > max_message_size %d: no size is accepted", p.MinMessageBytes, p.MaxMessageBytes)
	}
	return p, nil
}

// maxID bounds ids while decoding, before they are checked against what they
// name; it keeps int arithmetic on them from overflowing.
const maxID = math.MaxInt32

// rank decodes one element of "gpus".
func (d *decoder) rank(w where) (Rank, error) {
	r := Rank{ID: -1}
	var seen fields
	err := d.object(w, &seen, func(key string, w where) error {
		var err error
		switch key {
		case "id":
			r.ID, err = d.int(w, 0, maxID)
		case "input_chunks":
			r.InputChunks, err = d.chunkCount(w)
		case "output_chunks":
			r.OutputChunks, err = d.chunkCount(w)
		case "scratch_chunks":
			r.ScratchChunks, err = d.chunkCount(w)
		case "channels":
			r.MemoryChannels, r.PortChannels, r.SwitchChannels = nil, nil, nil
			err = d.array(w, 2*MaxRankChannels+MaxSwitchChannels, "channels", func(_ int, w where) error {
				return d.rankChannel(w, &r)
			})
		case "remote_buffers":
			r.RemoteBuffers = nil
			err = d.array(w, MaxRemoteBuffers, "remote buffers", func(_ int, w where) error {
				b, err := d.remoteBuffer(w)
				r.RemoteBuffers = append(r.RemoteBuffers, b)
				return err
			})
		case "semaphores":
			r.Semaphores = nil
			err = d.array(w, MaxSemaphores, "semaphores", func(_ int, w where) error {
				s, err := d.semaphore(w)
				r.Semaphores = append(r.Semaphores, s)
				return err
			})
		case "threadblocks":
			r.Lanes = nil
			err = d.array(w, MaxLanes, "thread blocks", func(i int, w where) error {
				w.lane = i
				l, err := d.lane(w)
				r.Lanes = append(r.Lanes, l)
				return err
			})
		default:
			err = d.skip(w)
		}
		return err
	})
	if err != nil {
		return r, err
	}
	if err := seen.require(w, "id", "input_chunks", "output_chunks", "scratch_chunks",
		"channels", "remote_buffers", "threadblocks"); err != nil {
		return r, err
	}
	if r.ID != w.rank {
		return r, w.at("id").errf(ErrMalformed, "id %d at position %d: MSCCL++ requires gpus[r].id == r", r.ID, w.rank)
	}
	if r.InputChunks == 0 {
		return r, w.at("input_chunks").errf(ErrOutOfRange,
			"input_chunks is 0: MSCCL++ 0.9 divides the input size by it (SIGFPE) and cannot run this plan")
	}
	if r.OutputChunks == 0 {
		return r, w.at("output_chunks").errf(ErrOutOfRange,
			"output_chunks is 0: MSCCL++ 0.9 divides the output size by it (SIGFPE) and cannot run this plan")
	}
	return r, nil
}

func (d *decoder) chunkCount(w where) (int, error) {
	n, err := d.uint64(w, math.MaxUint32)
	if err == nil && n > MaxChunks {
		return 0, w.errf(ErrLimit, "%d chunks, more than %d", n, MaxChunks)
	}
	return int(n), err
}

// rankChannel decodes one element of a rank's "channels" and appends it to r.
func (d *decoder) rankChannel(w where, r *Rank) error {
	var (
		seen    fields
		typ     string
		peers   []int
		buf     string
		groups  []SwitchChannel
		haveBuf bool
	)
	err := d.object(w, &seen, func(key string, w where) error {
		var err error
		switch key {
		case "channel_type":
			typ, err = d.str(w)
		case "connected_to":
			peers, err = d.ints(w, MaxRankChannels, "peers", 0, maxID)
		case "buffer_type":
			buf, err = d.str(w)
			haveBuf = true
		case "rank_groups":
			groups = groups[:0]
			err = d.array(w, MaxSwitchChannels, "rank groups", func(_ int, w where) error {
				g, err := d.rankGroup(w)
				groups = append(groups, g)
				return err
			})
		default:
			err = d.skip(w)
		}
		return err
	})
	if err != nil {
		return err
	}
	if err := seen.require(w, "channel_type"); err != nil {
		return err
	}
	t, ok := parseChannelType(typ)
	switch {
	case !ok:
		return w.at("channel_type").errf(ErrMalformed, "unknown channel type %q", typ)
	case t == ChannelNone:
		return w.at("channel_type").errf(ErrMalformed, `rank-level channel of type "none": it would connect peers without making a channel`)
	case t == ChannelSwitch:
		if err := seen.require(w, "buffer_type", "rank_groups"); err != nil {
			return err
		}
		b, ok := parseBufferType(buf)
		if !ok || !haveBuf {
			return w.at("buffer_type").errf(ErrMalformed, "unknown buffer type %q", buf)
		}
		for _, g := range groups {
			if len(r.SwitchChannels) >= MaxSwitchChannels {
				return w.errf(ErrLimit, "more than %d switch channels", MaxSwitchChannels)
			}
			g.Buffer = b
			r.SwitchChannels = append(r.SwitchChannels, g)
		}
		return nil
	}
	if err := seen.require(w, "connected_to"); err != nil {
		return err
	}
	list := &r.MemoryChannels
	if t == ChannelPort {
		list = &r.PortChannels
	}
	if len(*list)+len(peers) > MaxRankChannels {
		return w.errf(ErrLimit, "more than %d %s channels", MaxRankChannels, t)
	}
	for _, peer := range peers {
		*list = append(*list, Channel{Peer: peer, Ordinal: -1, Reverse: -1})
	}
	return nil
}

// rankGroup decodes one element of a switch channel's "rank_groups".
func (d *decoder) rankGroup(w where) (SwitchChannel, error) {
	var g SwitchChannel
	var seen fields
	err := d.object(w, &seen, func(key string, w where) error {
		var err error
		switch key {
		case "size":
			g.Size, err = d.int(w, 0, maxID)
		case "ranks":
			g.Ranks, err = d.ints(w, MaxRanks, "ranks", 0, maxID)
		default:
			err = d.skip(w)
		}
		return err
	})
	if err == nil {
		err = seen.require(w, "size", "ranks")
	}
	return g, err
}

// remoteBuffer decodes one element of "remote_buffers".
func (d *decoder) remoteBuffer(w where) (RemoteBuffer, error) {
	b := RemoteBuffer{MemoryIndex: -1, PortIndex: -1}
	var typ string
	var access []ChannelType
	var seen fields
	err := d.object(w, &seen, func(key string, w where) error {
		var err error
		switch key {
		case "rank":
			b.Rank, err = d.int(w, 0, maxID)
		case "type":
			typ, err = d.str(w)
		case "access_channel_types":
			access = access[:0]
			err = d.array(w, 2, "access channel types", func(_ int, w where) error {
				s, err := d.str(w)
				if err != nil {
					return err
				}
				t, ok := parseChannelType(s)
				if !ok || (t != ChannelMemory && t != ChannelPort) {
					return w.errf(ErrMalformed, "access channel type %q: want \"memory\" or \"port\"", s)
				}
				access = append(access, t)
				return nil
			})
		default:
			err = d.skip(w)
		}
		return err
	})
	if err != nil {
		return b, err
	}
	if err := seen.require(w, "rank", "type", "access_channel_types"); err != nil {
		return b, err
	}
	var ok bool
	if b.Buffer, ok = parseBufferType(typ); !ok {
		return b, w.at("type").errf(ErrMalformed, "unknown buffer type %q", typ)
	}
	for _, t := range access {
		if (t == ChannelMemory && b.Memory) || (t == ChannelPort && b.Port) {
			return b, w.at("access_channel_types").errf(ErrMalformed, "%s listed twice", t)
		}
		b.Memory = b.Memory || t == ChannelMemory
		b.Port = b.Port || t == ChannelPort
	}
	if !b.Memory && !b.Port {
		return b, w.at("access_channel_types").errf(ErrMalformed, "no access channel type: the buffer could not be reached")
	}
	return b, nil
}

func (d *decoder) semaphore(w where) (Semaphore, error) {
	var s Semaphore
	var seen fields
	err := d.object(w, &seen, func(key string, w where) error {
		if key != "init_value" {
			return d.skip(w)
		}
		var err error
		s.InitValue, err = d.int(w, math.MinInt32, math.MaxInt32)
		return err
	})
	if err == nil {
		err = seen.require(w, "init_value")
	}
	return s, err
}

// lane decodes one element of "threadblocks".
func (d *decoder) lane(w where) (Lane, error) {
	l := Lane{ID: -1}
	var seen fields
	err := d.object(w, &seen, func(key string, w where) error {
		var err error
		switch key {
		case "id":
			l.ID, err = d.int(w, 0, maxID)
		case "channels":
			l.MemoryChannels, l.PortChannels, l.SwitchChannels = nil, nil, nil
			err = d.array(w, 3*MaxLaneChannels, "channel lists", func(_ int, w where) error {
				return d.laneChannels(w, &l)
			})
		case "remote_buffer_refs":
			l.MemoryBuffers, l.PortBuffers = nil, nil
			err = d.array(w, 2*MaxLaneBuffers, "remote buffer lists", func(_ int, w where) error {
				return d.laneBuffers(w, &l)
			})
		case "ops":
			l.Ops = nil
			err = d.array(w, MaxOpsPerLane, "ops", func(i int, w where) error {
				w.op = i
				op, err := d.op(w, false)
				l.Ops = append(l.Ops, op)
				return err
			})
		default:
			err = d.skip(w)
		}
		return err
	})
	if err != nil {
		return l, err
	}
	if err := seen.require(w, "id", "ops", "channels"); err != nil {
		return l, err
	}
	if l.ID != w.lane {
		return l, w.at("id").errf(ErrMalformed,
			"id %d at position %d: MSCCL++ 0.9 builds a lane's channels by id but its ops by position", l.ID, w.lane)
	}
	n := 0
	for i := range l.Ops {
		n += 1 + len(l.Ops[i].Ops)
	}
	if n > MaxOpsPerLane {
		return l, w.at("ops").errf(ErrLimit, "%d ops counting pipelines' inner ops, more than %d", n, MaxOpsPerLane)
	}
	return l, nil
}

// laneChannels decodes one element of a lane's "channels".
func (d *decoder) laneChannels(w where, l *Lane) error {
	var typ, buff string
	var ids []int
	var seen fields
	err := d.object(w, &seen, func(key string, w where) error {
		var err error
		switch key {
		case "channel_type":
			typ, err = d.str(w)
		case "channel_ids":
			ids, err = d.ints(w, MaxLaneChannels, "channel ids", 0, maxID)
		case "buff":
			buff, err = d.str(w)
		default:
			err = d.skip(w)
		}
		return err
	})
	if err != nil {
		return err
	}
	if err := seen.require(w, "channel_type", "channel_ids"); err != nil {
		return err
	}
	if _, ok := parseBufferType(buff); seen.has("buff") && !ok {
		return w.at("buff").errf(ErrMalformed, "unknown buffer type %q", buff)
	}
	t, ok := parseChannelType(typ)
	if !ok || t == ChannelNone {
		return w.at("channel_type").errf(ErrMalformed, "channel type %q: want memory, port or switch", typ)
	}
	list := l.listOf(t)
	if len(*list)+len(ids) > MaxLaneChannels {
		return w.errf(ErrLimit, "more than %d %s channels in one lane", MaxLaneChannels, t)
	}
	*list = append(*list, ids...)
	return nil
}

func (l *Lane) listOf(t ChannelType) *[]int {
	switch t {
	case ChannelMemory:
		return &l.MemoryChannels
	case ChannelPort:
		return &l.PortChannels
	}
	return &l.SwitchChannels
}

// laneBuffers decodes one element of a lane's "remote_buffer_refs".
func (d *decoder) laneBuffers(w where, l *Lane) error {
	var typ string
	var ids []int
	var seen fields
	err := d.object(w, &seen, func(key string, w where) error {
		var err error
		switch key {
		case "access_channel_type":
			typ, err = d.str(w)
		case "remote_buffer_ids":
			ids, err = d.ints(w, MaxLaneBuffers, "remote buffer ids", 0, maxID)
		default:
			err = d.skip(w)
		}
		return err
	})
	if err != nil {
		return err
	}
	if err := seen.require(w, "access_channel_type", "remote_buffer_ids"); err != nil {
		return err
	}
	t, ok := parseChannelType(typ)
	if !ok || (t != ChannelMemory && t != ChannelPort) {
		return w.at("access_channel_type").errf(ErrMalformed, "access channel type %q: want memory or port", typ)
	}
	list := &l.MemoryBuffers
	if t == ChannelPort {
		list = &l.PortBuffers
	}
	if len(*list)+len(ids) > MaxLaneBuffers {
		return w.errf(ErrLimit, "more than %d %s remote buffers in one lane", MaxLaneBuffers, t)
	}
	*list = append(*list, ids...)
	return nil
}

// Op fields whose presence matters beyond their value.
const (
	hasBarrierID = 1 << iota
	hasBarrierCount
	hasSemaphores
	hasIter
	hasOps
	hasSrc
	hasDst
	hasChannelIDs
)

// op decodes one op; inner is true inside a pipeline.
func (d *decoder) op(w where, inner bool) (Op, error) {
	op := Op{Group: TBGroup{ID: 0, Size: 1}}
	var name, chType, reduce string
	var rawOps []byte
	var opsAt where
	has := 0
	var seen fields
	err := d.object(w, &seen, func(key string, w where) error {
		var err error
		switch key {
		case "name":
			name, err = d.str(w)
		case "channel_type":
			chType, err = d.str(w)
		case "channel_ids":
			has |= hasChannelIDs
			op.ChannelIDs, err = d.ints(w, MaxOpChannels, "channel ids", 0, maxID)
		case "src_buff":
			has |= hasSrc
			op.Src, err = d.refs(w)
		case "dst_buff":
			has |= hasDst
			op.Dst, err = d.refs(w)
		case "tbg_info":
			op.Group, err = d.tbGroup(w)
		case "barrier_id":
			has |= hasBarrierID
			op.BarrierID, err = d.int(w, 0, MaxBarriers-1)
		case "num_threadblocks":
			has |= hasBarrierCount
			op.BarrierCount, err = d.int(w, 1, MaxLanes)
		case "semaphore_ids":
			has |= hasSemaphores
			op.SemaphoreIDs, err = d.ints(w, MaxOpSemaphores, "semaphore ids", 0, maxID)
		case "iter_context":
			has |= hasIter
			op.Iter, err = d.iterContext(w)
		case "ops":
			// Kept raw until the name is known: 0.9 reads "ops" only for
			// pipelines and ignores it on every other op.
			has |= hasOps
			opsAt = w
			var err error
			rawOps, err = d.raw(w)
			return err
		case "reduce_op":
			reduce, err = d.str(w)
		default:
			err = d.skip(w)
		}
		return err
	})
	if err != nil {
		return op, err
	}
	if err := seen.require(w, "name"); err != nil {
		return op, err
	}
	code, known := ParseOpCode(name)
	switch {
	case !known:
		return op, w.at("name").errf(ErrUnsupportedOp, "unknown op %q", name)
	case code == OpMultiStore || code == OpMultiStorePackets:
		return op, w.at("name").errf(ErrUnsupportedOp, "op %q is accepted by MSCCL++ only from v0.10.0, not 0.9", name)
	case code == OpMultiLoadReduce:
		return op, w.at("name").errf(ErrUnsupportedOp, "op %q (unfused switch reduce) is accepted by no MSCCL++ parser", name)
	}
	op.Code = code
	if seen.has("channel_type") {
		t, ok := parseChannelType(chType)
		if !ok {
			return op, w.at("channel_type").errf(ErrMalformed, "unknown channel type %q", chType)
		}
		op.Channel = t
	}
	switch reduce {
	case "", "sum":
		op.Reduce = ReduceSum
	case "min":
		op.Reduce = ReduceMin
	case "max":
		op.Reduce = ReduceMax
	default:
		return op, w.at("reduce_op").errf(ErrUnsupportedOp, "unknown reduce_op %q", reduce)
	}
	if code == OpPipeline {
		if inner {
			return op, w.errf(ErrMalformed, "a pipeline inside a pipeline: MSCCL++ does not nest them")
		}
		if has&hasOps != 0 {
			sub := newDecoder(rawOps)
			sub.depth = d.depth + 1
			err := sub.array(opsAt, MaxOpsPerLane, "ops", func(i int, w where) error {
				w.inner = i
				in, err := sub.op(w, true)
				op.Ops = append(op.Ops, in)
				return err
			})
			if err != nil {
				return op, err
			}
		}
	}
	return op, fieldsFit(w, &op, has)
}

// fieldsFit checks that the op has the fields its kind needs, and none that 0.9
// would write over the fields it does use (Operation keeps barrier, semaphore and
// pipeline fields in a union with the channel and buffer fields).
func fieldsFit(w where, op *Op, has int) error {
	owner := func(bit int, field string, code ...OpCode) error {
		if has&bit == 0 {
			return nil
		}
		for _, c := range code {
			if op.Code == c {
				return nil
			}
		}
		return w.at(field).errf(ErrMalformed, "%s on a %s op: 0.9 stores it over the op's other fields", field, op.Code)
	}
	if err := owner(hasBarrierID, "barrier_id", OpBarrier); err != nil {
		return err
	}
	if err := owner(hasBarrierCount, "num_threadblocks", OpBarrier); err != nil {
		return err
	}
	if err := owner(hasSemaphores, "semaphore_ids", OpSemAcquire, OpSemRelease); err != nil {
		return err
	}
	if err := owner(hasIter, "iter_context", OpPipeline); err != nil {
		return err
	}
	switch op.Code {
	case OpBarrier:
		if has&hasBarrierID == 0 || has&hasBarrierCount == 0 {
			return w.errf(ErrMalformed, "barrier needs barrier_id and num_threadblocks")
		}
	case OpSemAcquire, OpSemRelease:
		if len(op.SemaphoreIDs) == 0 {
			return w.errf(ErrMalformed, "%s needs semaphore_ids", op.Code)
		}
	case OpPipeline:
		if has&hasIter == 0 {
			return w.errf(ErrMalformed, "pipeline needs iter_context")
		}
		if len(op.Ops) == 0 {
			return w.errf(ErrMalformed, "pipeline without inner ops")
		}
	}
	return nil
}

// refs decodes a src_buff or dst_buff list.
func (d *decoder) refs(w where) ([]BufferRef, error) {
	out := []BufferRef{}
	err := d.array(w, MaxOpRefs, "buffer references", func(_ int, w where) error {
		r, err := d.ref(w)
		out = append(out, r)
		return err
	})
	return out, err
}

func (d *decoder) ref(w where) (BufferRef, error) {
	r := BufferRef{ID: -1, RemoteBuffer: -1, SwitchChannel: -1}
	var typ string
	var seen fields
	err := d.object(w, &seen, func(key string, w where) error {
		var err error
		switch key {
		case "type":
			typ, err = d.str(w)
		case "buffer_id", "switch_channel_id":
			r.ID, err = d.int(w, 0, maxID)
		case "index":
			r.Index, err = d.int(w, 0, maxID)
		case "size":
			r.Size, err = d.int(w, 0, maxID)
		default:
			err = d.skip(w)
		}
		return err
	})
	if err != nil {
		return r, err
	}
	if err := seen.require(w, "index", "size"); err != nil {
		return r, err
	}
	n := 0
	for _, k := range []string{"type", "buffer_id", "switch_channel_id"} {
		if seen.has(k) {
			n++
		}
	}
	if n != 1 {
		return r, w.errf(ErrMalformed, "a reference needs exactly one of type, buffer_id and switch_channel_id, has %d", n)
	}
	switch {
	case seen.has("type"):
		b, ok := parseBufferType(typ)
		if !ok {
			return r, w.at("type").errf(ErrMalformed, "unknown buffer type %q", typ)
		}
		r.Kind, r.Buffer = RefLocal, b
	case seen.has("buffer_id"):
		r.Kind = RefRemote
	default:
		r.Kind = RefSwitch
	}
	if r.Size == 0 {
		return r, w.at("size").errf(ErrOutOfRange, "size 0: MSCCL++ 0.9 divides by the reference's length (SIGFPE)")
	}
	return r, nil
}

func (d *decoder) tbGroup(w where) (TBGroup, error) {
	var g TBGroup
	var seen fields
	err := d.object(w, &seen, func(key string, w where) error {
		var err error
		switch key {
		case "tb_id":
			g.ID, err = d.int(w, 0, maxID)
		case "tbg_size":
			g.Size, err = d.int(w, 1, MaxLanes)
		default:
			err = d.skip(w)
		}
		return err
	})
	if err != nil {
		return g, err
	}
	if err := seen.require(w, "tb_id", "tbg_size"); err != nil {
		return g, err
	}
	if g.ID >= g.Size {
		return g, w.at("tb_id").errf(ErrOutOfRange, "tb_id %d not below tbg_size %d", g.ID, g.Size)
	}
	return g, nil
}

func (d *decoder) iterContext(w where) (IterContext, error) {
	var c IterContext
	var seen fields
	err := d.object(w, &seen, func(key string, w where) error {
		var err error
		switch key {
		case "unit_size":
			c.UnitBytes, err = d.uint64(w, MaxUnitBytes)
			if err == nil && c.UnitBytes == 0 {
				err = w.errf(ErrOutOfRange, "unit_size 0: MSCCL++ 0.9 divides by it")
			}
		case "num_chunks":
			c.Chunks, err = d.int(w, 1, MaxChunks)
		default:
			err = d.skip(w)
		}
		return err
	})
	if err == nil {
		err = seen.require(w, "unit_size", "num_chunks")
	}
	return c, err
}
