"""The plan checker: a symbolic run of every rank of an execution plan that proves
what the plan computes, and that it does so without a data race or a deadlock.

    check_plan(plan)                      # raises PlanCheckError, else returns a CheckReport
    check_plan(plan, provenance=prov)     # errors also name the DSL lines that made the ops

It reads the JSON the executor reads (docs/plan-format.md), so it checks plans from
any source: this package's compiler (which calls it from JSON()), MSCCL++'s DSL,
hand-written files.

What it runs. Two calls back to back (`calls`), as an executor runs one context:
each rank starts call c+1 when all its lanes of call c have ended; channel counts,
semaphores and scratch carry over. Pipelines run `pipeline_iterations` windows.
Buffers hold symbols, not numbers: input chunk u of rank q in call c holds
``in(q, u)@c``; a reduction holds the multiset of the symbols it combined; every
other byte starts as junk. A chunk is cut into as many pieces as the plan's
thread-block groups and pipeline windows need.

(a) Result. Whenever a rank ends a call its output is compared with the
    collective's definition: allreduce (output chunk k = every rank's input chunk k,
    each once), allgather (block q = rank q's input), reducescatter (output = every
    rank's input block r), alltoall and alltoallv (block q = rank q's input block
    r; alltoallv's blocks are chunks of equal size here, which covers every size a
    call gives since each reference names one whole block), broadcast (every output
    = the root's input), reduce (the root's output chunk k = every rank's input
    chunk k; in place the others' buffers keep their input). The plan does not name
    the root of broadcast and reduce: check_plan's ``root`` does, else their
    results are not checked (a note says so). "custom" and "test" plans have none.
(b) Races. Every access to a range is logged with the op that made it. Two accesses
    of overlapping ranges, one a write, by different ops, must be ordered by
    happens-before: lane order, a barrier, a semaphore release/acquire, a
    signal/wait pair, an LL packet's flag, or a call boundary of the rank. A write
    must be ordered before what follows it with release semantics (signal, barrier,
    sem_release; relaxed signals and waits order execution only, enough after a
    read). A store into a peer's memory counts from its lane's next release (a
    memory signal, a barrier, a sem_release, the lane's end; port puts: a signal,
    pws or flush on their channel), as does the read of a port put's source.
    Which signal a wait consumes is not fixed when several lanes signal one
    channel: a wait takes happens-before from a signal only when every schedule
    makes it so (fewer other signals can come first than the wait needs).
(c) Deadlock. Waits, semaphore acquires, barriers and packet reads only ever become
    possible, and each channel end and semaphore has one consuming lane (checked),
    so one schedule that completes proves that every schedule does. The run is
    that schedule; if it stops with lanes unfinished, they are named. Signals that
    are never waited for and semaphores that do not return to their initial value
    within a call are errors too (the next call would start from them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["CheckReport", "PlanCheckError", "check_plan"]

MAX_OPS = 64  # per lane, counting a pipeline's inner ops (0.9's MAX_OPERATION)
SIGNAL_NAMES = {"signal", "rlxsignal", "pws", "pwsf"}
WAIT_NAMES = {"wait", "rlxwait"}
WINDOWED = {"copy", "put", "pws", "pwsf", "get", "re", "res", "rre", "rres", "glres"}
NAMES = {"i": "input", "o": "output", "s": "scratch", "m": "input/output"}


JUNK = (("junk",),)  # a value nobody defined: one atom


class PlanCheckError(ValueError):
    """The plan computes something else than its collective, races or deadlocks.

    kind: "result", "race", "deadlock", "unbalanced", "plan"; rank, lane, op_index,
    op_name: the op it is about (None if none); where: the DSL lines that made it
    (from the provenance), or None; problems: every problem found of that kind
    (the message shows the first ones)."""

    def __init__(self, kind, message, rank=None, lane=None, op_index=None, op_name=None, where=None,
                 problems=()):
        super().__init__(message)
        self.kind, self.rank, self.lane, self.op_index, self.op_name = kind, rank, lane, op_index, op_name
        self.where = where
        self.problems = list(problems)


@dataclass
class CheckReport:
    """What a passing check ran: steps executed, accesses compared, calls, windows."""

    steps: int
    accesses: int
    calls: int
    pieces_per_chunk: int
    notes: list = field(default_factory=list)
    races: list = field(default_factory=list)  # with collect_races: [((rank, lane, pos), (rank, lane, pos))]


@dataclass(eq=False)
class _Step:
    sid: int
    rank: int
    lane: int
    call: int
    pos: tuple  # (op index,) or (op index, inner index, iteration)
    name: str
    op: dict
    src: list = field(default_factory=list)  # resolved refs
    dst: list = field(default_factory=list)
    chans: list = field(default_factory=list)  # rank-level channel indices (op's channel type)
    ctype: str | None = None
    kind: str = "op"  # op, host, end
    seq: int = 0  # position in its lane's sequence within the call


@dataclass
class _Ref:
    owner: int
    buf: str  # i, o, s (the owner's buffer)
    lo: int  # in pieces
    hi: int
    remote: bool
    packet: bool = False
    switch: tuple | None = None  # (ranks, buffer type) for switch refs


class _Fail(Exception):
    def __init__(self, err):
        self.err = err


class _Checker:
    def __init__(self, plan, provenance, calls, iterations, call_barrier=False, root=None):
        self.plan = plan
        self.root = root
        self.call_barrier = call_barrier
        self.prov = provenance or {}
        self.calls = calls
        self.iters = iterations
        self.gpus = plan["gpus"]
        self.n = len(self.gpus)
        self.coll = plan.get("collective", "custom")
        self.inplace = bool(plan.get("inplace", False))
        self.ll = plan.get("protocol") == "LL"
        self.double = bool(plan.get("use_double_scratch_buffer", False))
        self.notes = []
        for r, g in enumerate(self.gpus):
            if g.get("id") != r:
                self._plan_error(f"gpus[{r}] has id {g.get('id')}")
        tbgs = {op["tbg_info"]["tbg_size"] for g in self.gpus for tb in g["threadblocks"]
                for op in self._flat(tb["ops"]) if "tbg_info" in op}
        has_pipe = any(op["name"] == "pipeline" for g in self.gpus for tb in g["threadblocks"] for op in tb["ops"])
        d = 1
        for t in tbgs:
            d = d * t // math.gcd(d, t)
        if has_pipe:
            d = d * iterations // math.gcd(d, iterations)
        self.D = d

    @staticmethod
    def _flat(ops):
        for op in ops:
            yield op
            if op.get("name") == "pipeline":
                yield from op.get("ops", [])

    # -- messages --------------------------------------------------------------------------

    def _where(self, st):
        if st.kind == "host":
            return None
        key = (st.rank, st.lane, st.pos[0]) if len(st.pos) == 1 else (st.rank, st.lane, st.pos[0], st.pos[1])
        w = self.prov.get(key)
        return "; ".join(w) if w else None

    def _desc(self, st, with_call=True):
        if st.kind == "host":
            if st.call == 0:
                return f"rank {st.rank}'s caller (before call 0)"
            if st.call == self.calls:
                return f"rank {st.rank}'s caller (after call {st.call - 1})"
            return f"rank {st.rank}'s caller (between calls {st.call - 1} and {st.call})"
        if st.kind == "end":
            return f"the end of rank {st.rank} lane {st.lane}"
        pos = f"op {st.pos[0]}" + (f" (pipeline op {st.pos[1]}, window {st.pos[2]})" if len(st.pos) > 1 else "")
        s = f"{st.name} (rank {st.rank} lane {st.lane} {pos}"
        if with_call and self.calls > 1:
            s += f", call {st.call}"
        s += ")"
        w = self._where(st)
        if w:
            s += f" [{w}]"
        return s

    def _error(self, kind, msg, st=None, problems=()):
        if st is not None and st.kind == "op":
            return PlanCheckError(kind, msg, st.rank, st.lane, st.pos[0], st.name, self._where(st), problems)
        return PlanCheckError(kind, msg, problems=problems)

    def _plan_error(self, msg):
        raise _Fail(PlanCheckError("plan", "malformed plan: " + msg))

    def _range(self, key, lo, hi):
        r, space = key[0], key[1]
        d = self.D
        a, b = lo / d, hi / d
        fmt = lambda x: str(int(x)) if x == int(x) else f"{x:g}"  # noqa: E731
        half = f" (half {key[2]})" if len(key) > 2 and self.double and space == "s" else ""
        return f"rank {r}'s {NAMES.get(space, space)} chunks [{fmt(a)}, {fmt(b)}){half}"

    # -- layout ----------------------------------------------------------------------------

    def space(self, rank, buf, lo, hi, call):
        """(key, lo, hi) with the in-place aliasing of section 9; scratch per half."""
        if buf == "s":
            return (rank, "s", call % 2 if self.double else 0), lo, hi
        if not self.inplace:
            return (rank, buf), lo, hi
        g = self.gpus[rank]
        d = self.D
        if self.coll == "allgather":
            if buf == "i":
                base = rank * g["input_chunks"] * d
                return (rank, "o"), base + lo, base + hi
            return (rank, "o"), lo, hi
        if self.coll == "reducescatter":
            if buf == "o":
                base = rank * g["output_chunks"] * d
                return (rank, "i"), base + lo, base + hi
            return (rank, "i"), lo, hi
        return (rank, "m"), lo, hi

    # -- parsing ---------------------------------------------------------------------------

    def parse(self):
        self.peers = {}  # (rank, type) -> [peer]
        for r, g in enumerate(self.gpus):
            for t in ("memory", "port"):
                self.peers[(r, t)] = []
            self.switch = {}
            for ch in g.get("channels", []):
                t = ch.get("channel_type")
                if t in ("memory", "port"):
                    for p in ch.get("connected_to", []):
                        if not isinstance(p, int) or not 0 <= p < self.n or p == r:
                            self._plan_error(f"rank {r}: {t} channel to rank {p!r}")
                        self.peers[(r, t)].append(p)
        self.switches = {}  # (rank, index) -> (ranks, buffer type)
        for r, g in enumerate(self.gpus):
            k = 0
            for ch in g.get("channels", []):
                if ch.get("channel_type") == "switch":
                    for grp in ch.get("rank_groups", []):
                        self.switches[(r, k)] = (list(grp["ranks"]), ch.get("buffer_type", "s"))
                        k += 1
        self.pair = {}  # (rank, type, j) -> (peer, k) or None
        for (r, t), lst in self.peers.items():
            for j, p in enumerate(lst):
                occ = lst[:j].count(p)
                back = [i for i, q in enumerate(self.peers[(p, t)]) if q == r]
                self.pair[(r, t, j)] = (p, back[occ]) if occ < len(back) else None
        self.programs = {}  # (rank, lane) -> [(pos, op, window)]
        for r, g in enumerate(self.gpus):
            for li, tb in enumerate(g["threadblocks"]):
                if tb.get("id") != li:
                    self._plan_error(f"rank {r}: threadblocks[{li}] has id {tb.get('id')}")
                seq = []
                count = sum(1 + len(op.get("ops", [])) if op.get("name") == "pipeline" else 1 for op in tb["ops"])
                if count > MAX_OPS:
                    raise _Fail(PlanCheckError(
                        "plan", f"rank {r} lane {li} has {count} ops: MSCCL++ 0.9 runs at most {MAX_OPS} per lane "
                                f"(pipelines' inner ops count); spread the work over more lanes or channels",
                        r, li))
                for i, op in enumerate(tb["ops"]):
                    if op["name"] == "pipeline":
                        inner = op.get("ops", [])
                        for it in range(self.iters):
                            for j, x in enumerate(inner):
                                seq.append(((i, j, it), x, it))
                    else:
                        seq.append(((i,), op, None))
                self.programs[(r, li)] = seq

    def _tb_lists(self, r, li):
        tb = self.gpus[r]["threadblocks"][li]
        chans = {}
        for c in tb.get("channels", []):
            chans.setdefault(c["channel_type"], []).extend(c["channel_ids"])
        bufs = {}
        for c in tb.get("remote_buffer_refs", []) or []:
            bufs.setdefault(c["access_channel_type"], []).extend(c["remote_buffer_ids"])
        return chans, bufs

    def _resolve(self, r, li, op, window, tbl):
        chans, bufs = tbl
        name = op["name"]
        ctype = op.get("channel_type")
        d = self.D
        tbg = op.get("tbg_info")

        def ref(x, packet):
            if "switch_channel_id" in x:
                k = chans.get("switch", [])[x["switch_channel_id"]]
                ranks, btype = self.switches[(r, k)]
                lo, hi = x["index"] * d, (x["index"] + x["size"]) * d
                if window is not None and name in WINDOWED:
                    n = hi - lo
                    lo, hi = lo + n * window // self.iters, lo + n * (window + 1) // self.iters
                return _Ref(r, btype, lo, hi, True, False, (tuple(ranks), btype))
            if "buffer_id" in x:
                if ctype not in ("memory", "port"):
                    self._plan_error(f"rank {r} lane {li}: {name} has a remote ref without a memory or port "
                                     f"channel_type")
                try:
                    gid = bufs[ctype][x["buffer_id"]]
                    rb = self.gpus[r]["remote_buffers"][gid]
                except (KeyError, IndexError):
                    self._plan_error(f"rank {r} lane {li}: {name}: remote buffer {x['buffer_id']} of {ctype}")
                owner, buf, remote = rb["rank"], rb["type"], True
            else:
                owner, buf, remote = r, x["type"], False
            lo, hi = x["index"] * d, (x["index"] + x["size"]) * d
            if tbg is not None:
                t, g = tbg["tb_id"], tbg["tbg_size"]
                n = hi - lo
                lo, hi = lo + n * t // g, lo + n * (t + 1) // g
            if window is not None and name in WINDOWED:
                n = hi - lo
                lo, hi = lo + n * window // self.iters, lo + n * (window + 1) // self.iters
            return _Ref(owner, buf, lo, hi, remote, packet)

        ps, pd = _packet_positions(name, ctype, len(op.get("src_buff", [])), len(op.get("dst_buff", [])))
        src = [ref(x, i in ps) for i, x in enumerate(op.get("src_buff", []))]
        dst = [ref(x, i in pd) for i, x in enumerate(op.get("dst_buff", []))]
        ids = []
        if ctype in ("memory", "port") and "channel_ids" in op:
            for c in op["channel_ids"]:
                try:
                    ids.append(chans[ctype][c])
                except (KeyError, IndexError):
                    self._plan_error(f"rank {r} lane {li}: {name}: {ctype} channel {c} of the lane")
        return src, dst, ids, ctype

    # -- steps -----------------------------------------------------------------------------

    def build(self):
        self.steps = []
        self.lanes = {}  # (call, rank, lane) -> [steps]
        self.hosts = {}  # (rank, boundary) -> step
        for r in range(self.n):
            for c in range(self.calls + 1):
                self.hosts[(r, c)] = self._new(_Step(0, r, -1, c, (), "host", {}, kind="host"))
        self.producers = {}  # ("ch", rank, type, idx) or ("sem", rank, id) -> [steps]
        self.consumers = {}
        self.chains = {}
        resolved = {}
        for c in range(self.calls):
            for (r, li), seq in self.programs.items():
                tbl = self._tb_lists(r, li)
                steps = []
                for pos, op, window in seq:
                    key = (r, li, pos)
                    if key not in resolved:
                        resolved[key] = self._resolve(r, li, op, window, tbl)
                    src, dst, ids, ctype = resolved[key]
                    st = self._new(_Step(0, r, li, c, pos, op["name"], op, src, dst, ids, ctype, seq=len(steps)))
                    steps.append(st)
                    self._index_sync(st)
                steps.append(self._new(_Step(0, r, li, c, (len(self.gpus[r]["threadblocks"][li]["ops"]),), "end",
                                             {}, kind="end", seq=len(steps))))
                self.lanes[(c, r, li)] = steps
        self._single_consumers()

    def _new(self, st):
        st.sid = len(self.steps)
        self.steps.append(st)
        return st

    def _index_sync(self, st):
        name, r = st.name, st.rank
        if name in SIGNAL_NAMES:
            for ch in st.chans:
                p = self.pair.get((r, st.ctype, ch))
                if p is not None:
                    self.producers.setdefault(("ch", p[0], st.ctype, p[1]), []).append(st)
        elif name in WAIT_NAMES:
            for ch in st.chans:
                self.consumers.setdefault(("ch", r, st.ctype, ch), []).append(st)
        elif name == "sem_release":
            for s in st.op.get("semaphore_ids", []):
                self.producers.setdefault(("sem", r, s), []).append(st)
        elif name == "sem_acquire":
            for s in st.op.get("semaphore_ids", []):
                self.consumers.setdefault(("sem", r, s), []).append(st)

    def _single_consumers(self):
        for key, sts in self.consumers.items():
            lanes = sorted({st.lane for st in sts})
            if len(lanes) > 1:
                what = (f"{key[2]} channel {key[3]} of rank {key[1]}" if key[0] == "ch"
                        else f"semaphore {key[2]} of rank {key[1]}")
                raise _Fail(self._error(
                    "plan", f"{what} is waited on by lanes {lanes}: which wait a signal satisfies would depend "
                            f"on timing (the checker needs one consuming lane per channel end and semaphore): "
                            f"{self._desc(sts[0])}", sts[0]))
        uses = {}
        for (c, r, li), steps in self.lanes.items():
            if c:
                continue
            for st in steps:
                if st.name == "barrier":
                    uses.setdefault((r, st.op["barrier_id"]), []).append((li, st.op["num_threadblocks"], st))
        for (r, bid), lst in uses.items():
            lanes = {li for li, _, _ in lst}
            counts = {cnt for _, cnt, _ in lst}
            per_lane = {li: sum(1 for x in lst if x[0] == li) for li in lanes}
            if counts == {1} or counts == {0}:
                continue  # returns at once on every lane
            if len(counts) != 1 or len(lanes) != next(iter(counts)) or len(set(per_lane.values())) != 1:
                st = lst[0][2]
                raise _Fail(self._error(
                    "deadlock", f"barrier {bid} of rank {r}: lanes {sorted(lanes)} use it "
                                f"{sorted(per_lane.values())} times with num_threadblocks {sorted(counts)}: "
                                f"it never completes as written ({self._desc(st)})", st))

    # -- the run ---------------------------------------------------------------------------

    def run(self):
        n = self.n
        full = [0] * len(self.steps)
        xo = [0] * len(self.steps)
        self.full, self.xo = full, xo
        done = [False] * len(self.steps)
        self.done = done
        self.inbound = {}
        self.consumed = {}
        self.sem = {(r, s): v.get("init_value", 0) for r, g in enumerate(self.gpus)
                    for s, v in enumerate(g.get("semaphores", []) or [])}
        self.barriers = {}  # (rank, call, id) -> {gen: [steps]}
        self.bar_gen = {}  # (call, rank, lane, id) -> uses
        self.bar_waiting = {}  # step -> (key, gen)
        self.values = {}  # key -> {piece: value}
        self.pkt = {}  # key -> {piece: value} packet payloads
        self.pkt_writer = {}  # key -> {piece: (call, step)}
        self.writer = {}  # (key, piece) -> step (last plain writer)
        self.acc = {}  # key -> [(lo, hi, kind, step, vis)]; vis: step or pending list
        self.pend_mem = {}  # (call, rank, lane) -> [records]
        self.pend_port = {}  # (call, rank, lane, ch) -> [records]
        self.results = []
        pc = {}
        phase = {r: 0 for r in range(n)}  # the call each rank is in
        for r in range(n):
            self._host(r, 0)
        for k in self.lanes:
            pc[k] = 0
        executed = 0
        while True:
            progressed = False
            for r in range(n):
                c = phase[r]
                if c >= self.calls:
                    continue
                keys = [(c, r, li) for li in range(len(self.gpus[r]["threadblocks"]))]
                if all(pc[k] >= len(self.lanes[k]) for k in keys):
                    self._host(r, c + 1)
                    phase[r] = c + 1
                    progressed = True
                    continue
                for k in keys:
                    steps = self.lanes[k]
                    while pc[k] < len(steps):
                        st = steps[pc[k]]
                        prev = steps[pc[k] - 1] if pc[k] else self.hosts[(r, c)]
                        if not self._exec(st, prev):
                            break
                        done[st.sid] = True
                        pc[k] += 1
                        executed += 1
                        progressed = True
            if all(phase[r] >= self.calls for r in range(n)):
                break
            if not progressed:
                blocked = []
                for k, steps in self.lanes.items():
                    if k[0] == phase[k[1]] and pc[k] < len(steps):
                        st = steps[pc[k]]
                        blocked.append((st, self._why(st)))
                lines = [f"{self._desc(st)}: {why}" for st, why in blocked]
                raise _Fail(self._error("deadlock", "deadlock: no lane can go on:\n  " + "\n  ".join(lines[:12])
                                        + ("\n  ..." if len(lines) > 12 else ""), blocked[0][0] if blocked else None,
                                        blocked))
        self.executed = executed

    def _why(self, st):
        if st.name in WAIT_NAMES:
            peers = [self.peers[(st.rank, st.ctype)][c] for c in st.chans]
            return f"waits for a signal on {st.ctype} channels {st.chans} (from ranks {peers}) that never comes"
        if st.name == "sem_acquire":
            return f"semaphores {st.op.get('semaphore_ids')} are never released enough"
        if st.name == "barrier":
            return f"barrier {st.op.get('barrier_id')}: not every lane of it arrives"
        return "packets it reads are never written in this call"

    # -- executing one step

    def _inherit(self, st, prev):
        self.full[st.sid] = self.full[prev.sid] | (1 << prev.sid)
        self.xo[st.sid] = self.xo[prev.sid] | (1 << prev.sid)
        if self.call_barrier and prev.kind == "host":
            # every rank has entered the call before any byte of it moves
            for q in range(self.n):
                h = self.hosts[(q, st.call)]
                self.full[st.sid] |= self.full[h.sid] | (1 << h.sid)
                self.xo[st.sid] |= self.xo[h.sid] | (1 << h.sid)

    def _exec(self, st, prev):
        name, r, c = st.name, st.rank, st.call
        if st.kind == "end":
            self._inherit(st, prev)
            self._release_all(st)
            return True
        if name in WAIT_NAMES:
            if not all(self.inbound.get((r, st.ctype, ch), 0) > self.consumed.get((r, st.ctype, ch), 0)
                       for ch in st.chans):
                return False
            self._inherit(st, prev)
            for ch in st.chans:
                key = ("ch", r, st.ctype, ch)
                k = self.consumed.get((r, st.ctype, ch), 0) + 1
                self.consumed[(r, st.ctype, ch)] = k
                strong_wait = name == "wait" or st.ctype == "port"
                self._match(st, key, k, 0, strong_wait)
            return True
        if name == "sem_acquire":
            ids = st.op.get("semaphore_ids", [])
            if not all(self.sem.get((r, s), 0) > 0 for s in ids):
                return False
            self._inherit(st, prev)
            for s in ids:
                self.sem[(r, s)] -= 1
                key = ("sem", r, s)
                k = sum(1 for x in self.consumers.get(key, []) if self.done[x.sid]) + 1
                init = self.gpus[r]["semaphores"][s].get("init_value", 0)
                self._match(st, key, k, init, True)
            return True
        if name == "barrier":
            cnt = st.op.get("num_threadblocks", 1)
            if cnt <= 1:
                self._inherit(st, prev)
                return True
            if st not in self.bar_waiting:
                bid = st.op["barrier_id"]
                gk = (c, r, st.lane, bid)
                gen = self.bar_gen.get(gk, 0)
                self.bar_gen[gk] = gen + 1
                arr = self.barriers.setdefault((r, c, bid), {}).setdefault(gen, [])
                arr.append((st, prev))
                self.bar_waiting[st] = ((r, c, bid), gen)
            key, gen = self.bar_waiting[st]
            arr = self.barriers[key][gen]
            if len(arr) < cnt:
                return False
            f = x = 0
            for s2, p2 in arr:
                f |= self.full[p2.sid] | (1 << p2.sid) | (1 << s2.sid)
                x |= self.xo[p2.sid] | (1 << p2.sid) | (1 << s2.sid)
            self.full[st.sid], self.xo[st.sid] = f, x
            self._release_all(st)
            return True
        # packet reads block until every piece carries this call's flag
        for ref in st.src:
            if ref.packet and name != "ppkt":
                if not self._packets_ready(ref, c):
                    return False
        if name == "ppkt" and st.ctype == "port":
            for ref in st.src:
                if not self._packets_ready(ref, c):
                    return False
        self._inherit(st, prev)
        for ref in st.src:
            if ref.packet:
                self._packet_edges(st, ref)
        if name == "sem_release":
            self._release_all(st)
            for s in st.op.get("semaphore_ids", []):
                self.sem[(r, s)] = self.sem.get((r, s), 0) + 1
            return True
        if name in ("signal", "rlxsignal"):
            if st.ctype == "memory" and name == "signal":
                self._release_mem(st)
            if st.ctype == "port":
                for ch in st.chans:
                    self._release_port(st, ch)
            for ch in st.chans:
                self._signal(st, ch)
            return True
        if name == "flush":
            if st.ctype == "port":
                for ch in st.chans:
                    self._release_port(st, ch)
            return True
        if name == "nop":
            return True
        self._data(st)
        if name in ("pws", "pwsf"):
            for ch in st.chans:
                self._release_port(st, ch)
                self._signal(st, ch)
        return True

    def _signal(self, st, ch):
        p = self.pair.get((st.rank, st.ctype, ch))
        if p is not None:
            key = (p[0], st.ctype, p[1])
            self.inbound[key] = self.inbound.get(key, 0) + 1

    def _chain(self, key):
        """The producers of key in their one order, if they all run on one lane (of
        successive calls), else None."""
        ch = self.chains.get(key, False)
        if ch is False:
            prods = self.producers.get(key, [])
            if len({(s.rank, s.lane) for s in prods}) <= 1:
                ch = sorted(prods, key=lambda s: (s.call, s.seq))
            else:
                ch = None
            self.chains[key] = ch
        return ch

    def _match(self, w, key, k, init, strong_wait):
        """Happens-before edges into consumer w (the k-th on key) from the producers every
        schedule runs before it."""
        prods = self.producers.get(key, [])
        need = k - init
        if need <= 0:
            return
        chain = self._chain(key)
        if chain is not None:
            # one producing lane: the consumer follows exactly the first `need` producers,
            # all of them through the last one (lane order) and, with data, through the
            # last strong one (a release heads the counter's later increments)
            last = chain[min(need, len(chain)) - 1]
            self.xo[w.sid] |= self.xo[last.sid] | (1 << last.sid)
            if strong_wait:
                for s in reversed(chain[:need]):
                    if s.name in ("signal", "pws", "pwsf", "sem_release") or s.ctype == "port":
                        self.full[w.sid] |= self.full[s.sid] | (1 << s.sid)
                        break
            return
        for s in prods:
            if not self.done[s.sid]:
                continue
            others = 0
            for x in prods:
                if x is s:
                    continue
                if self._known_after(s, x):
                    continue
                others += 1
                if others >= need:
                    break
            if others < need:
                strong = strong_wait and (s.name in ("signal", "pws", "pwsf", "sem_release") or s.ctype == "port")
                self.xo[w.sid] |= self.xo[s.sid] | (1 << s.sid)
                if strong:
                    self.full[w.sid] |= self.full[s.sid] | (1 << s.sid)

    def _known_after(self, s, x):
        if self.done[x.sid]:
            return bool(self.xo[x.sid] >> s.sid & 1)
        if x.rank == s.rank and (x.call > s.call or (x.call == s.call and x.lane == s.lane and x.seq > s.seq)):
            return True
        return False

    # -- memory model: pending remote stores

    def _release_mem(self, st):
        for rec in self.pend_mem.pop((st.call, st.rank, st.lane), []):
            rec[4] = st

    def _release_port(self, st, ch):
        for rec in self.pend_port.pop((st.call, st.rank, st.lane, ch), []):
            rec[4] = st

    def _release_all(self, st):
        self._release_mem(st)
        for key in [k for k in self.pend_port if k[:3] == (st.call, st.rank, st.lane)]:
            for rec in self.pend_port.pop(key):
                rec[4] = st

    # -- data

    def _log(self, st, key, lo, hi, kind, pending=None):
        rec = [lo, hi, kind, st, st, pending]
        if pending is not None:
            rec[4] = None
            if pending == "mem":
                self.pend_mem.setdefault((st.call, st.rank, st.lane), []).append(rec)
            else:
                self.pend_port.setdefault((st.call, st.rank, st.lane, pending), []).append(rec)
        self.acc.setdefault(key, []).append(rec)

    def _read(self, st, ref, pending=None):
        if ref.switch is not None:
            ranks, btype = ref.switch
            vals = []
            for q in ranks:
                key, lo, hi = self.space(q, btype, ref.lo, ref.hi, st.call)
                self._log(st, key, lo, hi, "r")
                vals.append([self.values.get(key, {}).get(u) for u in range(lo, hi)])
            return [_combine([v[i] for v in vals]) for i in range(ref.hi - ref.lo)]
        if ref.packet:
            key, lo, hi = self.space(ref.owner, "s", 2 * ref.lo, 2 * ref.hi, st.call)
            self._log(st, key, lo, hi, "pr", pending)
            store = self.pkt.get(key, {})
            return [store.get(u) for u in range(ref.lo, ref.hi)]
        key, lo, hi = self.space(ref.owner, ref.buf, ref.lo, ref.hi, st.call)
        self._log(st, key, lo, hi, "r", pending)
        store = self.values.get(key, {})
        return [store.get(u, JUNK) for u in range(lo, hi)]

    def _write(self, st, ref, vals, pending=None):
        if ref.switch is not None:
            ranks, btype = ref.switch
            for q in ranks:
                key, lo, hi = self.space(q, btype, ref.lo, ref.hi, st.call)
                self._log(st, key, lo, hi, "w", "mem")
                store = self.values.setdefault(key, {})
                for i, u in enumerate(range(lo, hi)):
                    store[u] = vals[i] if i < len(vals) else JUNK
                    self.writer[(key, u)] = st
            return
        if ref.packet:
            key, lo, hi = self.space(ref.owner, "s", 2 * ref.lo, 2 * ref.hi, st.call)
            self._log(st, key, lo, hi, "pw")
            store = self.pkt.setdefault(key, {})
            wr = self.pkt_writer.setdefault(key, {})
            for i, u in enumerate(range(ref.lo, ref.hi)):
                store[u] = vals[i] if i < len(vals) else JUNK
                wr[u] = (st.call, st)
            return
        key, lo, hi = self.space(ref.owner, ref.buf, ref.lo, ref.hi, st.call)
        self._log(st, key, lo, hi, "w", pending)
        store = self.values.setdefault(key, {})
        for i, u in enumerate(range(lo, hi)):
            store[u] = vals[i] if i < len(vals) else JUNK
            self.writer[(key, u)] = st

    def _packets_ready(self, ref, call):
        key, _, _ = self.space(ref.owner, "s", 0, 0, call)
        wr = self.pkt_writer.get(key, {})
        return all(wr.get(u, (None,))[0] == call for u in range(ref.lo, ref.hi))

    def _packet_edges(self, st, ref):
        key, _, _ = self.space(ref.owner, "s", 0, 0, st.call)
        wr = self.pkt_writer.get(key, {})
        seen = set()
        for u in range(ref.lo, ref.hi):
            w = wr.get(u)
            if w is not None and w[1].sid not in seen:
                seen.add(w[1].sid)
                self.full[st.sid] |= self.full[w[1].sid] | (1 << w[1].sid)
                self.xo[st.sid] |= self.xo[w[1].sid] | (1 << w[1].sid)

    def _pending(self, st, ref, i):
        """How a store (or a port put's source read) of st counts: at once, or pending."""
        if st.ctype == "port" and st.name in ("put", "pws", "pwsf", "ppkt", "rppkt"):
            return st.chans[i] if i < len(st.chans) else (st.chans[0] if st.chans else 0)
        if ref.remote and not ref.packet:
            return "mem"
        return None

    def _data(self, st):
        name = st.name
        src, dst = st.src, st.dst
        if name in ("copy", "cpkt", "upkt"):
            self._write(st, dst[0], self._read(st, src[0]))
        elif name in ("put", "pws", "pwsf", "ppkt", "rppkt", "get"):
            if name == "rppkt":
                vals = self._read(st, src[0])
                for i, d in enumerate(dst):
                    self._write(st, d, vals, None if d.packet else self._pending(st, d, i))
                return
            if len(src) != len(dst):
                self._plan_error(f"rank {st.rank} lane {st.lane}: {name} with {len(src)} sources "
                                 f"and {len(dst)} destinations")
            for i, (s, d) in enumerate(zip(src, dst)):
                port = st.ctype == "port" and name != "get"
                vals = self._read(st, s, self._pending(st, d, i) if port else None)
                self._write(st, d, vals, None if d.packet and not port else self._pending(st, d, i))
        elif name in ("re", "res", "rre", "rres", "repkt", "respkt", "recpkt", "recspkt"):
            vals = [self._read(st, s) for s in src]
            n = src[0].hi - src[0].lo
            res = [_combine([v[i] if i < len(v) else JUNK for v in vals]) for i in range(n)]
            self._write(st, dst[0], res)
            for i, d in enumerate(dst[1:], 1):
                self._write(st, d, res, None if d.packet else self._pending(st, d, i))
        elif name == "glres":
            vals = self._read(st, src[0])
            self._write(st, dst[0], vals)
        elif name in ("glre", "gstore"):
            self._plan_error(f"rank {st.rank} lane {st.lane}: unfused {name} (0.9 does not run it)")
        else:
            self._plan_error(f"rank {st.rank} lane {st.lane}: unknown op {name!r}")

    # -- calls: inputs in, outputs checked

    def _host(self, r, c):
        """Rank r's caller between calls c-1 and c: takes call c-1's output, loads call c's
        input; it reads and writes the whole input and output."""
        st = self.hosts[(r, c)]
        if c > 0:
            prev = self.hosts[(r, c - 1)]
            f = x = 1 << prev.sid
            for li in range(len(self.gpus[r]["threadblocks"])):
                e = self.lanes[(c - 1, r, li)][-1]
                f |= self.full[e.sid] | (1 << e.sid)
                x |= self.xo[e.sid] | (1 << e.sid)
            self.full[st.sid], self.xo[st.sid] = f, x
            self._check_output(r, c - 1)
        self.done[st.sid] = True
        g = self.gpus[r]
        d = self.D
        ic, oc = g["input_chunks"] * d, g["output_chunks"] * d
        for buf, size in (("o", oc), ("i", ic)):
            key, lo, hi = self.space(r, buf, 0, size, c)
            self._log(st, key, lo, hi, "w")
        if c < self.calls:
            key, lo, hi = self.space(r, "o", 0, oc, c)
            store = self.values.setdefault(key, {})
            for u in range(lo, hi):
                store[u] = JUNK
                self.writer.pop((key, u), None)
            key, lo, hi = self.space(r, "i", 0, ic, c)
            store = self.values.setdefault(key, {})
            for i, u in enumerate(range(lo, hi)):
                store[u] = (("in", r, i, c),)
                self.writer.pop((key, u), None)

    def expected(self, r, c):
        """[(output piece, expected value)] of rank r after call c, or None."""
        g = self.gpus[r]
        d = self.D
        oc = g["output_chunks"] * d
        n = self.n
        coll = self.coll
        if coll == "allreduce":
            return [tuple(sorted(("in", q, u, c) for q in range(n))) for u in range(oc)]
        if coll == "allgather":
            ic = g["input_chunks"] * d
            return [(("in", u // ic, u % ic, c),) for u in range(oc)]
        if coll == "reducescatter":
            return [tuple(sorted(("in", q, r * oc + u, c) for q in range(n))) for u in range(oc)]
        if coll in ("alltoall", "alltoallv"):
            b = oc // n
            return [(("in", u // b, r * b + u % b, c),) for u in range(oc)]
        if coll == "broadcast" and self.root is not None:
            return [(("in", self.root, u, c),) for u in range(oc)]
        if coll == "reduce" and self.root is not None:
            if r == self.root:
                return [tuple(sorted(("in", q, u, c) for q in range(n))) for u in range(oc)]
            if self.inplace:
                return [(("in", r, u, c),) for u in range(oc)]
        return None

    def _check_output(self, r, c):
        want = self.expected(r, c)
        if want is None:
            return
        d = self.D
        key, lo, hi = self.space(r, "o", 0, len(want), c)
        store = self.values.get(key, {})
        for i, u in enumerate(range(lo, hi)):
            got = store.get(u, JUNK)
            if got != want[i]:
                self.results.append((r, c, i, got, want[i], self.writer.get((key, u))))
                return  # the first wrong piece of this rank and call

    # -- after the run

    def _balance(self):
        for key, v in self.inbound.items():
            used = self.consumed.get(key, 0)
            if v != used:
                r, t, ch = key
                peer = self.peers[(r, t)][ch]
                raise _Fail(PlanCheckError(
                    "unbalanced", f"{v - used} signal(s) from rank {peer} on rank {r}'s {t} channel {ch} are never "
                                  f"waited for (over {self.calls} calls): signals and waits must match on every "
                                  f"channel pair", r))
        for (r, s), v in self.sem.items():
            init = self.gpus[r]["semaphores"][s].get("init_value", 0)
            if v != init:
                raise _Fail(PlanCheckError(
                    "unbalanced", f"semaphore {s} of rank {r} ends at {v}, not its initial {init}: releases and "
                                  f"acquires must match within a call", r))

    def races(self):
        full, xo = self.full, self.xo
        found = []
        total = 0
        for key, recs in self.acc.items():
            total += len(recs)
            recs = sorted(recs, key=lambda x: x[0])
            active = []
            for rec in recs:
                lo = rec[0]
                active = [a for a in active if a[1] > lo]
                for a in active:
                    if a[3] is rec[3]:
                        continue
                    ka, kb = a[2], rec[2]
                    if ka in ("r", "pr") and kb in ("r", "pr"):
                        continue
                    if not self._ordered(a, rec) and not self._ordered(rec, a):
                        found.append((key, max(a[0], rec[0]), min(a[1], rec[1]), a, rec))
                active.append(rec)
        self.n_acc = total
        return found

    def _ordered(self, a, b):
        """Whether access a is ordered before access b."""
        va = a[4] if a[4] is not None else a[3]
        if a[4] is None:  # never released: only the lane's own later ops... none count
            return False
        sa, sb = a[3], b[3]
        if a[2] in ("w", "pw") and b[2] in ("w", "pw") and sa.kind == sb.kind == "op" and sa.rank == sb.rank \
                and sa.lane == sb.lane and sa.call == sb.call and sa.seq < sb.seq and a[5] == b[5]:
            return True  # one lane's stores land in its order (held back alike, released together)
        if va is sb:
            return True
        strong = a[2] in ("w", "pw") and va.kind != "host"
        bits = self.full[sb.sid] if strong else self.xo[sb.sid]
        return bool(bits >> va.sid & 1)

    def report_races(self, found):
        def order(f):
            return max(f[3][3].sid, f[4][3].sid)

        found.sort(key=order)
        lines = []
        what = {"r": "reads", "w": "writes", "pr": "polls packets of", "pw": "writes packets to"}
        seen = set()

        def ident(st):  # the same op in another call, or the same rank's caller, is one report
            return (st.rank, st.kind) if st.kind == "host" else (st.rank, st.lane, st.pos)

        shown = []
        for f in found:
            k = frozenset((ident(f[3][3]), ident(f[4][3])))
            if k not in seen:
                seen.add(k)
                shown.append(f)
        for key, lo, hi, a, b in shown[:6]:
            first, second = (a, b) if a[3].sid < b[3].sid else (b, a)
            lines.append(f"{self._desc(first[3])} {what[first[2]]} {self._range(key, lo, hi)} and "
                         f"{self._desc(second[3])} {what[second[2]]} it, and nothing orders the two "
                         f"({_hint(first, second)})")
        key, lo, hi, a, b = found[0]
        later = a[3] if a[3].sid > b[3].sid else b[3]
        if later.kind != "op":
            later = a[3] if later is b[3] else b[3]
        msg = f"data race ({len(found)} unordered pairs of accesses):\n  " + "\n  ".join(lines)
        return self._error("race", msg, later, found)

    def report_results(self):
        lines = []
        seen = set()
        shown = []
        for x in self.results:
            if (x[0], x[2]) not in seen:
                seen.add((x[0], x[2]))
                shown.append(x)
        for r, c, piece, got, want, w in shown[:6]:
            d = self.D
            chunk = piece / d
            cs = str(int(chunk)) if chunk == int(chunk) else f"{chunk:g}"
            s = (f"rank {r}'s output chunk {cs} after call {c} holds {_show(got, c, d)}, "
                 f"want {_show(want, c, d)}")
            s += f"; last written by {self._desc(w)}" if w is not None else "; nothing wrote it"
            lines.append(s)
        r, c, piece, got, want, w = self.results[0]
        return self._error("result", "wrong result:\n  " + "\n  ".join(lines), w, self.results)


def _hint(first, second):
    a = first[3]
    if first[4] is None:
        return "the store is never released: no signal, barrier or semaphore follows it on its lane"
    if a.rank != second[3].rank:
        return "a signal/wait pair between the ranks is missing, relaxed, or in the wrong place"
    if a.lane != second[3].lane:
        return "the lanes need a barrier, a semaphore or a signal/wait path between them"
    return "they are in different calls"


def _combine(vals):
    atoms = []
    for v in vals:
        if v is None:
            return JUNK
        atoms.extend(v)
    return tuple(sorted(atoms))


def _show(v, c, d):
    if v is None or v == JUNK or any(a == ("junk",) for a in v):
        return "junk" if len(v or ()) <= 1 else "a reduction with junk in it"
    parts = []
    for a in v:
        if not isinstance(a, tuple) or a[0] != "in":
            parts.append("junk")
            continue
        _, q, u, call = a
        x = u / d
        xs = str(int(x)) if x == int(x) else f"{x:g}"
        parts.append(f"in[{q}][{xs}]" + ("" if call == c else f" of call {call}"))
    return " + ".join(parts) if len(parts) > 1 else parts[0]


def _packet_positions(name, ctype, ns, nd):
    if name == "ppkt":
        return (set(range(ns)) if ctype == "port" else set()), set(range(nd))
    if name == "rppkt":
        return set(range(ns)), set(range(nd))
    if name == "cpkt":
        return set(), {0}
    if name == "upkt":
        return {0}, set()
    if name == "repkt":
        return set(range(1, ns)), set()
    if name == "respkt":
        return set(range(1, ns)), set(range(1, nd))
    if name == "recpkt":
        return set(range(1, ns)), {1}
    if name == "recspkt":
        return set(range(1, ns)), set(range(1, nd))
    return set(), set()


def check_plan(plan, provenance=None, *, calls=2, pipeline_iterations=2, call_barrier=False, collect_races=False,
               root=None):
    """Check `plan` (a dict, or JSON text); raise PlanCheckError or return a CheckReport.

    provenance: {(rank, lane, op index[, inner index]): [where...]} as
    CollectiveProgram.compile() returns it, to name DSL lines in errors.
    call_barrier: assume that every rank has entered a call before any byte of it
    moves (ucxx-go's executor exchanges a fingerprint of each call first; MSCCL++'s
    does not, so by default a plan must order a peer's first access to a rank's
    buffers after that rank's call has started).
    root: the root rank of a broadcast or reduce plan, whose result is checked only
    when it is given."""
    if isinstance(plan, (str, bytes)):
        import json

        plan = json.loads(plan)
    ck = _Checker(plan, provenance, calls, pipeline_iterations, call_barrier, root)
    if ck.coll in ("broadcast", "reduce") and root is None:
        ck.notes.append(f"{ck.coll}: no root given, so the result is not checked")
    try:
        ck.parse()
        ck.build()
        ck.run()
        found = ck.races()
        if collect_races:
            pairs = [((a[3].rank, a[3].lane, a[3].pos), (b[3].rank, b[3].lane, b[3].pos))
                     for _, _, _, a, b in found if a[3].kind == "op" and b[3].kind == "op"]
            return CheckReport(steps=ck.executed, accesses=ck.n_acc, calls=calls, pieces_per_chunk=ck.D,
                               notes=ck.notes, races=pairs)
        if found:
            raise _Fail(ck.report_races(found))
        if ck.results:
            raise _Fail(ck.report_results())
        ck._balance()
    except _Fail as f:
        raise f.err from None
    return CheckReport(steps=ck.executed, accesses=ck.n_acc, calls=calls, pieces_per_chunk=ck.D, notes=ck.notes)
