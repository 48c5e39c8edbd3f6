package plan

import "slices"

// validate checks a decoded plan's cross-references and fills in what they resolve
// to. Decoding has already bounded every count and checked each object's own
// fields; this checks what needs the whole plan: rank, channel, buffer, semaphore
// and lane ids against what they name, each op against its kind, and the pairing
// of synchronisation across lanes and ranks (sync.go).
func validate(p *Plan) error {
	for r := range p.Ranks {
		if err := validateRank(p, r); err != nil {
			return err
		}
	}
	if err := pairChannels(p); err != nil {
		return err
	}
	for r := range p.Ranks {
		if err := validateLanes(p, r); err != nil {
			return err
		}
	}
	if err := checkSwitchGroups(p); err != nil {
		return err
	}
	if err := checkSignalsAndWaits(p); err != nil {
		return err
	}
	for r := range p.Ranks {
		if err := checkBarriers(p, r); err != nil {
			return err
		}
		if err := checkSemaphores(p, r); err != nil {
			return err
		}
	}
	return nil
}

func rankWhere(r int) where {
	w := nowhere.at("gpus").idx(r)
	w.rank = r
	return w
}

// validateRank checks the rank-level lists: channel peers, switch groups, remote
// buffers.
func validateRank(p *Plan, r int) error {
	rk := &p.Ranks[r]
	w := rankWhere(r)
	n := len(p.Ranks)
	for _, t := range []ChannelType{ChannelMemory, ChannelPort} {
		for i, c := range rk.Channels(t) {
			if c.Peer >= n {
				return w.at("channels").errf(ErrOutOfRange, "%s channel %d connects to rank %d of %d", t, i, c.Peer, n)
			}
			if c.Peer == r {
				return w.at("channels").errf(ErrOutOfRange, "%s channel %d connects rank %d to itself", t, i, r)
			}
		}
	}
	for i, s := range rk.SwitchChannels {
		if len(s.Ranks) == 0 {
			return w.at("channels").errf(ErrMalformed, "switch channel %d has an empty rank group", i)
		}
		mine := false
		seen := make(map[int]bool, len(s.Ranks))
		for _, q := range s.Ranks {
			if q >= n {
				return w.at("channels").errf(ErrOutOfRange, "switch channel %d names rank %d of %d", i, q, n)
			}
			if seen[q] {
				return w.at("channels").errf(ErrMalformed, "switch channel %d names rank %d twice", i, q)
			}
			seen[q] = true
			mine = mine || q == r
		}
		if !mine {
			return w.at("channels").errf(ErrMalformed, "switch channel %d's group does not include rank %d itself", i, r)
		}
	}
	nMem, nPort := 0, 0
	for i := range rk.RemoteBuffers {
		b := &rk.RemoteBuffers[i]
		wb := w.at("remote_buffers").idx(i)
		if b.Rank >= n {
			return wb.at("rank").errf(ErrOutOfRange, "owner rank %d of %d", b.Rank, n)
		}
		if b.Rank == r {
			return wb.at("rank").errf(ErrOutOfRange, "rank %d names its own buffer as remote", r)
		}
		if b.Buffer == BufferScratch && p.Ranks[b.Rank].ScratchChunks == 0 {
			return wb.at("type").errf(ErrOutOfRange, "rank %d has no scratch buffer (scratch_chunks 0)", b.Rank)
		}
		if b.Memory {
			b.MemoryIndex = nMem
			nMem++
		}
		if b.Port {
			b.PortIndex = nPort
			nPort++
		}
	}
	return nil
}

