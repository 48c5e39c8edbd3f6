package plan

// Plan is a validated MSCCL++ execution plan: what every rank runs. Parse and Load
// make it; nothing in it is out of range, so an executor may index with its ids
// directly. Treat it as read-only: Layout and the executor share it.
type Plan struct {
	Name       string // "name": identifies the plan (0.9 keys its context cache by it)
	Collective string // "collective": "allreduce", "allgather", "test"...; any string
	Protocol   string // "protocol": "LL" means LL packets (UsesPackets), anything else Simple
	InPlace    bool   // "inplace": the call's buffers alias (CheckBuffers, InPlaceConvention)

	ReuseResources  bool   // "reuse_resources": scratch is the shared DefaultScratchBytes buffer
	ThreadsPerBlock int    // "num_threads_per_block", 1..MaxThreadsPerBlock (default 1024)
	DoubleScratch   bool   // "use_double_scratch_buffer": alternate launches use alternate scratch halves
	BufferAlignment uint64 // "buffer_alignment", bytes (default 16): the unit chunks are measured in
	MinMessageBytes uint64 // "min_message_size", inclusive (default 0)
	MaxMessageBytes uint64 // "max_message_size", inclusive (default 2^64-1)

	// VariableBlocks is our extension "ucxxgo_variable_blocks" (MSCCL++ ignores the
	// key): chunk j of every rank's input and output is block j, whose offset and
	// size each call gives (alltoallv's counts and displacements); see
	// variable.go for what such plans may contain.
	VariableBlocks bool

	Ranks []Rank // "gpus": Ranks[r].ID == r
}

// UsesPackets reports whether the plan runs in LL-packet mode: its scratch buffer is
// doubled to hold packets, and only such plans may contain packet ops.
func (p *Plan) UsesPackets() bool { return p.Protocol == "LL" }

