"""CollectiveProgram: the container a DSL program records into, and JSON()."""

from __future__ import annotations

import json

from ._ir import Op, caller_where, dsl_call
from .types import BufferType, Chunk, ReplicationPolicy
from .utils import AlgoSpec

_current = None

MAX_LANES = 1024  # thread blocks per rank the executor accepts (core/plan MaxLanes)
MAX_THREADS_PER_BLOCK = 1024
MAX_LANE_LIST = 16  # channels of a type, remote buffers of an access type, per lane (0.9's MAX_CHANNEL)
MAX_BARRIERS = 16  # barrier ids per rank (0.9's MAX_DEVICE_SYNCERS)
MAX_OPS = 64  # per lane, pipelines' inner ops counted (0.9's MAX_OPERATION)


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

    A DSL call that is given something the program cannot have (a rank, buffer or
    chunk out of range, chunks of different sizes, a channel used in the wrong
    direction, an op the executor cannot run) raises ValueError naming the problem
    and the line of the program that made the call. The program then emits nothing:
    compile(), to_json() and JSON() raise ValueError naming that first failure.
    """

    @dsl_call(records=False)
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
        if not 1 <= num_threads_per_block <= MAX_THREADS_PER_BLOCK:
            raise ValueError(f"num_threads_per_block {num_threads_per_block}: the executor runs 1 to "
                             f"{MAX_THREADS_PER_BLOCK} threads per block")
        if buffer_alignment < 1:
            raise ValueError(f"buffer_alignment {buffer_alignment}: want at least 1 byte")
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
        self.switch_range_checks = []  # (where, rank, end, start): a peer's scratch range a switch op reaches
        self.semaphores = [[] for _ in range(num_ranks)]
        self.loop_context = None
        self._loops = 0
        self._error = None  # the message of the first DSL call that failed: nothing is emitted
        self._switch_pending = {}  # (rank, tb) -> a switch reduce that its broadcast must follow
        self._pinned_lists = {}  # (rank, tb, what, type) -> the channels or remote buffers a pinned lane uses

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

    def _fail(self, message):
        if self._error is None:
            self._error = message

    def _check_tb(self, tb):
        if not isinstance(tb, int) or isinstance(tb, bool) or not 0 <= tb < MAX_LANES:
            raise ValueError(f"tb {tb!r} out of range: thread blocks are numbered 0 to {MAX_LANES - 1}")

    def chunk_count(self, rank, btype):
        """How many chunks rank's buffer of type btype has (scratch: allocated so far)."""
        if btype == BufferType.scratch:
            return self.scratch_chunks[rank]
        return len(self.buffers[rank][btype])

    def check_chunk(self, c, what="chunk"):
        """A Chunk of this program: its rank, buffer and range exist."""
        if not isinstance(c, Chunk):
            raise TypeError(f"{what} {c!r} is not a chunk (slice a buffer: buf[a:b])")
        self._check_rank(c.rank, f"{what} {c!r}: rank")
        if not isinstance(c.buffer, BufferType):
            raise ValueError(f"{what} {c!r}: buffer {c.buffer!r} is none of input, output, scratch")
        if not isinstance(c.index, int) or not isinstance(c.size, int) or c.index < 0 or c.size < 1:
            raise ValueError(f"{what} {c!r}: index {c.index!r} and size {c.size!r} must be integers, "
                             "index at least 0 and size at least 1")
        have = self.chunk_count(c.rank, c.buffer)
        if c.index + c.size > have:
            raise ValueError(f"{what} {c!r} out of range: rank {c.rank}'s {c.buffer.name} buffer has {have} "
                             f"chunk{'s' if have != 1 else ''}")

    def add_op(self, op: Op):
        self._check_rank(op.rank)
        if op.tb is not None:
            self._check_tb(op.tb)
        for t in op.tb_list or ():
            self._check_tb(t)
        for c in op.src + op.dst:
            self.check_chunk(c)
        packet = op.to_packet or op.from_packet
        if packet and self.protocol != "LL":
            name = {"copy": "unpack_packets" if op.from_packet else "copy_packets",
                    "reduce": "reduce(packet=True)"}.get(op.kind, op.describe())
            raise ValueError(f"{name} is an LL packet op, and the program's protocol is "
                             f"{self.protocol!r}: the executor runs packet ops only with protocol=\"LL\"")
        ctx = self.loop_context
        if ctx is not None and op.kind in ("copy", "reduce", "put", "get") and not packet:
            for c in op.src + op.dst:
                if c.size != ctx.num_chunks:
                    raise ValueError(f"{op.describe()} of {c!r} in a Loop.iteration over num_chunks="
                                     f"{ctx.num_chunks}: every data op of a pipeline must cover exactly "
                                     "num_chunks chunks (the executor runs it window by window over them)")
            self._check_windows(op, ctx)
        if self.switch_channels:
            self._check_switch_fusion(op)
        if op.tb is not None:
            self._check_pinned_lists(op)
        if op.kind == "barrier" and op.tb_list is not None:
            sets = self._pinned_lists.setdefault((op.rank, "barriers"), set())
            if tuple(op.tb_list) not in sets and (len(sets) + 1) * self.instances > MAX_BARRIERS:
                raise ValueError(f"rank {op.rank} would need {len(sets) + 1} barriers (one per set of lanes"
                                 + (f", times {self.instances} instances" if self.instances > 1 else "")
                                 + f"): the executor has {MAX_BARRIERS}")
            sets.add(tuple(op.tb_list))
        if op.where == "?":
            op.where = caller_where()
        if op.kind == "switch_reduce":
            self._switch_pending[(op.rank, op.tb)] = op
        op.seq = len(self.ops)
        op.loop = self.loop_context
        self.ops.append(op)
        return op

    def _check_windows(self, op, ctx):
        """A pipeline runs window 0 of all its ops, then window 1...: two ops of a rank in
        one pipeline that touch the same bytes at different offsets (one writing) would
        run out of program order."""
        def refs(o):
            return [(c, "r") for c in o.src] + [(c, "w") for c in o.dst]

        mine = refs(op)
        for o in reversed(self.ops):
            if o.loop is not ctx:
                break
            if o.rank != op.rank or o.kind not in ("copy", "reduce", "put", "get") or o.to_packet or o.from_packet:
                continue
            for c, k in mine:
                for d, j in refs(o):
                    if c.rank == d.rank and c.buffer == d.buffer and c.index != d.index and "w" in (k, j) \
                            and c.index < d.index + d.size and d.index < c.index + c.size:
                        raise ValueError(f"{op.describe()} of {c!r} and the {o.describe()} of {d!r} at {o.where}, in "
                                         "one Loop.iteration, touch the same bytes at different offsets: the pipeline "
                                         "runs them window by window, so a later window of one would come after an "
                                         "earlier window of the other, against program order")

    def _lists_of(self, op):
        """[(what, type, item)]: the channels and remote buffers op puts on its lane's lists."""
        out = []
        ch = op.channel
        if ch is not None and ch.channel_type.value in ("memory", "port"):
            ct = ch.channel_type.value
            if op.kind in ("signal", "wait", "flush", "get") or (op.kind == "put" and ct == "port"):
                out.append(("channels", ct, ch))
            for c in op.src + op.dst:
                if c.rank != op.rank:
                    out.append(("remote buffers", ct, (c.rank, c.buffer)))
        return out

    def _check_pinned_lists(self, op):
        for what, ct, item in self._lists_of(op):
            have = self._pinned_lists.get((op.rank, op.tb, what, ct), set())
            if item not in have and len(have) >= MAX_LANE_LIST:
                raise ValueError(f"lane {op.tb} of rank {op.rank} would use {len(have) + 1} {ct} {what}: the "
                                 f"executor takes at most {MAX_LANE_LIST} per lane (spread them over more lanes)")
        for what, ct, item in self._lists_of(op):
            self._pinned_lists.setdefault((op.rank, op.tb, what, ct), set()).add(item)

    def _check_switch_fusion(self, op):
        """The executor runs a switch reduce only fused with the broadcast of its result
        that comes next on its lane (glres), neither alone (glre, gstore)."""
        pend = self._switch_pending
        near = [k for k in pend if k[0] == op.rank and (k[1] is None or op.tb is None or k[1] == op.tb)]
        for k in near:
            prev = pend[k]
            fused = (op.kind == "switch_broadcast" and op.channel is prev.channel and op.tb == prev.tb
                     and op.switch_size == prev.switch_size and op.src == prev.dst and self.loop_context is prev.loop)
            if not fused:
                raise ValueError(f"the switch reduce at {prev.where} must be followed by the broadcast of its "
                                 f"result {prev.dst[0]!r} (same channel, size and tb): the executor runs a switch "
                                 "reduce only fused with that broadcast (glres)")
        if op.kind == "switch_broadcast" and not near:
            raise ValueError("a switch broadcast must come right after the switch reduce of its source: the "
                             "executor runs a switch broadcast only fused with that reduce (glres)")
        for k in near:
            del pend[k]

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
            raise ValueError("a Loop.iteration inside another: the executor does not run nested pipelines")
        self.loop_context = ctx

    def _check_complete(self):
        """What only the whole program shows: a channel without a pair, a switch reduce
        left unfused at the end. Raises ValueError naming the line that made it."""
        by = {}
        for ch in self.channels:
            by.setdefault((ch.channel_type, ch.src_rank, ch.dst_rank), []).append(ch)
        for (t, a, b), lst in by.items():
            back = by.get((t, b, a), [])
            if len(lst) > len(back):
                k = len(back)
                raise ValueError(f"{getattr(lst[k], 'where', '?')}: {t.value} channel {k} from rank {a} to rank {b} "
                                 f"has no {t.value} channel {k} from rank {b} to rank {a} to pair with (the k-th "
                                 "channel of a type from A to B pairs with the k-th from B to A): the executor "
                                 "refuses an unpaired channel")
        for where, r, end, start in self.switch_range_checks:
            have = self.scratch_chunks[r]
            if end > have:
                raise ValueError(f"{where}: chunks {start}:{end} of the switch channel's scratch buffers out of "
                                 f"range: rank {r}'s has {have} in the whole program")
        for o in self._switch_pending.values():
            raise ValueError(f"{o.where}: the switch reduce is not followed by the broadcast of its result: "
                             "the executor runs a switch reduce only fused with that broadcast (glres)")

    # -- output ---------------------------------------------------------------------------

    def compile(self):
        """Return (plan, provenance): the plan as a dict and, for every op of it, where
        in the DSL program it came from. Raises PlanCheckError (checker) when check is on."""
        from ._compile import compile_program

        if self._error is not None:
            raise ValueError(f"program {self.name!r} emits nothing: a DSL call failed: {self._error}")
        self._check_complete()
        plan, prov = compile_program(self)
        _check_limits(plan, prov)
        return plan, prov

    def to_json(self, indent=2, **kwargs):
        plan, _ = self.compile()
        return json.dumps(plan, indent=indent, **kwargs)

    def post_process_operations(self):  # MSCCL++'s name; compile() does it all
        return None


