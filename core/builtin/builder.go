package builtin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/ucxx-go/ucxx-go/core/plan"
)

// builder assembles one plan: per rank its chunk counts, memory channels, remote
// buffers and lanes, in the JSON shape MSCCL++ 0.9 reads (docs/plan-format.md).
// Algorithms add lanes, connect them pairwise (connect) and append ops; marshal
// writes the JSON and parses it back with plan.Parse, so every built-in plan is
// validated.
type builder struct {
	name       string
	collective string
	inPlace    bool
	alignment  int
	ranks      []*rankB
	// variable marks a plan whose blocks' sizes each call gives
	// ("ucxxgo_variable_blocks", plan/variable.go).
	variable bool
}

type rankB struct {
	id               int
	in, out, scratch int
	peers            []int // memory channels: connected_to, in rank-level order
	remote           []remoteKey
	remoteID         map[remoteKey]int
	lanes            []*laneB
}

// remoteKey is a peer buffer: its owner and its type ("i", "o" or "s").
type remoteKey struct {
	rank int
	typ  string
}

// laneB is one thread block.
type laneB struct {
	rank     *rankB
	channels []int // rank-level memory channel indices
	bufs     []int // rank-level remote-buffer ids
	bufID    map[int]int
	ops      []opJ
}

func newBuilder(name, collective string, n int, inPlace bool, alignment int) *builder {
	b := &builder{name: name, collective: collective, inPlace: inPlace, alignment: alignment}
	for r := 0; r < n; r++ {
		b.ranks = append(b.ranks, &rankB{id: r, remoteID: map[remoteKey]int{}})
	}
	return b
}

// lane appends a new lane to rank r.
func (b *builder) lane(r int) *laneB {
	rk := b.ranks[r]
	l := &laneB{rank: rk, bufID: map[int]int{}}
	rk.lanes = append(rk.lanes, l)
	return l
}

// connect makes a new memory channel between lane x (on one rank) and lane y (on
// another) and returns each lane's local index of its end. Channels are only ever
// made in pairs, so each rank's k-th channel to the other is the k-th in both lists,
// which is how MSCCL++ pairs them: x's end and y's end are one semaphore pair. Each
// end belongs to exactly one lane.
func connect(x, y *laneB) (cx, cy int) {
	if x.rank == y.rank {
		panic("builtin: connect within one rank")
	}
	return x.addChannel(y.rank.id), y.addChannel(x.rank.id)
}

func (l *laneB) addChannel(peer int) int {
	rk := l.rank
	rk.peers = append(rk.peers, peer)
	l.channels = append(l.channels, len(rk.peers)-1)
	return len(l.channels) - 1
}

// local returns a reference to chunks [index, index+size) of one of the lane's
// rank's own buffers.
func local(typ string, index, size int) refJ {
	return refJ{Type: typ, Index: index, Size: size}
}

// remote returns a reference to chunks [index, index+size) of buffer typ of rank
// owner, adding the remote buffer to the rank's and the lane's lists as needed.
func (l *laneB) remote(owner int, typ string, index, size int) refJ {
	rk := l.rank
	k := remoteKey{owner, typ}
	id, ok := rk.remoteID[k]
	if !ok {
		id = len(rk.remote)
		rk.remote = append(rk.remote, k)
		rk.remoteID[k] = id
	}
	lid, ok := l.bufID[id]
	if !ok {
		lid = len(l.bufs)
		l.bufs = append(l.bufs, id)
		l.bufID[id] = lid
	}
	return refJ{BufferID: &lid, Index: index, Size: size}
}

func (l *laneB) add(op opJ) { l.ops = append(l.ops, op) }

func (l *laneB) nop() { l.add(opJ{Name: "nop"}) }

// sync appends a signal-like or wait-like op on the lane's channels chs (8 at most
// per op: MSCCL++ 0.9 gives thread i channel i of at most 8).
func (l *laneB) sync(name string, chs ...int) {
	for len(chs) > 0 {
		k := min(len(chs), plan.MaxOpChannels)
		l.add(opJ{Name: name, ChannelIDs: append([]int(nil), chs[:k]...), ChannelType: "memory"})
		chs = chs[k:]
	}
}