// ConnectedPeers returns the ranks rank needs a connection to, in increasing order:
// the peers of its memory and port channels and the ranks whose channels name it
// (0.9's getConnectedPeers). Validation makes the two sets equal.
func (p *Plan) ConnectedPeers(rank int) []int {
	seen := make([]bool, len(p.Ranks))
	r := &p.Ranks[rank]
	for _, list := range [][]Channel{r.MemoryChannels, r.PortChannels} {
		for _, c := range list {
			seen[c.Peer] = true
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

// Rank is one GPU's part of a plan ("gpus[r]").
type Rank struct {
	ID int // "id"; equals the rank's position in Plan.Ranks

	// Chunk counts of the input (send), output (receive) and scratch buffers.
	// Input and output counts are at least 1 (0.9 divides by them); scratch may be 0.
	InputChunks, OutputChunks, ScratchChunks int

	// Rank-level channels by type, in 0.9's numbering: all "connected_to" entries
	// of that type, concatenated in list order. A lane's channel ids index these.
	MemoryChannels []Channel
	PortChannels   []Channel
	// SwitchChannels holds one entry per rank group of each "switch" channel, in order.
	SwitchChannels []SwitchChannel

	RemoteBuffers []RemoteBuffer // "remote_buffers"; a position is a remote-buffer id
	Semaphores    []Semaphore    // "semaphores"; a position is a semaphore id
	Lanes         []Lane         // "threadblocks"; Lanes[t].ID == t
}

// Chunks returns the chunk count of one of the rank's buffers.
func (r *Rank) Chunks(b BufferType) int {
	switch b {
	case BufferInput:
		return r.InputChunks
	case BufferOutput:
		return r.OutputChunks
	case BufferScratch:
		return r.ScratchChunks
	}
	return 0
}

// Channels returns the rank's memory or port channels (nil for other types).
func (r *Rank) Channels(t ChannelType) []Channel {
	switch t {
	case ChannelMemory:
		return r.MemoryChannels
	case ChannelPort:
		return r.PortChannels
	}
	return nil
}

// Channel is a memory or port channel from its rank to Peer: a semaphore pair, and
// for port channels the proxy path data goes through. MSCCL++ pairs channels by
// order: the k-th channel of a type from A to B with the k-th from B to A.
type Channel struct {
	Peer    int // the rank at the other end, never the channel's own rank
	Ordinal int // k: how many channels of this type to Peer come before this one
	Reverse int // index, in Ranks[Peer]'s list of the same type, of the paired channel
}

// SwitchChannel is an NVLS multicast group bound to one local buffer.
type SwitchChannel struct {
	Buffer BufferType // "buffer_type": the local buffer bound to the multicast object
	Ranks  []int      // "rank_groups[g].ranks": the group, including this rank, no repeats
	Size   int        // "rank_groups[g].size": read by 0.9 but unused
}

// RemoteBuffer is a peer buffer a rank accesses ("remote_buffers[b]").
type RemoteBuffer struct {
	Rank   int        // the owner, never the accessing rank
	Buffer BufferType // which of the owner's buffers
	Memory bool       // accessed through memory channels (direct loads and stores)
	Port   bool       // accessed through port channels (proxy transfers)
	// MemoryIndex and PortIndex are 0.9's per-access-type running counts: the
	// position of this buffer among the rank's remote buffers with that access
	// type (the order peers' registered memories are received in); -1 without it.
	MemoryIndex, PortIndex int
}

// Semaphore is a rank-local counting semaphore ("semaphores[s]"). It starts at
// InitValue when an execution context is made and is not reset between executions.
type Semaphore struct {
	InitValue int
}

// Lane is one thread block ("threadblocks[t]"): a sequence of ops run in order,
// concurrently with the rank's other lanes.
type Lane struct {
	ID int // "id"; equals the lane's position in Rank.Lanes

	// The lane's channel lists ("channels"): rank-level channel indices, in order.
	// An op's ChannelIDs index the list of the op's channel type.
	MemoryChannels, PortChannels, SwitchChannels []int
	// The lane's remote-buffer lists ("remote_buffer_refs"): rank-level
	// remote-buffer ids per access type. A remote BufferRef's ID indexes the list
	// of its op's channel type.
	MemoryBuffers, PortBuffers []int

	Ops []Op // "ops", in program order
}

// ChannelList returns the lane's channel list of a type.
func (l *Lane) ChannelList(t ChannelType) []int {
	switch t {
	case ChannelMemory:
		return l.MemoryChannels
	case ChannelPort:
		return l.PortChannels
	case ChannelSwitch:
		return l.SwitchChannels
	}
	return nil
}

// BufferList returns the lane's remote-buffer list of an access type.
func (l *Lane) BufferList(t ChannelType) []int {
	switch t {
	case ChannelMemory:
		return l.MemoryBuffers
	case ChannelPort:
		return l.PortBuffers
	}
	return nil
}

// BufferType names one of a rank's three buffers.
type BufferType uint8

const (
	BufferInput   BufferType = iota + 1 // "i": the send buffer
	BufferOutput                        // "o": the receive buffer
	BufferScratch                       // "s": the executor's scratch buffer
)

// String returns the plan's spelling: "i", "o" or "s".
func (b BufferType) String() string {
	switch b {
	case BufferInput:
		return "i"
	case BufferOutput:
		return "o"
	case BufferScratch:
		return "s"
	}
	return "?"
}

func parseBufferType(s string) (BufferType, bool) {
	switch s {
	case "i":
		return BufferInput, true
	case "o":
		return BufferOutput, true
	case "s":
		return BufferScratch, true
	}
	return 0, false
}

// chunkField names the Rank field that counts a buffer's chunks, for messages.
func (b BufferType) chunkField() string {
	switch b {
	case BufferInput:
		return "input_chunks"
	case BufferOutput:
		return "output_chunks"
	}
	return "scratch_chunks"
}

// ChannelType is an op's or a channel's kind.
type ChannelType uint8

const (
	ChannelNone   ChannelType = iota // "none", or no channel_type
	ChannelMemory                    // "memory": direct loads and stores, semaphores in peer memory
	ChannelPort                      // "port": transfers and signals through a proxy
	ChannelSwitch                    // "switch": NVLS multicast
)

// String returns the plan's spelling.
func (t ChannelType) String() string {
	switch t {
	case ChannelNone:
		return "none"
	case ChannelMemory:
		return "memory"
	case ChannelPort:
		return "port"
	case ChannelSwitch:
		return "switch"
	}
	return "?"
}

func parseChannelType(s string) (ChannelType, bool) {
	switch s {
	case "none":
		return ChannelNone, true
	case "memory":
		return ChannelMemory, true
	case "port":
		return ChannelPort, true
	case "switch":
		return ChannelSwitch, true
	}
	return 0, false
}
