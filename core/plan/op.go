package plan

// OpCode is an operation's kind: the "name" of an op. The order is 0.9's
// OperationType enum, then the names that appear only in later versions or in the
// DSL. Parse accepts exactly the codes for which Accepted reports true.
type OpCode uint8

const (
	OpNop                   OpCode = iota + 1 // "nop": barrier among the lane's own threads
	OpBarrier                                 // "barrier": device-wide barrier of BarrierCount lanes
	OpPut                                     // "put": local Src[i] to remote Dst[i]
	OpPutPackets                              // "ppkt": put as LL packets
	OpReadPutPackets                          // "rppkt": forward received packets to remote Dst
	OpPutWithSignal                           // "pws": port put, then signal the channel
	OpPutWithSignalAndFlush                   // "pwsf": pws, then wait until the proxy drained (0.9: as pws)
	OpGet                                     // "get": remote Src[i] to local Dst[i]
	OpCopy                                    // "copy": local Src[0] to local Dst[0]
	OpCopyPackets                             // "cpkt": local data to local packets
	OpUnpackPackets                           // "upkt": local packets to local data
	OpSignal                                  // "signal": release-increment each channel's peer semaphore
	OpWait                                    // "wait": acquire-wait for the next increment on each channel
	OpFlush                                   // "flush": complete the port channels' earlier transfers (0.9: no-op)
	OpReduce                                  // "re": Dst[0] = Src[0] + Src[1..]
	OpReducePackets                           // "repkt": re with packet sources Src[1..]
	OpReduceCopyPackets                       // "recpkt": repkt, also to local packets Dst[1]
	OpReduceSend                              // "res": re, also stored to remote Dst[1..]
	OpReduceSendPackets                       // "respkt": repkt, also as packets to remote Dst[1..]
	OpReduceCopySendPackets                   // "recspkt": recpkt, also as packets to remote Dst[2..]
	OpReadReduce                              // "rre": Dst[0] = Src[0] + remote Src[1..]
	OpReadReduceSend                          // "rres": rre, also stored to remote Dst[1..]
	OpMultiLoadReduceStore                    // "glres": NVLS multimem reduce then broadcast
	OpRelaxedSignal                           // "rlxsignal": signal with relaxed ordering
	OpRelaxedWait                             // "rlxwait": wait with relaxed ordering
	OpPipeline                                // "pipeline": run Ops over successive windows
	OpSemRelease                              // "sem_release": V() on each semaphore
	OpSemAcquire                              // "sem_acquire": P() on each semaphore

	// Names 0.9 rejects ("Invalid operation type").

	OpMultiStore        // "gstore": NVLS multimem store; accepted from v0.10.0
	OpMultiStorePackets // "gstorepkt": gstore as LL packets; accepted from v0.10.0
	OpMultiLoadReduce   // "glre": unfused NVLS reduce; emitted by the DSL, accepted by no version

	opCodeEnd
)

var opNames = [opCodeEnd]string{
	OpNop: "nop", OpBarrier: "barrier", OpPut: "put", OpPutPackets: "ppkt",
	OpReadPutPackets: "rppkt", OpPutWithSignal: "pws", OpPutWithSignalAndFlush: "pwsf",
	OpGet: "get", OpCopy: "copy", OpCopyPackets: "cpkt", OpUnpackPackets: "upkt",
	OpSignal: "signal", OpWait: "wait", OpFlush: "flush", OpReduce: "re",
	OpReducePackets: "repkt", OpReduceCopyPackets: "recpkt", OpReduceSend: "res",
	OpReduceSendPackets: "respkt", OpReduceCopySendPackets: "recspkt",
	OpReadReduce: "rre", OpReadReduceSend: "rres", OpMultiLoadReduceStore: "glres",
	OpRelaxedSignal: "rlxsignal", OpRelaxedWait: "rlxwait", OpPipeline: "pipeline",
	OpSemRelease: "sem_release", OpSemAcquire: "sem_acquire",
	OpMultiStore: "gstore", OpMultiStorePackets: "gstorepkt", OpMultiLoadReduce: "glre",
}

// String returns the op's name as plans spell it.
func (c OpCode) String() string {
	if c > 0 && c < opCodeEnd {
		return opNames[c]
	}
	return "?"
}

// ParseOpCode returns the code of an op name, accepted by 0.9 or not.
func ParseOpCode(name string) (OpCode, bool) {
	for c := OpNop; c < opCodeEnd; c++ {
		if opNames[c] == name {
			return c, true
		}
	}
	return 0, false
}

// Accepted reports whether MSCCL++ 0.9's parser accepts the op (and so Parse).
func (c OpCode) Accepted() bool { return c >= OpNop && c <= OpSemAcquire }

