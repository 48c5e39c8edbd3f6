"""A reference interpreter of MSCCL++ 0.9 execution plans, in pure Python and numpy.

It runs every rank of a plan (docs/plan-format.md) in one process, on host buffers,
with the plan's intended semantics: it is a second, independent reading of the
format that checks the Go reader (core/plan) and the plans that core/builtin
generates. The chunk-to-byte arithmetic follows the document's section 8, not the
Go code.

Usage::

    import numpy as np
    from plan_reference import run_plan

    plan = json.load(open("plan.json"))
    inputs = [np.frombuffer(x.tobytes(), np.uint8).copy() for x in per_rank_data]
    outputs = [np.zeros(n_bytes, np.uint8) for _ in range(nranks)]
    result = run_plan(plan, inputs, outputs, np.float32, "sum", schedule="random", seed=3)

Buffers are one-dimensional uint8 arrays, one input (send) and one output (receive)
buffer per rank. For an in-place call pass views of one array, laid out as the
collective's in-place convention says (section 9): numpy views share memory, so a
store through one is seen through the other.

Model
-----
* Every thread block (lane) of every rank is a state machine running its ops in
  order (pipelines unrolled into their iterations, section 8.6). A scheduler takes
  the lanes round-robin, one op per turn, or in a seeded random order each round
  (``schedule="random"``). An op that must wait (``wait``, ``barrier``,
  ``sem_acquire``, a packet whose flag has not arrived) leaves its lane blocked
  until a later round. When a whole round makes no progress while lanes are
  unfinished, ``Deadlock`` is raised naming every blocked lane, its op and why.
* Memory and port channels are semaphore pairs: the k-th channel of a type from A
  to B pairs with the k-th from B to A (section 4.1). ``signal``/``rlxsignal``
  increment the peer's inbound count, ``wait``/``rlxwait`` wait for one more than
  they have consumed. An unpaired channel's signals are lost and its waits never
  return.
* Stores into peers' buffers (put, res, rres, and port puts) are held back until
  the storing lane releases them, as a GPU may keep them invisible until then:
  memory stores until the lane's next ``signal``, ``barrier``, ``sem_release`` or
  ``pws``/``pwsf``, or its end (``rlxsignal`` and ``nop`` release nothing); port
  puts until a ``signal``, ``pws``, ``pwsf`` or ``flush`` on their channel, or the
  lane's end. A peer that reads without waiting for the signal sees the old bytes,
  so a missing synchronisation shows as a wrong result. ``delay_remote_writes=False``
  makes every store immediate. LL packets are written at once: their flags are
  their synchronisation.
* Intended semantics where 0.9 departs from them (section 12): ``get`` reads its
  source offset into its destination offset; ``reduce_op`` is honoured; ``pwsf``
  and ``flush`` flush; each put source keeps its own buffer type; thread-block
  groups use the later split (empty trailing slices) where 0.9's overlap.
* The reduction of an op is its ``reduce_op`` if the op has one, else the call's
  ``op``: ``"sum"``, ``"prod"``, ``"min"`` or ``"max"`` as numpy ufuncs on views of
  ``dtype``.
* LL packets (``ppkt``, ``rppkt``, ``cpkt``, ``upkt``, ``repkt``, ``respkt``,
  ``recpkt``, ``recspkt``) live as bytes in the scratch buffer at twice their data
  offset: LL16 packets (``data1 flag1 data2 flag2``, 4 bytes each, 8 payload bytes)
  or LL8 (``data flag``, 4 payload bytes), carrying ``flag`` (the launch counter,
  default 1). NVLS ops (``glres``, ``gstore``, ``gstorepkt``, ``glre``) raise
  NotImplementedError.
"""

from __future__ import annotations

import random as _random
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "Deadlock",
    "MessageSizeError",
    "PlanFormatError",
    "RunResult",
    "chunk_layout",
    "run_plan",
]

REDUCE_OPS = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}
DEFAULT_SCRATCH = 1 << 27  # the executor's shared scratch buffer (reuse_resources)
PREDEFINED_SCRATCH = 1 << 26  # what 0.9 sizes reuse_resources slots from

SIGNALS = {"signal", "rlxsignal", "pws", "pwsf"}
WAITS = {"wait", "rlxwait"}
NVLS_OPS = {"glres", "gstore", "gstorepkt", "glre"}
WINDOWED = {"copy", "put", "pws", "pwsf", "get", "re", "res", "rre", "rres", "glres"}
KNOWN_OPS = {
    "nop", "barrier", "put", "pws", "pwsf", "get", "copy", "signal", "wait", "rlxsignal",
    "rlxwait", "flush", "re", "res", "rre", "rres", "pipeline", "sem_acquire", "sem_release",
    "ppkt", "rppkt", "cpkt", "upkt", "repkt", "respkt", "recpkt", "recspkt",
} | NVLS_OPS


class PlanFormatError(ValueError):
    """The plan is malformed or refers to something it does not have."""


class MessageSizeError(ValueError):
    """The buffers' sizes are not ones the plan can run (section 8.1)."""


