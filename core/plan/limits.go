package plan

// Limits on what a plan may contain. Plans are untrusted input: every count and id
// the executor will index with is bounded here, so a valid plan never makes it
// allocate or loop without bound. Where MSCCL++ 0.9 has a limit of its own the same
// number is used (its name in execution_common.hpp is given); MSCCL++ checks only
// MaxOpsPerLane and corrupts memory past the others, so rejecting them loses no plan
// that 0.9 runs correctly. The rest are ours, chosen well above what the MSCCL++ DSL
// emits (the largest 0.9 fixture has 16 ranks, 29 thread blocks, 64 chunks).
const (
	// MaxPlanBytes bounds the JSON text Load reads and Parse accepts.
	MaxPlanBytes = 64 << 20
	// MaxDepth bounds JSON nesting, including inside fields this package ignores.
	MaxDepth = 64

	// MaxRanks bounds len(gpus).
	MaxRanks = 1024
	// MaxLanes bounds the thread blocks of one rank (the kernel's grid size).
	MaxLanes = 1024
	// MaxOpsPerLane bounds a lane's operations, each pipeline's inner operations
	// counted as well (MAX_OPERATION, the one limit 0.9 checks).
	MaxOpsPerLane = 64
	// MaxChunks bounds input_chunks, output_chunks, scratch_chunks, and so every
	// chunk index and size.
	MaxChunks = 1 << 20
	// MaxRankChannels bounds a rank's memory channels, and separately its port
	// channels (the sum of the connected_to lists of that type).
	MaxRankChannels = 4096
	// MaxSwitchChannels bounds a rank's switch channels (NVLS groups).
	MaxSwitchChannels = 64
	// MaxRemoteBuffers bounds a rank's remote_buffers.
	MaxRemoteBuffers = 4096
	// MaxSemaphores bounds a rank's semaphores.
	MaxSemaphores = 4096
	// MaxLaneChannels bounds a lane's channel list of one type (MAX_CHANNEL).
	MaxLaneChannels = 16
	// MaxLaneBuffers bounds a lane's remote-buffer list of one access type
	// (the RemoteBuffers arrays, MAX_CHANNEL entries each).
	MaxLaneBuffers = 16
	// MaxOpChannels bounds an op's channel_ids (MAX_CHANNEL_PER_OPERATION).
	MaxOpChannels = 8
	// MaxOpRefs bounds an op's src_buff and dst_buff lists, each
	// (MAX_LOCAL_BUFFER_PER_OPERATION + MAX_CHANNEL_PER_OPERATION).
	MaxOpRefs = 10
	// MaxBarriers bounds barrier_id: ids are 0..MaxBarriers-1 (MAX_DEVICE_SYNCERS).
	MaxBarriers = 16
	// MaxOpSemaphores bounds an op's semaphore_ids (MAX_DEVICE_SEMAPHORES).
	MaxOpSemaphores = 16
	// MaxThreadsPerBlock bounds num_threads_per_block (CUDA's block limit).
	MaxThreadsPerBlock = 1024
	// MaxBufferAlignment bounds buffer_alignment, in bytes.
	MaxBufferAlignment = 1 << 20
	// MaxUnitBytes bounds a pipeline's unit_size (0.9 stores it in a uint32).
	MaxUnitBytes = 1<<32 - 1
	// MaxPipelineIterations bounds how often a pipeline runs its inner operations
	// at a given message size. 0.9's kernel counts iterations in a uint16 and wraps
	// past this; Layout rejects the sizes that would need more.
	MaxPipelineIterations = 1<<16 - 1
)

// Sizes the 0.9 executor builds in.
const (
	// DefaultScratchBytes is the executor-wide scratch buffer that plans with
	// reuse_resources share (Executor::Impl::defaultScratchBufferSize).
	DefaultScratchBytes = 1 << 27
	// PredefinedScratchBytes is the scratch size 0.9 assumes for a reuse_resources
	// plan when it sizes chunk slots (PREDFINED_SCRATCH_SIZE).
	PredefinedScratchBytes = 1 << 26
)