// handshakes puts the start-of-call handshake (handshake) at the head of every
// lane, once the algorithm has made all its channels.
func (b *builder) handshakes() {
	for _, r := range b.ranks {
		for _, l := range r.lanes {
			body := l.ops
			l.ops = nil
			l.handshake()
			l.ops = append(l.ops, body...)
		}
	}
}

// handshake appends the relaxed start-of-call handshake on every channel the lane
// has: rlxsignal all, rlxwait all, then a nop so that no thread touches a peer's
// buffers before the waits are through. A rank enters a call only after its
// previous call has ended, so once a lane's rlxwait on a channel returns, the
// peer at its other end has finished every use of its buffers from the previous
// call, and nothing of this call can race with that.
func (l *laneB) handshake() {
	if len(l.channels) == 0 {
		return
	}
	all := make([]int, len(l.channels))
	for i := range all {
		all[i] = i
	}
	l.sync("rlxsignal", all...)
	l.sync("rlxwait", all...)
	l.nop()
}

// builtinRefs bounds an op's reference lists in the built-ins: 8, MSCCL++ 0.9's
// channels per operation (MAX_CHANNEL_PER_OPERATION in
// src/core/include/execution_common.hpp; an op lists at most 2 local and 8 remote
// references, plan.MaxOpRefs = 10 in all). Its DSL fuses to 8, and so does ours; the
// built-ins are DSL programs (python/ucxx_go/language/builtins*.py), so past 8 ranks
// the two give the same plans byte for byte (the goldens cover 10 ranks).
const builtinRefs = 8

// put appends a memory-channel put of local srcs to remote dsts (pairwise). All
// sources must be of one buffer type (0.9 takes src_buff[0]'s type for all).
func (l *laneB) put(srcs, dsts []refJ) {
	for len(srcs) > 0 {
		k := min(len(srcs), builtinRefs)
		l.add(opJ{Name: "put", Src: srcs[:k:k], Dst: dsts[:k:k], ChannelType: "memory"})
		srcs, dsts = srcs[k:], dsts[k:]
	}
}

// reduce appends dst = srcs[0] ⊕ srcs[1] ⊕ ..., all local, split into as many re
// ops as the reference limit (builtinRefs) needs (each later op starts from dst,
// after a nop: it reads what the lane just wrote). If sends is not empty the last op
// is a res that also stores the result to those remote refs (at most
// builtinRefs-1).
func (l *laneB) reduce(dst refJ, srcs []refJ, sends []refJ) {
	acc := srcs[0]
	rest := srcs[1:]
	for {
		k := min(len(rest), builtinRefs-1)
		src := append([]refJ{acc}, rest[:k]...)
		rest = rest[k:]
		if len(rest) == 0 && len(sends) > 0 {
			l.add(opJ{Name: "res", Src: src, Dst: append([]refJ{dst}, sends...), ChannelType: "memory"})
			return
		}
		l.add(opJ{Name: "re", Src: src, Dst: []refJ{dst}})
		if len(rest) == 0 {
			return
		}
		l.nop()
		acc = dst
	}
}

func (l *laneB) copy(dst, src refJ) {
	l.add(opJ{Name: "copy", Src: []refJ{src}, Dst: []refJ{dst}})
}

func (l *laneB) barrier(id, count int) {
	if count <= 1 {
		return
	}
	l.add(opJ{Name: "barrier", BarrierID: &id, NumThreadblocks: count})
}

// JSON shapes of the parts written whole, in the key order the MSCCL++ DSL writes.

type chanJ struct {
	ChannelType string `json:"channel_type"`
	ConnectedTo []int  `json:"connected_to"`
}

type remoteJ struct {
	Rank               int      `json:"rank"`
	Type               string   `json:"type"`
	AccessChannelTypes []string `json:"access_channel_types"`
}

type tbChanJ struct {
	ChannelType string `json:"channel_type"`
	ChannelIDs  []int  `json:"channel_ids"`
}

type tbRemoteJ struct {
	AccessChannelType string `json:"access_channel_type"`
	RemoteBufferIDs   []int  `json:"remote_buffer_ids"`
}