// Packet reports whether the op reads or writes LL packets (some of its refs are
// packet regions: BufferRef.Packet).
func (c OpCode) Packet() bool {
	switch c {
	case OpPutPackets, OpReadPutPackets, OpCopyPackets, OpUnpackPackets, OpReducePackets,
		OpReduceCopyPackets, OpReduceSendPackets, OpReduceCopySendPackets, OpMultiStorePackets:
		return true
	}
	return false
}

// Windowed reports whether the op, inside a pipeline, works on the current window
// of its refs (Layout.Window). Other ops ignore the window: inside a pipeline they
// run whole, once per iteration (0.9's kernel passes the window only to these).
func (c OpCode) Windowed() bool {
	switch c {
	case OpCopy, OpPut, OpPutWithSignal, OpPutWithSignalAndFlush, OpGet, OpReduce,
		OpReduceSend, OpReadReduce, OpReadReduceSend, OpMultiLoadReduceStore:
		return true
	}
	return false
}

// signals reports whether the op increments its channels' peer semaphores.
func (c OpCode) signals() bool {
	return c == OpSignal || c == OpRelaxedSignal || c == OpPutWithSignal || c == OpPutWithSignalAndFlush
}

// waits reports whether the op waits on its channels' semaphores.
func (c OpCode) waits() bool { return c == OpWait || c == OpRelaxedWait }

// Op is one operation of a lane. Which fields an op uses depends on Code; Parse
// has checked that those are present and in range and the others empty or unused.
type Op struct {
	Code OpCode

	// Channel is "channel_type": which lane lists ChannelIDs and remote Src/Dst refs
	// index.
	Channel ChannelType
	// ChannelIDs ("channel_ids") are indices into the lane's channel list of type
	// Channel. Signal, wait and flush act on each; port puts use ChannelIDs[i] for
	// Dst[i].
	ChannelIDs []int

	Src, Dst []BufferRef // "src_buff", "dst_buff"

	// Group ("tbg_info") splits every ref of the op across a thread-block group:
	// this lane handles slice Group.ID of Group.Size. No tbg_info is {0, 1}.
	Group TBGroup

	BarrierID    int // "barrier_id" (barrier): 0..MaxBarriers-1
	BarrierCount int // "num_threadblocks" (barrier): lanes that meet there

	SemaphoreIDs []int // "semaphore_ids" (sem_acquire, sem_release): rank-level ids

	Iter IterContext // "iter_context" (pipeline)
	Ops  []Op        // "ops" (pipeline): the inner ops, never pipelines themselves

	// Reduce is "reduce_op". 0.9 ignores it and always sums; the DSL writes "sum"
	// unless asked otherwise.
	Reduce ReduceOp
}

// TBGroup is an op's thread-block group: lane slice ID of Size.
type TBGroup struct {
	ID, Size int
}

// IterContext is a pipeline's iteration: UnitBytes per window, over refs of Chunks
// chunks.
type IterContext struct {
	UnitBytes uint64 // "unit_size", 1..MaxUnitBytes
	Chunks    int    // "num_chunks", 1..MaxChunks
}

// ReduceOp is a reduction's element-wise operator.
type ReduceOp uint8

const (
	ReduceSum ReduceOp = iota // "sum", and the default
	ReduceMin                 // "min"
	ReduceMax                 // "max"
)

// String returns the plan's spelling.
func (r ReduceOp) String() string {
	switch r {
	case ReduceSum:
		return "sum"
	case ReduceMin:
		return "min"
	case ReduceMax:
		return "max"
	}
	return "?"
}

// RefKind is how a BufferRef names its buffer.
type RefKind uint8

const (
	RefLocal  RefKind = iota + 1 // {"type": ...}: one of the rank's own buffers
	RefRemote                    // {"buffer_id": ...}: a peer buffer, through the lane's list
	RefSwitch                    // {"switch_channel_id": ...}: an NVLS multicast address
)

// BufferRef is one element of an op's src_buff or dst_buff: chunks [Index,
// Index+Size) of a buffer. Chunks become bytes at run time (Layout.Span).
type BufferRef struct {
	Kind RefKind
	// ID is the lane-local "buffer_id" (RefRemote: an index into the lane's
	// remote-buffer list of the op's channel type) or "switch_channel_id"
	// (RefSwitch: an index into the lane's switch list); -1 for RefLocal.
	ID          int
	Index, Size int // "index", "size", in chunks; Size >= 1

	// Resolved by Parse.

	// Buffer is the buffer type: "type" for a local ref, the remote buffer's type,
	// or the switch channel's buffer_type.
	Buffer BufferType
	// Rank owns the buffer: the op's own rank for local and switch refs.
	Rank int
	// RemoteBuffer is the rank-level remote-buffer id of a RefRemote, else -1.
	RemoteBuffer int
	// SwitchChannel is the rank-level switch channel of a RefSwitch, else -1.
	SwitchChannel int
	// Packet reports that the op treats this ref as a packet region: LL packets at
	// twice its byte offset and length (Layout.PacketSpan), always in scratch.
	Packet bool
}
