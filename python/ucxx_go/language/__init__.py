"""ucxx_go.language: write collective algorithms in Python, get MSCCL++ 0.9 execution plans.

The names of MSCCL++ 0.9's DSL (CollectiveProgram, MemoryChannel, PortChannel,
Semaphore, Buffer, Rank, AllReduce..., LoopIterationContext, JSON) and of the
design seed (Channel(dst, src, channel_type=Channel.memory), rank.Buffer(n),
relaxedSignal, Rank.Semaphore, Loop.iteration). ``tb=`` is optional: the compiler
places what is not pinned and inserts the synchronisation between lanes that the
chunks' byte ranges need. JSON() checks the plan before it returns it: every output
chunk holds what the collective defines, no data race, no deadlock (checker.py).
See docs/dsl.md.
"""

from .channel import Channel, MemoryChannel, PortChannel, SwitchChannel
from .checker import PlanCheckError, check_plan
from .collectives import (AllGather, AllReduce, AllToAll, AllToAllV, Broadcast, Collective, Reduce, ReduceScatter,
                          TestCollective)
from .fusion import no_fusion
from .loop import Loop, LoopIterationContext
from .program import JSON, CollectiveProgram, get_program
from .rank import BaseBuffer, Buffer, Rank, Semaphore
from .thread_block_group import ThreadBlockGroup
from .types import BufferType, ChannelType, Chunk, ReduceOperationType, ReplicationPolicy, SyncType
from .utils import AlgoSpec

__all__ = [
    "AlgoSpec", "AllGather", "AllReduce", "AllToAll", "AllToAllV", "BaseBuffer", "Broadcast", "Buffer", "BufferType",
    "Channel", "ChannelType", "Chunk", "Collective", "CollectiveProgram", "JSON", "Loop", "LoopIterationContext",
    "MemoryChannel", "PlanCheckError", "PortChannel", "Rank", "Reduce", "ReduceOperationType", "ReduceScatter",
    "ReplicationPolicy", "Semaphore", "SwitchChannel", "SyncType", "TestCollective", "ThreadBlockGroup",
    "check_plan", "get_program", "no_fusion",
]