// validateLanes checks every lane of rank r and its ops.
func validateLanes(p *Plan, r int) error {
	rk := &p.Ranks[r]
	for li := range rk.Lanes {
		l := &rk.Lanes[li]
		w := rankWhere(r).at("threadblocks").idx(li)
		w.lane = li
		for _, t := range []ChannelType{ChannelMemory, ChannelPort, ChannelSwitch} {
			have := len(rk.Channels(t))
			if t == ChannelSwitch {
				have = len(rk.SwitchChannels)
			}
			for _, c := range l.ChannelList(t) {
				if c >= have {
					return w.at("channels").errf(ErrOutOfRange, "%s channel %d: rank %d has %d", t, c, r, have)
				}
			}
		}
		for _, t := range []ChannelType{ChannelMemory, ChannelPort} {
			for _, b := range l.BufferList(t) {
				if b >= len(rk.RemoteBuffers) {
					return w.at("remote_buffer_refs").errf(ErrOutOfRange, "remote buffer %d: rank %d has %d", b, r, len(rk.RemoteBuffers))
				}
				rb := &rk.RemoteBuffers[b]
				if (t == ChannelMemory && !rb.Memory) || (t == ChannelPort && !rb.Port) {
					return w.at("remote_buffer_refs").errf(ErrMalformed,
						"remote buffer %d is listed for %s access but its access_channel_types lack it", b, t)
				}
			}
		}
		for oi := range l.Ops {
			op := &l.Ops[oi]
			wo := w.at("ops").idx(oi)
			wo.op = oi
			if err := validateOp(p, r, l, op, wo); err != nil {
				return err
			}
			for ii := range op.Ops {
				wi := wo.at("ops").idx(ii)
				wi.inner = ii
				if err := validateOp(p, r, l, &op.Ops[ii], wi); err != nil {
					return err
				}
				if err := checkPipelineRefs(op, &op.Ops[ii], wi); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkPipelineRefs checks that an inner op's refs cover the pipeline's chunks: a
// shorter ref makes 0.9's window length underflow and run past the ref's end.
func checkPipelineRefs(pipe, op *Op, w where) error {
	if !op.Code.Windowed() {
		return nil
	}
	for _, list := range [][]BufferRef{op.Src, op.Dst} {
		for i := range list {
			if list[i].Size < pipe.Iter.Chunks {
				return w.errf(ErrOutOfRange, "reference of %d chunks in a pipeline over %d chunks: its windows would run past its end",
					list[i].Size, pipe.Iter.Chunks)
			}
		}
	}
	return nil
}

// role is what an op does with one of its refs.
type role uint8

const (
	roleNone      role = iota
	roleLocal          // a local buffer, data
	roleLocalPkt       // a local scratch region holding packets
	roleRemote         // a peer buffer, data
	roleRemotePkt      // a peer scratch region receiving packets
	roleSwitch         // a multicast address
)

// shape is the refs an op's list must have: the fixed roles first, then at least
// min more of role rest (rest roleNone: no more).
type shape struct {
	fixed []role
	rest  role
	min   int
}

func fixed(r ...role) shape               { return shape{fixed: r} }
func many(r role, min int) shape          { return shape{rest: r, min: min} }
func then(s shape, r role, min int) shape { s.rest, s.min = r, min; return s }

// opShape returns the shape of an op's src_buff and dst_buff, and the channel
// types it may run on (nil: any, it uses no channel).
func opShape(op *Op) (src, dst shape, channels []ChannelType) {
	memOrPort := []ChannelType{ChannelMemory, ChannelPort}
	memory := []ChannelType{ChannelMemory}
	port := []ChannelType{ChannelPort}
	pktSrc := then(fixed(roleLocal), roleLocalPkt, 1)
	switch op.Code {
	case OpSignal, OpWait, OpRelaxedSignal, OpRelaxedWait:
		return shape{}, shape{}, memOrPort
	case OpFlush:
		return shape{}, shape{}, port
	case OpPut:
		return many(roleLocal, 1), many(roleRemote, 1), memOrPort
	case OpPutWithSignal, OpPutWithSignalAndFlush:
		return many(roleLocal, 1), many(roleRemote, 1), port
	case OpGet:
		return many(roleRemote, 1), many(roleLocal, 1), memory
	case OpCopy:
		return fixed(roleLocal), fixed(roleLocal), nil
	case OpReduce:
		return then(fixed(roleLocal), roleLocal, 0), fixed(roleLocal), nil
	case OpReduceSend:
		return then(fixed(roleLocal), roleLocal, 0), then(fixed(roleLocal), roleRemote, 1), memory
	case OpReadReduce:
		return then(fixed(roleLocal), roleRemote, 1), fixed(roleLocal), memory
	case OpReadReduceSend:
		return then(fixed(roleLocal), roleRemote, 1), then(fixed(roleLocal), roleRemote, 1), memory
	case OpPutPackets:
		if op.Channel == ChannelPort { // the proxy copies packets already in scratch
			return many(roleLocalPkt, 1), many(roleRemotePkt, 1), memOrPort
		}
		return many(roleLocal, 1), many(roleRemotePkt, 1), memOrPort
	case OpReadPutPackets:
		return fixed(roleLocalPkt), many(roleRemotePkt, 1), memOrPort
	case OpCopyPackets:
		return fixed(roleLocal), fixed(roleLocalPkt), nil
	case OpUnpackPackets:
		return fixed(roleLocalPkt), fixed(roleLocal), nil
	case OpReducePackets:
		return pktSrc, fixed(roleLocal), nil
	case OpReduceSendPackets:
		return pktSrc, then(fixed(roleLocal), roleRemotePkt, 1), memory
	case OpReduceCopyPackets:
		return pktSrc, fixed(roleLocal, roleLocalPkt), nil
	case OpReduceCopySendPackets:
		return pktSrc, then(fixed(roleLocal, roleLocalPkt), roleRemotePkt, 1), memory
	case OpMultiLoadReduceStore:
		return fixed(roleSwitch), fixed(roleSwitch), []ChannelType{ChannelSwitch}
	}
	// nop, barrier, pipeline, sem_acquire, sem_release: no refs, no channel.
	return shape{}, shape{}, nil
}

// validateOp checks one op of lane l of rank r and resolves its refs.
func validateOp(p *Plan, r int, l *Lane, op *Op, w where) error {
	rk := &p.Ranks[r]
	src, dst, channels := opShape(op)

	if channels != nil && !slices.Contains(channels, op.Channel) {
		if op.Channel == ChannelMemory && (op.Code == OpPutWithSignal || op.Code == OpPutWithSignalAndFlush) {
			return w.at("channel_type").errf(ErrUnsupportedOp, "%s on a memory channel: MSCCL++ 0.9 runs it as a put and drops the signal", op.Code)
		}
		if op.Channel == ChannelNone {
			return w.errf(ErrMalformed, "%s needs a channel_type (%v): 0.9 rejects it without one (\"Invalid channel type\"), which the 0.9 DSL's res triggers", op.Code, channels)
		}
		if op.Channel == ChannelPort && op.Code == OpGet {
			return w.at("channel_type").errf(ErrUnsupportedOp, "get on a port channel: MSCCL++ 0.9 implements get only over memory channels")
		}
		return w.at("channel_type").errf(ErrMalformed, "%s on channel type %q, want one of %v", op.Code, op.Channel, channels)
	}
	if len(op.ChannelIDs) > 0 {
		list := l.ChannelList(op.Channel)
		if op.Channel == ChannelNone {
			return w.at("channel_ids").errf(ErrMalformed, "channel_ids without a channel_type")
		}
		for _, c := range op.ChannelIDs {
			if c >= len(list) {
				return w.at("channel_ids").errf(ErrOutOfRange, "%s channel %d: the lane has %d", op.Channel, c, len(list))
			}
		}
	}
	if op.Code.Packet() && !p.UsesPackets() {
		return w.errf(ErrMalformed, "packet op %s in a plan whose protocol is %q, not \"LL\": its scratch buffer has no room for packets", op.Code, p.Protocol)
	}

	// Per-thread work: 0.9 gives thread i item i.
	perThread := 0
	switch op.Code {
	case OpSignal, OpWait, OpRelaxedSignal, OpRelaxedWait, OpFlush:
		if len(op.ChannelIDs) == 0 {
			return w.errf(ErrMalformed, "%s needs channel_ids", op.Code)
		}
		perThread = len(op.ChannelIDs)
		if op.Code.waits() {
			for i, c := range op.ChannelIDs {
				if slices.Contains(op.ChannelIDs[:i], c) {
					return w.at("channel_ids").errf(ErrMalformed, "%s lists channel %d twice: 0.9's threads would race on its expected count", op.Code, c)
				}
			}
		}
	case OpSemAcquire, OpSemRelease:
		perThread = len(op.SemaphoreIDs)
		for _, s := range op.SemaphoreIDs {
			if s >= len(rk.Semaphores) {
				return w.at("semaphore_ids").errf(ErrOutOfRange, "semaphore %d: rank %d has %d", s, r, len(rk.Semaphores))
			}
		}
	}
	if op.Channel == ChannelPort {
		switch op.Code {
		case OpPut, OpPutWithSignal, OpPutWithSignalAndFlush, OpPutPackets, OpReadPutPackets:
			if len(op.ChannelIDs) != len(op.Dst) {
				return w.at("channel_ids").errf(ErrMalformed, "port %s with %d destinations needs one channel id each, has %d",
					op.Code, len(op.Dst), len(op.ChannelIDs))
			}
			perThread = len(op.Dst)
		}
	}
	if perThread > p.ThreadsPerBlock {
		return w.errf(ErrOutOfRange, "%s needs %d threads, num_threads_per_block is %d", op.Code, perThread, p.ThreadsPerBlock)
	}

	if err := resolveRefs(p, r, l, op, op.Src, src, w.at("src_buff")); err != nil {
		return err
	}
	if err := resolveRefs(p, r, l, op, op.Dst, dst, w.at("dst_buff")); err != nil {
		return err
	}
	if err := checkSizes(op, w); err != nil {
		return err
	}
	if op.Channel == ChannelPort {
		for i, c := range op.ChannelIDs {
			if i >= len(op.Dst) {
				break
			}
			peer := rk.PortChannels[l.PortChannels[c]].Peer
			if owner := op.Dst[i].Rank; op.Dst[i].Kind == RefRemote && owner != peer {
				return w.at("dst_buff").idx(i).errf(ErrMalformed,
					"destination on rank %d sent over port channel %d to rank %d", owner, c, peer)
			}
		}
	}
	return nil
}

// checkSizes checks that the refs an op pairs up have the same length: a put's
// source and destination i, a reduction's operands. The op would otherwise read or
// write past the shorter one.
func checkSizes(op *Op, w where) error {
	switch op.Code {
	case OpPut, OpPutWithSignal, OpPutWithSignalAndFlush, OpPutPackets, OpGet:
		if len(op.Src) != len(op.Dst) {
			return w.errf(ErrMalformed, "%s with %d sources and %d destinations", op.Code, len(op.Src), len(op.Dst))
		}
		for i := range op.Src {
			if op.Src[i].Size != op.Dst[i].Size {
				return w.at("dst_buff").idx(i).errf(ErrMalformed, "size %d, its source has %d", op.Dst[i].Size, op.Src[i].Size)
			}
		}
		return nil
	}
	var first *BufferRef
	for _, list := range [][]BufferRef{op.Src, op.Dst} {
		for i := range list {
			if first == nil {
				first = &list[i]
			} else if list[i].Size != first.Size {
				return w.errf(ErrMalformed, "%s mixes references of %d and %d chunks", op.Code, first.Size, list[i].Size)
			}
		}
	}
	return nil
}

// resolveRefs checks a ref list against its shape and bounds, and fills in what
// each ref resolves to.
func resolveRefs(p *Plan, r int, l *Lane, op *Op, list []BufferRef, s shape, w where) error {
	if len(list) < len(s.fixed)+s.min || (s.rest == roleNone && len(list) > len(s.fixed)) {
		want := len(s.fixed) + s.min
		if s.rest == roleNone {
			return w.errf(ErrMalformed, "%s takes %d references here, has %d", op.Code, want, len(list))
		}
		return w.errf(ErrMalformed, "%s takes at least %d references here, has %d", op.Code, want, len(list))
	}
	rk := &p.Ranks[r]
	for i := range list {
		ref := &list[i]
		wr := w.idx(i)
		want := s.rest
		if i < len(s.fixed) {
			want = s.fixed[i]
		}
		switch ref.Kind {
		case RefLocal:
			ref.Rank = r
		case RefRemote:
			if op.Channel != ChannelMemory && op.Channel != ChannelPort {
				return wr.errf(ErrMalformed, "remote reference on an op with channel_type %q: 0.9 rejects it (Invalid channel type)", op.Channel)
			}
			bl := l.BufferList(op.Channel)
			if ref.ID >= len(bl) {
				return wr.at("buffer_id").errf(ErrOutOfRange, "buffer_id %d: the lane has %d %s remote buffers", ref.ID, len(bl), op.Channel)
			}
			ref.RemoteBuffer = bl[ref.ID]
			rb := &rk.RemoteBuffers[ref.RemoteBuffer]
			ref.Buffer, ref.Rank = rb.Buffer, rb.Rank
		case RefSwitch:
			sl := l.SwitchChannels
			if ref.ID >= len(sl) {
				return wr.at("switch_channel_id").errf(ErrOutOfRange, "switch_channel_id %d: the lane has %d switch channels", ref.ID, len(sl))
			}
			ref.SwitchChannel = sl[ref.ID]
			ref.Buffer, ref.Rank = rk.SwitchChannels[ref.SwitchChannel].Buffer, r
		}
		var ok bool
		switch want {
		case roleLocal:
			ok = ref.Kind == RefLocal
		case roleLocalPkt:
			ok = ref.Kind == RefLocal && ref.Buffer == BufferScratch
		case roleRemote:
			ok = ref.Kind == RefRemote
		case roleRemotePkt:
			ok = ref.Kind == RefRemote && ref.Buffer == BufferScratch
		case roleSwitch:
			ok = ref.Kind == RefSwitch
		}
		if !ok {
			return wr.errf(ErrMalformed, "%s needs %s here, has %s", op.Code, want, describeRef(ref))
		}
		ref.Packet = want == roleLocalPkt || want == roleRemotePkt
		if err := checkBounds(p, ref, wr); err != nil {
			return err
		}
	}
	return nil
}

func (r role) String() string {
	switch r {
	case roleLocal:
		return "a local reference"
	case roleLocalPkt:
		return "a local scratch reference (packets)"
	case roleRemote:
		return "a remote reference"
	case roleRemotePkt:
		return "a remote scratch reference (packets)"
	case roleSwitch:
		return "a switch reference"
	}
	return "no reference"
}

func describeRef(ref *BufferRef) string {
	switch ref.Kind {
	case RefLocal:
		return "local buffer " + ref.Buffer.String()
	case RefRemote:
		return "remote buffer " + ref.Buffer.String()
	}
	return "switch buffer " + ref.Buffer.String()
}

// checkBounds checks that a resolved ref's chunks lie inside its buffer: the
// owner's buffer for a remote ref, every group member's for a switch ref.
func checkBounds(p *Plan, ref *BufferRef, w where) error {
	owners := []int{ref.Rank}
	if ref.Kind == RefSwitch {
		owners = p.Ranks[ref.Rank].SwitchChannels[ref.SwitchChannel].Ranks
	}
	for _, o := range owners {
		n := p.Ranks[o].Chunks(ref.Buffer)
		if ref.Index+ref.Size > n {
			return w.errf(ErrOutOfRange, "chunks %d..%d of rank %d's %s buffer, which has %s %d",
				ref.Index, ref.Index+ref.Size, o, ref.Buffer, ref.Buffer.chunkField(), n)
		}
	}
	return nil
}