class Deadlock(RuntimeError):
    """No lane can make progress and some have not finished.

    ``blocked`` lists (rank, lane, op index, op name, reason) for each unfinished lane.
    """

    def __init__(self, blocked):
        self.blocked = blocked
        lines = [f"rank {r} lane {l} op {i} ({name}): {why}" for r, l, i, name, why in blocked]
        super().__init__("deadlock: no lane can progress:\n  " + "\n  ".join(lines))


@dataclass
class RunResult:
    """What a run leaves besides the output buffers.

    ``leftover_signals`` maps (rank, channel type, channel index) to signals that
    arrived on it and were never waited for (a balanced plan leaves none);
    ``semaphores`` maps (rank, id) to a semaphore whose value differs from its
    init_value at the end; ``steps`` counts executed ops.
    """

    scratch: list
    steps: int
    leftover_signals: dict = field(default_factory=dict)
    semaphores: dict = field(default_factory=dict)


# -- chunk arithmetic (section 8) -------------------------------------------------------------


def _calc_offset(size, index, slices, align):
    """Offset of slice `index` of `slices` of `size` bytes, in whole alignment units,
    the leftover units going one each to the first slices (the later formula of
    section 8.3/8.4, equal to 0.9's whenever slices <= units)."""
    nelems = size // align
    q, rem = divmod(nelems, slices)
    return (index * q + min(index, rem)) * align


@dataclass
class _RankLayout:
    align: int
    input_size: int
    output_size: int
    chunk: int  # C
    scratch_size: int
    scratch_slot: int  # maxScratchChunk
    reuse: bool

    def ref(self, buf, index, size):
        """(offset, length) of chunks [index, index+size) of buffer `buf` (8.3)."""
        if buf == "s" and self.reuse and self.scratch_slot < self.chunk:
            off = index * self.scratch_slot
        else:
            off = index * self.chunk
        return off, size * self.chunk


