"""Python transcription of MSCCL++ v0.9.0 (tag v0.9.0, commit ed565ceb) chunk/byte arithmetic.

Source: src/core/executor/execution_plan.cc (ExecutionPlan::Impl::{checkMessageSize, getSizeAndChunks,
calcOffset, calcSize, getOffset, getBufferSize, getUpperBoundChunkSize, calScratchBufferSize,
calMaxScratchChunkSize}) and src/core/include/execution_common.hpp (PREDFINED_SCRATCH_SIZE).
uint32_t truncation is modelled with `& M32` where the C++ code stores into uint32_t.
Run:  python3 mscclpp_chunk_math.py
"""

M32 = 0xFFFFFFFF
PREDFINED_SCRATCH_SIZE = 1 << 26  # 64 MiB


class ExecutorError(Exception):
    pass


class Plan:
    def __init__(self, input_chunks, output_chunks, scratch_chunks, buffer_alignment=16, collective="allreduce",
                 protocol="Simple", use_double_scratch_buffer=False, reuse_resources=False,
                 min_message_size=0, max_message_size=2**64 - 1, fixed_calc_offset=False):
        self.inputChunks = input_chunks
        self.outputChunks = output_chunks
        self.scratchChunks = scratch_chunks
        self.bufferAlignment = buffer_alignment
        self.collective = collective
        self.isUsingPacket = protocol == "LL"
        self.doubleScratchBuffer = use_double_scratch_buffer
        self.reuseResources = reuse_resources
        self.minMessageSize = min_message_size
        self.maxMessageSize = max_message_size
        self.fixed = fixed_calc_offset  # True = behaviour after commit 8c3730b4 (v0.10.0)

    # execution_plan.cc: checkMessageSize
    def checkMessageSize(self, inputSize, outputSize):
        a = self.bufferAlignment
        if (inputSize % a != 0 or outputSize % a != 0 or (inputSize // a) % self.inputChunks != 0
                or (outputSize // a) % self.outputChunks != 0):
            # NB: C++ does `% inputChunks` -> division by zero (UB) when input_chunks == 0
            raise ExecutorError("Input or output size is not aligned with buffer alignment or chunks")
        size = outputSize if self.collective == "allgather" else inputSize
        if size < self.minMessageSize or size > self.maxMessageSize:
            raise ExecutorError("Input or output size is not within the valid range")

    # execution_plan.cc: getSizeAndChunks
    def getSizeAndChunks(self, inputSize, outputSize):
        if self.inputChunks == 0 and self.outputChunks == 0:
            raise ExecutorError("Output or Input chunks must be greater than 0")
        if self.inputChunks != 0 and self.outputChunks != 0:
            if inputSize // self.inputChunks != outputSize // self.outputChunks:
                raise ExecutorError("Size per chunks inconsistent")
            return inputSize, self.inputChunks
        if self.inputChunks != 0:
            return inputSize, self.inputChunks
        return outputSize, self.outputChunks

    # execution_plan.cc: calcOffset
    def calcOffset(self, size, index, slices):
        nelems = (size // self.bufferAlignment) & M32
        minNelems = nelems // slices
        remainder = nelems % slices
        if self.fixed:
            off = index * minNelems + min(index, remainder)
        else:
            if nelems == 0:
                raise ZeroDivisionError("v0.9.0 calcOffset: index % nelems with nelems == 0 (UB in C++)")
            off = (index * minNelems + (index % nelems if index % nelems < remainder else remainder)) & M32
        return off * self.bufferAlignment

    # execution_plan.cc: calcSize  (uint32 subtraction)
    def calcSize(self, size, index, slices):
        b = self.calcOffset(size, index, slices) & M32
        e = self.calcOffset(size, index + 1, slices) & M32
        return (e - b) & M32

    # execution_plan.cc: calMaxScratchChunkSize
    def calMaxScratchChunkSize(self, scratchSize):
        if self.scratchChunks == 0:
            return 0
        if self.doubleScratchBuffer:
            scratchSize //= 2
        size = -(-scratchSize // self.scratchChunks)
        a = self.bufferAlignment
        return -(-size // a) * a

    # execution_plan.cc: getOffset  (bufferType: 'i','o','s' or None)
    def getOffset(self, inputSize, outputSize, chunkIndex, bufferType=None):
        S, n = self.getSizeAndChunks(inputSize, outputSize)
        chunkSize = (-(-S // n)) & M32
        scratchChunkSize = self.calMaxScratchChunkSize(PREDFINED_SCRATCH_SIZE) & M32
        if bufferType == "s" and self.reuseResources and scratchChunkSize < chunkSize:
            return chunkIndex * scratchChunkSize
        return self.calcOffset(S, chunkIndex, n)

    # execution_plan.cc: getBufferSize  (always called with bufferType NONE)
    def getBufferSize(self, inputSize, outputSize, index, nChunks):
        b = self.getOffset(inputSize, outputSize, index) & M32
        e = self.getOffset(inputSize, outputSize, index + nChunks) & M32
        return (e - b) & M32

    # execution_plan.cc: getUpperBoundChunkSize
    def getUpperBoundChunkSize(self, inputSize, outputSize):
        a = self.bufferAlignment
        if self.inputChunks:
            return -(-(inputSize // a) // self.inputChunks) * a
        if self.outputChunks:
            return -(-(outputSize // a) // self.outputChunks) * a
        raise ExecutorError("Output or Input chunks must be greater than 0")

    # execution_plan.cc: calScratchBufferSize (called by executor.cc setupScratchBuffer with
    # min(sendMemRange, max_message_size), min(recvMemRange, max_message_size))
    def calScratchBufferSize(self, inputSize, outputSize):
        if self.reuseResources and self.scratchChunks > 0:
            return PREDFINED_SCRATCH_SIZE
        if self.inputChunks:
            per = -(-inputSize // self.inputChunks)
        elif self.outputChunks:
            per = -(-outputSize // self.outputChunks)
        else:
            raise ExecutorError("Output or Input chunks must be greater than 0")
        size = per * self.scratchChunks * (2 if self.isUsingPacket else 1)
        if self.doubleScratchBuffer:
            size *= 2
        a = self.bufferAlignment
        return -(-size // a) * a

    # execution_plan.cc: setupOperation, for one buffer reference (local: constOffset = 0)
    def bufferRef(self, inputSize, outputSize, btype, index, size, tb_id=0, tbg_size=1, const_offset=0):
        off = self.getOffset(inputSize, outputSize, index, btype) + const_offset
        sz = self.getBufferSize(inputSize, outputSize, index, size)
        off += self.calcOffset(sz, tb_id, tbg_size)
        sz = self.calcSize(sz, tb_id, tbg_size)
        return off, sz

    # execution_plan.cc: setupOperation, "iter_context"
    def pipelineIterations(self, inputSize, outputSize, unit_size, num_chunks):
        sizes = num_chunks * self.getUpperBoundChunkSize(inputSize, outputSize)
        return (-(-sizes // unit_size)) & M32  # stored uint32; the kernel reads it into a uint16_t!


if __name__ == "__main__":
    print("== 1000 bytes, 3 input chunks, alignment 16 ==")
    p = Plan(3, 3, 0)
    try:
        p.checkMessageSize(1000, 1000)
    except ExecutorError as e:
        print("checkMessageSize(1000,1000):", e)
    print("raw calcOffset(1000, k, 3):", [p.calcOffset(1000, k, 3) for k in range(4)],
          "sizes", [p.calcSize(1000, k, 3) for k in range(3)])

    print("== 960 bytes, 3 input chunks (allreduce), alignment 16 ==")
    p.checkMessageSize(960, 960)
    for k in range(4):
        print(" chunk", k, "offset", p.getOffset(960, 960, k))
    print(" ref {i,index 1,size 2} ->", p.bufferRef(960, 960, "i", 1, 2))
    print(" ref {s,index 4,size 1} ->", p.bufferRef(960, 960, "s", 4, 1))
    print(" tbg split of chunk 0 (320 B) over 3 TBs:",
          [p.bufferRef(960, 960, "i", 0, 1, t, 3) for t in range(3)])

    print("== 64 bytes, 2 chunks -> 32-byte chunks (2 units) split over tbg_size 4 ==")
    q = Plan(2, 2, 0)
    print(" v0.9.0:", [(q.calcOffset(32, t, 4), q.calcSize(32, t, 4)) for t in range(4)])
    q.fixed = True
    print(" fixed :", [(q.calcOffset(32, t, 4), q.calcSize(32, t, 4)) for t in range(4)])

    print("== scratch size: LL, 4 input chunks, 4 scratch chunks, double buffer, 1 MiB mem range ==")
    r = Plan(4, 4, 4, protocol="LL", use_double_scratch_buffer=True)
    s = r.calScratchBufferSize(1 << 20, 1 << 20)
    print(" scratch bytes", s, "half (double-buffer offset)", s // 2, "maxScratchChunk", r.calMaxScratchChunkSize(s))

    print("== allgather 2 ranks, in=1 chunk, out=2 chunks, per-rank send 4096 B ==")
    g = Plan(1, 2, 0, collective="allgather")
    g.checkMessageSize(4096, 8192)
    print(" out chunk 1 offset", g.getOffset(4096, 8192, 1), "size", g.getBufferSize(4096, 8192, 1, 1))

    print("== pipeline: 3 input chunks of 960 B, num_chunks 1, unit_size 128 ==")
    print(" nIterations", p.pipelineIterations(960, 960, 128, 1))
