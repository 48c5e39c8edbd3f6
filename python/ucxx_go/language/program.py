"""CollectiveProgram: the container a DSL program records into, and JSON()."""

from __future__ import annotations

import json

from ._ir import Op, caller_where
from .types import ReplicationPolicy
from .utils import AlgoSpec

_current = None


def set_program(program):
    global _current
    _current = program


def get_program():
    if _current is None:
        raise RuntimeError("no program: use `with CollectiveProgram(...):` around the DSL calls")
    return _current


class CollectiveProgram:
    """A collective algorithm being written: a `with` block around the DSL calls.

    The parameters are MSCCL++ 0.9's (they become the plan's top-level fields);
    ours are:

    check : bool
        Check the plan when it is emitted (JSON(), to_json(), compile()): every
        output chunk holds what the collective defines, no data race, no deadlock
        (ucxx_go.language.checker). Default True.
    max_lanes : int
        How many lanes (thread blocks) per rank the compiler may open for ops
        without ``tb`` (default 8); pinned ops keep theirs.
    prune_syncs : bool or "auto"
        Drop the semaphores the compiler added where the checker proves the order
        already holds (through another rank, or a lane's own signal). "auto": when
        every op is pinned (MSCCL++-style programs that synchronise their lanes
        themselves). Needs check.
    auto_sync : bool
        Insert the ``nop`` a lane needs between its own dependent ops (as MSCCL++
        does). Synchronisation between lanes is always inserted where the chunks'
        byte ranges need it.
    """

    def __init__(self, name, collective, num_ranks, instances=1, protocol="Simple", instr_fusion=True,
                 auto_sync=True, replication_policy=ReplicationPolicy.interleaved, reuse_resources=False,
                 num_threads_per_block=1024, use_double_scratch_buffer=False, buffer_alignment=16,
                 min_message_size=0, max_message_size=2**64 - 1, *, check=True, max_lanes=8, prune_syncs="auto"):
        if protocol not in ("Simple", "LL"):
            raise ValueError(f"protocol {protocol!r}: want Simple or LL")
        if num_ranks != collective.num_ranks:
            raise ValueError(f"{num_ranks} ranks for a collective of {collective.num_ranks}")
        if instances < 1:
            raise ValueError(f"instances {instances}")
        self.name = name
        self.collective = collective
        self.num_ranks = num_ranks
        self.instances = instances
        self.protocol = protocol
        self.instr_fusion = instr_fusion
        self.auto_sync = auto_sync
        self.replication_policy = replication_policy
        self.reuse_resources = reuse_resources
        self.num_threads_per_block = num_threads_per_block
        self.use_double_scratch_buffer = use_double_scratch_buffer
        self.buffer_alignment = buffer_alignment
        self.min_message_size = min_message_size
        self.max_message_size = max_message_size
        self.check = check
        self.max_lanes = max_lanes
        self.prune_syncs = prune_syncs
        self.buffers = collective.init_buffers()
        self.scratch_chunks = [0] * num_ranks
        self.ops = []
        self.channels = []  # memory and port channels, in creation order
        self.switch_channels = []
        self.semaphores = [[] for _ in range(num_ranks)]
        self.loop_context = None
        self._loops = 0

    @classmethod
    def from_spec(cls, spec: AlgoSpec, **kw):
        return cls(spec.name, spec.collective, spec.world_size, instances=spec.instances, protocol=spec.protocol,
                   instr_fusion=spec.instr_fusion, auto_sync=spec.auto_sync,
                   replication_policy=spec.replication_policy, reuse_resources=spec.reuse_resources,
                   num_threads_per_block=spec.num_threads_per_block,
                   use_double_scratch_buffer=spec.use_double_scratch_buffer,
                   buffer_alignment=spec.buffer_alignment, min_message_size=spec.min_message_size,
                   max_message_size=spec.max_message_size, **kw)

    def __enter__(self):
        set_program(self)
        return self

    def __exit__(self, *exc):
        set_program(None)

    # -- recording ----------------------------------------------------------------------

    def _check_rank(self, rank, what="rank"):
        if not isinstance(rank, int) or not 0 <= rank < self.num_ranks:
            raise ValueError(f"{what} {rank!r} out of range: the program has {self.num_ranks} ranks")

    def add_op(self, op: Op):
        self._check_rank(op.rank)
        if op.tb is not None and (not isinstance(op.tb, int) or op.tb < 0):
            raise ValueError(f"tb {op.tb!r}: thread blocks are numbered 0, 1, ...")
        if op.where == "?":
            op.where = caller_where()
        op.seq = len(self.ops)
        op.loop = self.loop_context
        self.ops.append(op)
        return op

    def add_channel(self, ch):
        ch.channel_id = sum(1 for c in self.channels
                            if c.src_rank == ch.src_rank and c.channel_type == ch.channel_type)
        self.channels.append(ch)

    def add_semaphore(self, sem):
        sem.id = len(self.semaphores[sem.rank])
        self.semaphores[sem.rank].append(sem)

    def alloc_scratch(self, rank, size):
        self._check_rank(rank)
        off = self.scratch_chunks[rank]
        self.scratch_chunks[rank] += size
        return off

    def buffer(self, rank, btype):
        return self.buffers[rank][btype]

    def set_loop_context(self, ctx):
        if self.loop_context is not None and ctx is not None:
            raise RuntimeError("nested pipelines are not supported")
        self.loop_context = ctx

    # -- output ---------------------------------------------------------------------------

    def compile(self):
        """Return (plan, provenance): the plan as a dict and, for every op of it, where
        in the DSL program it came from. Raises PlanCheckError (checker) when check is on."""
        from ._compile import compile_program

        return compile_program(self)

    def to_json(self, indent=2, **kwargs):
        plan, _ = self.compile()
        return json.dumps(plan, indent=indent, **kwargs)

    def post_process_operations(self):  # MSCCL++'s name; compile() does it all
        return None


def JSON():
    """The current program's plan as JSON text (checked first, when its check is on)."""
    return get_program().to_json()


# MSCCL++'s program.py re-exports these into `from mscclpp.language.program import *`.
from .channel import *  # noqa: E402,F401,F403
from .collectives import *  # noqa: E402,F401,F403
from .rank import Semaphore  # noqa: E402,F401
from .types import BufferType as BufferType  # noqa: E402,F401,F811