def chunk_layout(plan, rank, input_size, output_size):
    """The byte arithmetic of `rank` for a call with these sizes (sections 8.1, 8.2, 10).

    Raises MessageSizeError for sizes the plan cannot run.
    """
    gpu = plan["gpus"][rank]
    align = plan.get("buffer_alignment", 16)
    ic, oc, sc = gpu["input_chunks"], gpu["output_chunks"], gpu["scratch_chunks"]
    if align <= 0 or ic <= 0 or oc <= 0:
        raise PlanFormatError(f"rank {rank}: alignment {align}, chunks {ic}/{oc}: 0.9 divides by them")
    if input_size % align or output_size % align or (input_size // align) % ic or (output_size // align) % oc:
        raise MessageSizeError(
            f"rank {rank}: input {input_size} and output {output_size} bytes are not multiples of "
            f"{align}-byte units divisible into {ic} and {oc} chunks"
        )
    size = output_size if plan["collective"] == "allgather" else input_size
    lo, hi = plan.get("min_message_size", 0), plan.get("max_message_size", 2**64 - 1)
    if not lo <= size <= hi:
        raise MessageSizeError(f"rank {rank}: message size {size} outside {lo}..{hi}")
    if input_size // ic != output_size // oc:
        raise MessageSizeError(
            f"rank {rank}: chunk sizes differ: {input_size}/{ic} input, {output_size}/{oc} output"
        )
    chunk = input_size // ic
    packets = plan["protocol"] == "LL"
    double = plan.get("use_double_scratch_buffer", False)
    reuse = plan.get("reuse_resources", False)

    def round_up(v):
        return -(-v // align) * align

    if reuse and sc > 0:
        computed, size_bytes = PREDEFINED_SCRATCH, DEFAULT_SCRATCH
    else:
        in_range = min(input_size, plan.get("max_message_size", 2**64 - 1))
        per_chunk = -(-in_range // ic)
        computed = round_up(per_chunk * sc * (2 if packets else 1) * (2 if double else 1))
        size_bytes = computed
    slot = 0
    if sc > 0:
        base = computed // 2 if double else computed
        slot = round_up(-(-base // sc))
    return _RankLayout(
        align=align, input_size=input_size, output_size=output_size, chunk=chunk,
        scratch_size=size_bytes, scratch_slot=slot, reuse=reuse,
    )


# -- plan resolution ------------------------------------------------------------------------


@dataclass
class _Ref:
    rank: int  # owner of the buffer
    buf: str  # "i", "o" or "s"
    off: int
    length: int
    remote: bool
    remote_id: int = -1  # rank-level remote buffer id (remote refs)


@dataclass
class _Instr:
    op: dict
    name: str
    index: int  # op index in the lane (the pipeline's for its inner ops)
    src: list
    dst: list
    channels: list  # rank-level channel indices (of the op's channel type)
    ctype: str
    reduce: str | None
    window: tuple | None = None  # (iteration, unit_size) inside a pipeline


def _at(lst, i, what):
    """lst[i], or a PlanFormatError naming what is out of range."""
    if not isinstance(i, int) or not 0 <= i < len(lst):
        raise PlanFormatError(f"{what}: index {i} of {len(lst)}")
    return lst[i]


def _channel_lists(plan):
    """Per rank and type: the peers of its channels, in rank-level order, and the
    pairing: pair[(rank, type, j)] = index of the paired channel on the peer, or None."""
    peers = {}
    for r, gpu in enumerate(plan["gpus"]):
        for t in ("memory", "port"):
            peers[(r, t)] = []
        for ch in gpu["channels"]:
            t = ch["channel_type"]
            if t in ("memory", "port"):
                peers[(r, t)].extend(ch["connected_to"])
            elif t not in ("switch", "none"):
                raise PlanFormatError(f"rank {r}: channel type {t!r}")
    pair = {}
    for (r, t), lst in peers.items():
        for j, p in enumerate(lst):
            k = lst[:j].count(p)
            if not 0 <= p < len(plan["gpus"]) or p == r:
                raise PlanFormatError(f"rank {r}: {t} channel {j} to rank {p}")
            back = [i for i, q in enumerate(peers[(p, t)]) if q == r]
            pair[(r, t, j)] = back[k] if k < len(back) else None
    return peers, pair


def _lane_lists(gpu, tb, rank):
    chans = {"memory": [], "port": [], "switch": []}
    for ch in tb.get("channels", []):
        t = ch["channel_type"]
        if t == "none":
            continue
        if t not in chans:
            raise PlanFormatError(f"rank {rank} lane {tb['id']}: channel type {t!r}")
        chans[t].extend(ch["channel_ids"])
    bufs = {"memory": [], "port": []}
    for ref in tb.get("remote_buffer_refs", []):
        t = ref["access_channel_type"]
        if t not in bufs:
            raise PlanFormatError(f"rank {rank} lane {tb['id']}: access type {t!r}")
        for b in ref["remote_buffer_ids"]:
            rb = _at(gpu["remote_buffers"], b, f"rank {rank} lane {tb['id']}: remote buffer")
            if t not in rb["access_channel_types"]:
                raise PlanFormatError(f"rank {rank} lane {tb['id']}: remote buffer {b} lacks {t} access")
            bufs[t].append(b)
    return chans, bufs


def _resolve_ref(ref, rank, gpu, bufs, ctype, layout, tbg, where):
    if "switch_channel_id" in ref:
        raise NotImplementedError(f"{where}: switch (NVLS) references are not implemented")
    if "buffer_id" in ref:
        if ctype not in ("memory", "port"):
            raise PlanFormatError(f"{where}: remote reference on an op with channel_type {ctype!r}")
        rid = _at(bufs[ctype], ref["buffer_id"], f"{where}: {ctype} buffer_id")
        rb = gpu["remote_buffers"][rid]
        owner, buf, remote = rb["rank"], rb["type"], True
    else:
        owner, buf, remote, rid = rank, ref["type"], False, -1
    if buf not in ("i", "o", "s"):
        raise PlanFormatError(f"{where}: buffer type {buf!r}")
    if ref["size"] <= 0:
        raise PlanFormatError(f"{where}: reference of size {ref['size']}")
    off, length = layout.ref(buf, ref["index"], ref["size"])
    tb_id, tbg_size = tbg
    if tbg_size != 1:
        a = _calc_offset(length, tb_id, tbg_size, layout.align)
        b = _calc_offset(length, tb_id + 1, tbg_size, layout.align)
        off, length = off + a, b - a
    return _Ref(owner, buf, off, length, remote, rid)


def _resolve_lane(plan, rank, gpu, tb, layout, channel_count):
    where0 = f"rank {rank} lane {tb['id']}"
    chans, bufs = _lane_lists(gpu, tb, rank)
    instrs = []

    def one(op, index, window=None):
        name = op["name"]
        where = f"{where0} op {index} ({name})"
        if name not in KNOWN_OPS:
            raise PlanFormatError(f"{where}: unknown op")
        if name in NVLS_OPS:
            raise NotImplementedError(f"{where}: NVLS op {name!r} is not implemented")
        ctype = op.get("channel_type", "none")
        tbg = (0, 1)
        if "tbg_info" in op:
            tbg = (op["tbg_info"]["tb_id"], op["tbg_info"]["tbg_size"])
            if tbg[1] <= 0 or not 0 <= tbg[0] < tbg[1]:
                raise PlanFormatError(f"{where}: tbg_info {op['tbg_info']}")
        src = [_resolve_ref(r, rank, gpu, bufs, ctype, layout, tbg, where) for r in op.get("src_buff", [])]
        dst = [_resolve_ref(r, rank, gpu, bufs, ctype, layout, tbg, where) for r in op.get("dst_buff", [])]
        ids = []
        for c in op.get("channel_ids", []):
            if ctype not in ("memory", "port"):
                raise PlanFormatError(f"{where}: channel_ids on channel type {ctype!r}")
            g = _at(chans[ctype], c, f"{where}: {ctype} channel id")
            if g >= channel_count[ctype]:
                raise PlanFormatError(f"{where}: {ctype} channel {g} of {channel_count[ctype]}")
            ids.append(g)
        if name in ("sem_acquire", "sem_release"):
            for sid in op["semaphore_ids"]:
                _at(gpu.get("semaphores", []), sid, f"{where}: semaphore id")
        if name == "barrier" and not ("barrier_id" in op and "num_threadblocks" in op):
            raise PlanFormatError(f"{where}: barrier needs barrier_id and num_threadblocks")
        reduce = op.get("reduce_op")
        if reduce is not None and reduce not in REDUCE_OPS:
            raise PlanFormatError(f"{where}: reduce_op {reduce!r}")
        return _Instr(op, name, index, src, dst, ids, ctype, reduce, window)

    for index, op in enumerate(tb["ops"]):
        if op["name"] != "pipeline":
            instrs.append(one(op, index))
            continue
        ctx = op["iter_context"]
        unit, num_chunks = ctx["unit_size"], ctx["num_chunks"]
        if unit <= 0:
            raise PlanFormatError(f"{where0} op {index}: pipeline unit_size {unit}")
        a = layout.align
        ic = gpu["input_chunks"]
        upper = -(-(layout.input_size // a) // ic) * a  # getUpperBoundChunkSize
        iterations = -(-(num_chunks * upper) // unit)
        inner = [one(o, index) for o in op["ops"]]
        for it in range(iterations):
            for ins in inner:
                if ins.name == "pipeline":
                    raise PlanFormatError(f"{where0} op {index}: nested pipeline")
                instrs.append(_window(ins, it, unit, layout))
    return instrs


def _window(ins, it, unit, layout):
    """The instruction of pipeline iteration `it`: windowed ops get window
    [it·unit, it·unit + unit) of each ref (section 8.6); the others run whole."""
    if ins.name not in WINDOWED:
        return _Instr(ins.op, ins.name, ins.index, ins.src, ins.dst, ins.channels, ins.ctype, ins.reduce, (it, unit))
    o = it * unit

    def cut(r):
        if o > r.length:
            raise PlanFormatError(f"pipeline window at {o} past a {r.length}-byte reference (0.9 underflows)")
        shift = o % layout.scratch_slot if (r.buf == "s" and layout.reuse and layout.scratch_slot) else o
        return _Ref(r.rank, r.buf, r.off + shift, min(r.length - o, unit), r.remote, r.remote_id)

    return _Instr(ins.op, ins.name, ins.index, [cut(r) for r in ins.src], [cut(r) for r in ins.dst],
                  ins.channels, ins.ctype, ins.reduce, (it, unit))


def _packet_refs(ins):
    """Which of an op's src and dst refs are packet regions (by position)."""
    n_src, n_dst = range(len(ins.src)), range(len(ins.dst))
    return {
        "ppkt": (set(n_src) if ins.ctype == "port" else set(), set(n_dst)),
        "rppkt": (set(n_src), set(n_dst)),
        "cpkt": (set(), {0}),
        "upkt": ({0}, set()),
        "repkt": (set(n_src) - {0}, set()),
        "respkt": (set(n_src) - {0}, set(n_dst) - {0}),
        "recpkt": (set(n_src) - {0}, {1}),
        "recspkt": (set(n_src) - {0}, set(n_dst) - {0}),
    }.get(ins.name, (set(), set()))


# -- execution ------------------------------------------------------------------------------


class _Lane:
    def __init__(self, rank, lane, instrs, call=0):
        self.rank, self.lane, self.instrs, self.call = rank, lane, instrs, call
        self.pc = 0
        self.pending_mem = []  # (rank, buf, off, bytes) held back until a release
        self.pending_port = {}  # channel -> [(rank, buf, off, bytes)]
        self.barrier_uses = {}  # barrier id -> uses so far
        self.arrived = None  # (id, generation) while waiting in a barrier
        self.why = ""

    @property
    def done(self):
        return self.pc >= len(self.instrs)


class _Machine:
    def __init__(self, plan, inputs, outputs, dtype, op, packet_type, flag, delay):
        self.plan = plan
        self.n = len(plan["gpus"])
        self.dtype = np.dtype(dtype)
        self.default_op = op
        self.delay = delay
        self.flag = flag  # the first call's launch counter; call c's is flag + c
        self.cur_call = 0  # the call of the lane running an op
        self.double = plan.get("use_double_scratch_buffer", False)
        if packet_type not in ("LL16", "LL8"):
            raise ValueError(f"packet type {packet_type!r}, want LL16 or LL8")
        self.packet_type = packet_type
        self.layouts = []
        self.bufs = []
        for r, gpu in enumerate(plan["gpus"]):
            if gpu["id"] != r:
                raise PlanFormatError(f"gpus[{r}].id is {gpu['id']}")
            lay = chunk_layout(plan, r, inputs[r].nbytes, outputs[r].nbytes)
            scratch = np.zeros(lay.scratch_size, np.uint8)
            self.layouts.append(lay)
            self.bufs.append({"i": inputs[r], "o": outputs[r], "s": scratch})
        self.peers, self.pair = _channel_lists(plan)
        self.inbound = {k: 0 for k in self.pair}
        self.expected = {k: 0 for k in self.pair}
        self.sems = {}
        self.sem_init = {}
        for r, gpu in enumerate(plan["gpus"]):
            for i, s in enumerate(gpu.get("semaphores", [])):
                self.sems[(r, i)] = self.sem_init[(r, i)] = s["init_value"]
        self.barriers = {}  # (rank, call, id) -> {generation: arrivals}
        self.programs = []  # [rank][lane]: instructions
        for r, gpu in enumerate(plan["gpus"]):
            count = {t: len(self.peers[(r, t)]) for t in ("memory", "port")}
            self.programs.append([])
            for li, tb in enumerate(gpu["threadblocks"]):
                if tb["id"] != li:
                    raise PlanFormatError(f"rank {r}: threadblocks[{li}].id is {tb['id']}")
                instrs = _resolve_lane(plan, r, gpu, tb, self.layouts[r], count)
                for ins in instrs:
                    src_pkt, dst_pkt = _packet_refs(ins)
                    for i, ref in enumerate(ins.src):
                        self._check_bounds(ins, ref, i in src_pkt, r, li)
                    for i, ref in enumerate(ins.dst):
                        self._check_bounds(ins, ref, i in dst_pkt, r, li)
                self.programs[r].append(instrs)
        self.steps = 0

    # -- memory

    def _region(self, ref, packet=False):
        """(array, offset, length) of a ref's bytes: the packet region for packets."""
        arr = self.bufs[ref.rank][ref.buf]
        off, length = ref.off, ref.length
        if packet:
            off, length = 2 * off, 2 * length
        if ref.buf == "s":
            off += self.half(ref.rank)
        return arr, off, length

    @property
    def cur_flag(self):
        """The launch counter of the running op's call (MSCCL++ increments it per launch)."""
        return self.flag + self.cur_call

    def half(self, rank):
        """Where the running call's half of a double scratch buffer starts: the upper
        half on even flags."""
        if self.double and self.cur_flag % 2 == 0:
            return self.layouts[rank].scratch_size // 2
        return 0

    def _check_bounds(self, ins, ref, packet, rank, lane):
        arr = self.bufs[ref.rank][ref.buf]
        off, length = (2 * ref.off, 2 * ref.length) if packet else (ref.off, ref.length)
        limit = arr.nbytes // 2 if ref.buf == "s" and self.double else arr.nbytes
        if off + length > limit:
            raise PlanFormatError(
                f"rank {rank} lane {lane} op {ins.index} ({ins.name}): bytes {off}..{off + length} of rank "
                f"{ref.rank}'s {ref.buf} buffer, which has {arr.nbytes}"
            )

    def read(self, ref, length=None):
        arr, off, n = self._region(ref)
        n = n if length is None else length
        return arr[off:off + n].copy()

    def write(self, lane, ref, data, port_channel=None):
        """Store data at ref: at once if local, else held back per the model."""
        if not ref.remote or not self.delay:
            self._store(ref.rank, ref.buf, ref.off, data)
        elif port_channel is None:
            lane.pending_mem.append((ref.rank, ref.buf, ref.off, data))
        else:
            lane.pending_port.setdefault(port_channel, []).append((ref.rank, ref.buf, ref.off, data))

    def _store(self, rank, buf, off, data):
        if buf == "s":
            off += self.half(rank)
        self.bufs[rank][buf][off:off + len(data)] = data

    def release_mem(self, lane):
        for w in lane.pending_mem:
            self._store(*w)
        lane.pending_mem.clear()

    def release_port(self, lane, channel):
        for w in lane.pending_port.pop(channel, []):
            self._store(*w)

    def release_all(self, lane):
        self.release_mem(lane)
        for ch in list(lane.pending_port):
            self.release_port(lane, ch)

    # -- reductions

    def ufunc(self, ins):
        name = ins.reduce or self.default_op
        if name not in REDUCE_OPS:
            raise ValueError(f"reduce op {name!r}, want one of {sorted(REDUCE_OPS)}")
        return REDUCE_OPS[name]

    def combine(self, ins, first, others):
        size = self.dtype.itemsize
        if len(first) % size:
            raise MessageSizeError(f"op {ins.name}: {len(first)} bytes is not a whole number of {self.dtype}")
        acc = first.view(self.dtype).copy()
        f = self.ufunc(ins)
        for o in others:
            f(acc, o.view(self.dtype), out=acc)
        return acc.view(np.uint8)

    # -- packets

    def packets(self, payload):
        """LL packets of payload carrying the current flag."""
        p = np.frombuffer(payload.tobytes(), np.uint32)
        flags = np.full(p.shape, self.cur_flag, np.uint32)
        if self.packet_type == "LL8":
            return np.stack([p, flags], axis=1).reshape(-1).view(np.uint8)
        if len(p) % 2:
            raise MessageSizeError("LL16 packets carry 8-byte payloads")
        p = p.reshape(-1, 2)
        return np.stack([p[:, 0], flags[::2], p[:, 1], flags[::2]], axis=1).reshape(-1).view(np.uint8)

    def _check_payload(self, n):
        unit = 4 if self.packet_type == "LL8" else 8
        if n % unit:
            raise MessageSizeError(f"{n} payload bytes: {self.packet_type} packets carry {unit} each")

    def unpack(self, arr, off, n):
        """The payload of n bytes of packets at arr[off:], or None if a flag is not current."""
        self._check_payload(n)
        words = arr[off:off + 2 * n].view(np.uint32)
        if self.packet_type == "LL8":
            w = words.reshape(-1, 2)
            if not np.all(w[:, 1] == self.cur_flag):
                return None
            return w[:, 0].copy().view(np.uint8)
        w = words.reshape(-1, 4)
        if not (np.all(w[:, 1] == self.cur_flag) and np.all(w[:, 3] == self.cur_flag)):
            return None
        return np.stack([w[:, 0], w[:, 2]], axis=1).reshape(-1).copy().view(np.uint8)

    def read_packets(self, ref):
        """Payload of a local scratch packet region (packet ops read scratch whatever the type)."""
        arr = self.bufs[ref.rank]["s"]
        off = 2 * ref.off + self.half(ref.rank)
        return self.unpack(arr, off, ref.length)

    def write_packets(self, ref, payload):
        self._check_payload(len(payload))
        arr, off, _ = self._region(ref, packet=True)
        data = self.packets(payload)
        arr[off:off + len(data)] = data

    # -- synchronisation

    def signal(self, rank, ctype, ch):
        back = self.pair[(rank, ctype, ch)]
        if back is not None:
            peer = self.peers[(rank, ctype)][ch]
            self.inbound[(peer, ctype, back)] += 1

    def can_wait(self, rank, ctype, chans):
        return all(self.inbound[(rank, ctype, c)] >= self.expected[(rank, ctype, c)] + 1 for c in chans)

    # -- ops

    def step(self, lane):
        """Run lane's next op if it can; return whether it did."""
        ins = lane.instrs[lane.pc]
        r = lane.rank
        self.cur_call = lane.call
        handler = getattr(self, "op_" + ins.name)
        ok = handler(lane, ins, r)
        if ok:
            lane.pc += 1
            lane.why = ""
            self.steps += 1
            if lane.done:
                self.release_all(lane)  # the kernel's end makes every store visible
        return ok

    def op_nop(self, lane, ins, r):
        return True

    def op_barrier(self, lane, ins, r):
        bid, count = ins.op["barrier_id"], ins.op["num_threadblocks"]
        if count <= 1:
            return True
        if lane.arrived is None:
            self.release_all(lane)  # the syncer's release increment
            gen = lane.barrier_uses.get(bid, 0)
            lane.barrier_uses[bid] = gen + 1
            arrivals = self.barriers.setdefault((r, lane.call, bid), {})
            arrivals[gen] = arrivals.get(gen, 0) + 1
            if arrivals[gen] > count:
                raise PlanFormatError(f"rank {r} barrier {bid}: more than {count} lanes arrived")
            lane.arrived = (bid, gen)
        bid, gen = lane.arrived
        arrivals = self.barriers[(r, lane.call, bid)]
        if arrivals[gen] < count:
            lane.why = f"barrier {bid}: {arrivals[gen]} of {count} lanes arrived"
            return False
        lane.arrived = None
        return True

    def _puts(self, lane, ins, r, signal):
        if len(ins.src) != len(ins.dst):
            raise PlanFormatError(f"rank {r} op {ins.index}: {len(ins.src)} sources, {len(ins.dst)} destinations")
        for i, (s, d) in enumerate(zip(ins.src, ins.dst)):
            if not d.remote or s.remote:
                raise PlanFormatError(f"rank {r} op {ins.index} ({ins.name}): put from local to remote")
            ch = None
            if ins.ctype == "port":
                ch = ins.channels[i]
                if self.peers[(r, "port")][ch] != d.rank:
                    raise PlanFormatError(f"rank {r} op {ins.index}: port channel {ch} does not lead to rank {d.rank}")
            elif ins.ctype != "memory":
                raise PlanFormatError(f"rank {r} op {ins.index}: {ins.name} on channel type {ins.ctype!r}")
            self.write(lane, d, self.read(s, d.length), port_channel=ch)
        if signal:
            if ins.ctype != "port":
                raise PlanFormatError(f"rank {r} op {ins.index}: {ins.name} needs port channels")
            for ch in ins.channels:
                self.release_port(lane, ch)  # the write, then its signal, in FIFO order
                self.signal(r, "port", ch)
        return True

    def op_put(self, lane, ins, r):
        return self._puts(lane, ins, r, False)

    def op_pws(self, lane, ins, r):
        return self._puts(lane, ins, r, True)

    op_pwsf = op_pws  # the flush adds nothing once the write is released

    def op_get(self, lane, ins, r):
        for s, d in zip(ins.src, ins.dst, strict=True):
            if not s.remote or d.remote:
                raise PlanFormatError(f"rank {r} op {ins.index}: get from remote to local")
            self._store(d.rank, d.buf, d.off, self.read(s))
        return True

    def op_copy(self, lane, ins, r):
        s, d = ins.src[0], ins.dst[0]
        self._store(d.rank, d.buf, d.off, self.read(s))
        return True

    def _sync_type(self, ins, r):
        if ins.ctype not in ("memory", "port") or not ins.channels:
            raise PlanFormatError(f"rank {r} op {ins.index} ({ins.name}): needs channel_type and channel_ids")

    def op_signal(self, lane, ins, r):
        self._sync_type(ins, r)
        if ins.ctype == "memory":
            self.release_mem(lane)
        for ch in ins.channels:
            if ins.ctype == "port":
                self.release_port(lane, ch)
            self.signal(r, ins.ctype, ch)
        return True

    def op_rlxsignal(self, lane, ins, r):
        self._sync_type(ins, r)
        for ch in ins.channels:
            if ins.ctype == "port":  # port: the same as signal
                self.release_port(lane, ch)
            self.signal(r, ins.ctype, ch)
        return True

    def op_wait(self, lane, ins, r):
        self._sync_type(ins, r)
        if not self.can_wait(r, ins.ctype, ins.channels):
            lane.why = f"waits on {ins.ctype} channels {ins.channels} (to ranks " \
                f"{[self.peers[(r, ins.ctype)][c] for c in ins.channels]})"
            return False
        for c in ins.channels:
            self.expected[(r, ins.ctype, c)] += 1
        return True

    op_rlxwait = op_wait

    def op_flush(self, lane, ins, r):
        for ch in ins.channels if ins.ctype == "port" else []:
            self.release_port(lane, ch)
        return True

    def _reduce(self, lane, ins, r, remote_src, send_from):
        first = self.read(ins.src[0])
        others = []
        for s in ins.src[1:]:
            if s.remote != remote_src:
                kind = "remote" if remote_src else "local"
                raise PlanFormatError(f"rank {r} op {ins.index} ({ins.name}): sources 1.. must be {kind}")
            others.append(self.read(s, len(first)))
        result = self.combine(ins, first, others)
        d0 = ins.dst[0]
        self._store(d0.rank, d0.buf, d0.off, result)
        for d in ins.dst[send_from:]:
            if not d.remote:
                raise PlanFormatError(f"rank {r} op {ins.index} ({ins.name}): destinations 1.. must be remote")
            self.write(lane, d, result)
        return True

    def op_re(self, lane, ins, r):
        return self._reduce(lane, ins, r, False, len(ins.dst))

    def op_res(self, lane, ins, r):
        return self._reduce(lane, ins, r, False, 1)

    def op_rre(self, lane, ins, r):
        return self._reduce(lane, ins, r, True, len(ins.dst))

    def op_rres(self, lane, ins, r):
        return self._reduce(lane, ins, r, True, 1)

    def op_sem_release(self, lane, ins, r):
        self.release_all(lane)
        for s in ins.op["semaphore_ids"]:
            self.sems[(r, s)] += 1
        return True

    def op_sem_acquire(self, lane, ins, r):
        ids = ins.op["semaphore_ids"]
        if not all(self.sems[(r, s)] > 0 for s in ids):
            lane.why = f"sem_acquire {ids}: values {[self.sems[(r, s)] for s in ids]}"
            return False
        for s in ids:
            self.sems[(r, s)] -= 1
        return True

    # packets

    def _need_packets(self, ins, r):
        if self.plan["protocol"] != "LL":
            raise PlanFormatError(f"rank {r} op {ins.index} ({ins.name}): packet op in a non-LL plan")

    def op_ppkt(self, lane, ins, r):
        self._need_packets(ins, r)
        for s, d in zip(ins.src, ins.dst, strict=True):
            if ins.ctype == "port":
                # the proxy copies packets already in the source's packet region
                sa, so, n = self._region(s, packet=True)
                da, do, _ = self._region(d, packet=True)
                da[do:do + n] = sa[so:so + n]
            else:
                self.write_packets(d, self.read(s))
        return True

    def op_cpkt(self, lane, ins, r):
        self._need_packets(ins, r)
        self.write_packets(ins.dst[0], self.read(ins.src[0]))
        return True

    def _payloads(self, lane, ins, refs):
        out = []
        for s in refs:
            p = self.read_packets(s)
            if p is None:
                lane.why = f"packets at scratch {2 * s.off} of rank {s.rank} have not arrived (flag {self.cur_flag})"
                return None
            out.append(p)
        return out

    def op_rppkt(self, lane, ins, r):
        self._need_packets(ins, r)
        got = self._payloads(lane, ins, ins.src[:1])
        if got is None:
            return False
        for d in ins.dst:
            self.write_packets(d, got[0][:d.length])
        return True

    def op_upkt(self, lane, ins, r):
        self._need_packets(ins, r)
        got = self._payloads(lane, ins, ins.src[:1])
        if got is None:
            return False
        d = ins.dst[0]
        self._store(d.rank, d.buf, d.off, got[0])
        return True

    def _reduce_packets(self, lane, ins, r, copy, send_from):
        self._need_packets(ins, r)
        got = self._payloads(lane, ins, ins.src[1:])
        if got is None:
            return False
        first = self.read(ins.src[0])
        result = self.combine(ins, first, [g[:len(first)] for g in got])
        d0 = ins.dst[0]
        self._store(d0.rank, d0.buf, d0.off, result)
        if copy:
            self.write_packets(ins.dst[1], result)
        for d in ins.dst[send_from:]:
            self.write_packets(d, result)
        return True

    def op_repkt(self, lane, ins, r):
        return self._reduce_packets(lane, ins, r, False, len(ins.dst))

    def op_respkt(self, lane, ins, r):
        return self._reduce_packets(lane, ins, r, False, 1)

    def op_recpkt(self, lane, ins, r):
        return self._reduce_packets(lane, ins, r, True, len(ins.dst))

    def op_recspkt(self, lane, ins, r):
        return self._reduce_packets(lane, ins, r, True, 2)


def run_plan(plan, inputs, outputs, dtype, op="sum", *, schedule="round_robin", seed=0,
             packet_type="LL16", flag=1, delay_remote_writes=True, calls=1, before_call=None, after_call=None):
    """Run every rank of `plan` on host buffers.

    Parameters
    ----------
    plan : dict
        The plan's JSON, as ``json.load`` gives it.
    inputs, outputs : list of numpy uint8 arrays
        Each rank's send and receive buffer (1-D, contiguous bytes). The output
        buffers are written in place. For in-place plans pass aliasing views.
    dtype : numpy dtype
        The element type reductions use.
    op : str
        ``"sum"``, ``"prod"``, ``"min"`` or ``"max"``: the reduction of ops without a
        ``reduce_op`` of their own.
    schedule : ``"round_robin"`` or ``"random"``
        The order lanes are taken in; ``seed`` seeds the random one.
    packet_type : ``"LL16"`` or ``"LL8"``
        The LL packet format (an executor argument in MSCCL++).
    flag : int
        The launch counter packets carry; with a double scratch buffer an even flag
        uses the upper half.
    delay_remote_writes : bool
        Hold stores into peers' buffers back until the storing lane releases them.
    calls : int
        Run the plan this many times back to back on the same buffers, as an
        executor runs one context: scratch buffers, channel and semaphore counts
        carry over, and each rank starts call c+1 as soon as all its own lanes of
        call c have ended, whatever the other ranks are doing.
    before_call, after_call : callable(call, rank), optional
        Called just before rank starts call `call` (to load its next input) and
        just after it has ended it (to take its output).

    Returns
    -------
    RunResult

    Raises
    ------
    Deadlock
        No lane can progress and some are unfinished.
    PlanFormatError, MessageSizeError
        The plan is malformed, or the buffer sizes do not fit it.
    NotImplementedError
        NVLS (switch channel) ops and references.
    """
    n = len(plan["gpus"])
    if len(inputs) != n or len(outputs) != n:
        raise ValueError(f"{len(inputs)} inputs and {len(outputs)} outputs for {n} ranks")
    for b in list(inputs) + list(outputs):
        if b.dtype != np.uint8 or b.ndim != 1 or not b.flags.c_contiguous:
            raise ValueError("buffers must be 1-D contiguous uint8 arrays")
    if schedule not in ("round_robin", "random"):
        raise ValueError(f"schedule {schedule!r}")
    m = _Machine(plan, inputs, outputs, dtype, op, packet_type, flag, delay_remote_writes)
    rng = _random.Random(seed)
    call = [0] * n  # each rank's current call
    lanes = [None] * n  # each rank's lanes of its current call

    def start(r):
        if before_call is not None:
            before_call(call[r], r)
        lanes[r] = [_Lane(r, li, instrs, call[r]) for li, instrs in enumerate(m.programs[r])]

    for r in range(n):
        start(r)
    while True:
        for r in range(n):
            while lanes[r] is not None and all(lane.done for lane in lanes[r]):
                if after_call is not None:
                    after_call(call[r], r)
                call[r] += 1
                lanes[r] = None
                if call[r] < calls:
                    start(r)
        live = [lane for ls in lanes if ls is not None for lane in ls if not lane.done]
        if not live:
            break
        burst = 1
        if schedule == "random":
            # A random order each round, and a random burst of ops per lane, so
            # that lanes also run far ahead of each other.
            rng.shuffle(live)
            burst = rng.choice((1, 1, 2, 4, 16, 64))
        progressed = False
        for lane in live:
            for _ in range(burst):
                if lane.done or not m.step(lane):
                    break
                progressed = True
        if not progressed:
            blocked = []
            for lane in live:
                ins = lane.instrs[lane.pc]
                blocked.append((lane.rank, lane.lane, ins.index, ins.name, lane.why))
            raise Deadlock(blocked)
    leftover = {k: m.inbound[k] - m.expected[k] for k in m.inbound if m.inbound[k] != m.expected[k]}
    sems = {k: v for k, v in m.sems.items() if v != m.sem_init[k]}
    return RunResult(scratch=[b["s"] for b in m.bufs], steps=m.steps, leftover_signals=leftover, semaphores=sems)