def _check_limits(plan, prov):
    """What the executor refuses that only the lanes the compiler chose show: more than
    64 ops or 16 channels of a type or remote buffers of an access type on a lane,
    barrier ids past 16. Raises ValueError naming the DSL lines of the op that goes
    past (with the checker on, it has refused lanes of more than 64 ops already)."""
    def ops(tb):
        for i, op in enumerate(tb["ops"]):
            yield (i,), op
            for j, inner in enumerate(op.get("ops", ())):
                yield (i, j), inner

    def where(r, t, pos):
        """'file:line' of the op's first DSL op, and what the op came from."""
        lines = prov.get((r, t) + pos) or ["?"]
        return lines[0].split(" ", 1)[0], "; ".join(lines)

    for g in plan["gpus"]:
        r = g["id"]
        for tb in g["threadblocks"]:
            t = tb["id"]
            count = 0
            for pos, op in ops(tb):
                count += 1
                if count > MAX_OPS:
                    loc, what = where(r, t, pos)
                    raise ValueError(f"{loc}: rank {r} lane {t} has more than {MAX_OPS} ops from its op {pos[0]} "
                                     f"({what}) on (pipelines' inner ops count): the executor runs at most {MAX_OPS} "
                                     "(spread the work over more lanes)")
            for ent in tb.get("channels", ()):
                if len(ent["channel_ids"]) > MAX_LANE_LIST:
                    ct = ent["channel_type"]
                    pos = next(p for p, op in ops(tb) if op.get("channel_type") == ct
                               and any(c >= MAX_LANE_LIST for c in op.get("channel_ids", ())))
                    loc, what = where(r, t, pos)
                    raise ValueError(f"{loc}: rank {r} lane {t} uses {len(ent['channel_ids'])} {ct} channels from its "
                                     f"op {pos[0]} ({what}) on: the executor takes at most {MAX_LANE_LIST} per lane "
                                     "(pin ops to other lanes with tb=, or allow more with max_lanes)")
            for ent in tb.get("remote_buffer_refs", ()):
                if len(ent["remote_buffer_ids"]) > MAX_LANE_LIST:
                    at = ent["access_channel_type"]
                    pos = next(p for p, op in ops(tb) if op.get("channel_type", "memory") == at and any(
                        ref.get("buffer_id", -1) >= MAX_LANE_LIST for ref in op.get("src_buff", []) + op.get(
                            "dst_buff", [])))
                    loc, what = where(r, t, pos)
                    raise ValueError(f"{loc}: rank {r} lane {t} reaches {len(ent['remote_buffer_ids'])} remote buffers "
                                     f"over {at} channels from its op {pos[0]} ({what}) on: the executor takes at most "
                                     f"{MAX_LANE_LIST} per lane (pin ops to other lanes with tb=, or allow more with "
                                     "max_lanes)")
            for pos, op in ops(tb):
                if op.get("barrier_id", 0) >= MAX_BARRIERS:
                    loc, what = where(r, t, pos)
                    raise ValueError(f"{loc}: rank {r} needs more than {MAX_BARRIERS} barriers (one per set of lanes, "
                                     f"times instances) by its lane {t}'s op {pos[0]} ({what}): the executor has 16")


def JSON():
    """The current program's plan as JSON text (checked first, when its check is on)."""
    return get_program().to_json()


# MSCCL++'s program.py re-exports these into `from mscclpp.language.program import *`.
from .channel import *  # noqa: E402,F401,F403
from .collectives import *  # noqa: E402,F401,F403
from .rank import Semaphore  # noqa: E402,F401
from .types import BufferType as BufferType  # noqa: E402,F401,F811