type opJ struct {
	Name            string `json:"name"`
	Src             []refJ `json:"src_buff,omitempty"`
	Dst             []refJ `json:"dst_buff,omitempty"`
	ChannelIDs      []int  `json:"channel_ids,omitempty"`
	ChannelType     string `json:"channel_type,omitempty"`
	BarrierID       *int   `json:"barrier_id,omitempty"`
	NumThreadblocks int    `json:"num_threadblocks,omitempty"`
}

// refJ is a local ({"type"}) or remote ({"buffer_id"}) buffer reference.
type refJ struct {
	Type     string `json:"type,omitempty"`
	BufferID *int   `json:"buffer_id,omitempty"`
	Index    int    `json:"index"`
	Size     int    `json:"size"`
}

// marshal writes the plan's JSON, one op per line so that golden diffs stay
// readable, and parses it back: a built-in is returned only if plan.Parse accepts it.
func (b *builder) marshal() ([]byte, *plan.Plan, error) {
	var w bytes.Buffer
	enc := func(v any) {
		raw, err := json.Marshal(v)
		if err != nil {
			panic("builtin: " + err.Error()) // only plain structs, slices and strings here
		}
		w.Write(raw)
	}
	w.WriteString(`{"name":`)
	enc(b.name)
	w.WriteString(`,"collective":`)
	enc(b.collective)
	fmt.Fprintf(&w, ",\"protocol\":\"Simple\",\"inplace\":%t,\"reuse_resources\":false,", b.inPlace)
	if b.variable {
		w.WriteString("\"ucxxgo_variable_blocks\":true,")
	}
	w.WriteString("\n\"gpus\":[")
	for ri, r := range b.ranks {
		if ri > 0 {
			w.WriteString(",")
		}
		fmt.Fprintf(&w, "\n{\"id\":%d,\"input_chunks\":%d,\"output_chunks\":%d,\"scratch_chunks\":%d,\n \"threadblocks\":[",
			r.id, r.in, r.out, r.scratch)
		for li, l := range r.lanes {
			if li > 0 {
				w.WriteString(",")
			}
			fmt.Fprintf(&w, "\n  {\"id\":%d,\"ops\":[", li)
			for oi, op := range l.ops {
				if oi > 0 {
					w.WriteString(",")
				}
				w.WriteString("\n   ")
				enc(op)
			}
			w.WriteString("],\n   \"channels\":")
			chs := []tbChanJ{}
			if len(l.channels) > 0 {
				chs = append(chs, tbChanJ{ChannelType: "memory", ChannelIDs: l.channels})
			}
			enc(chs)
			w.WriteString(",\"remote_buffer_refs\":")
			bufs := []tbRemoteJ{}
			if len(l.bufs) > 0 {
				bufs = append(bufs, tbRemoteJ{AccessChannelType: "memory", RemoteBufferIDs: l.bufs})
			}
			enc(bufs)
			w.WriteString("}")
		}
		w.WriteString("],\n \"channels\":")
		chs := []chanJ{}
		if len(r.peers) > 0 {
			chs = append(chs, chanJ{ChannelType: "memory", ConnectedTo: r.peers})
		}
		enc(chs)
		w.WriteString(",\n \"remote_buffers\":")
		rbs := []remoteJ{}
		for _, k := range r.remote {
			rbs = append(rbs, remoteJ{Rank: k.rank, Type: k.typ, AccessChannelTypes: []string{"memory"}})
		}
		enc(rbs)
		w.WriteString(",\n \"semaphores\":[]}")
	}
	fmt.Fprintf(&w, "],\n\"num_threads_per_block\":1024,\"use_double_scratch_buffer\":false,\"buffer_alignment\":%d,"+
		"\"min_message_size\":0,\"max_message_size\":%d}\n", b.alignment, uint64(math.MaxUint64))
	p, err := plan.Parse(w.Bytes())
	if err != nil {
		return nil, nil, fmt.Errorf("builtin: %s does not validate: %w", b.name, err)
	}
	return w.Bytes(), p, nil
}
