"""From the recorded program to the plan: lanes, synchronisation, fusion, JSON.

1. Channel pairing (the k-th channel of a type from A to B with the k-th from B to
   A) and, per channel end, the byte ranges reached through it or its pair.
2. Lanes: a pinned op keeps its thread block; any other op goes to the lane of a
   channel it uses (its home), else to the lane of the latest earlier op of its
   rank it conflicts with, else to a new lane (up to the program's max_lanes).
3. Synchronisation between lanes of a rank, in program order: every op must come
   after each earlier op of its rank that touched an overlapping range when one of
   the two writes (RAW, WAW, WAR; reads never wait for reads). A dependency that
   lane order, barriers or semaphores already give is left alone; any other gets
   a semaphore release on the earlier lane and an acquire on the later one.
   Channel ops take part through their channel's ranges: a signal reads every
   range the channel pair carries (so it comes after the writes it publishes), a
   wait writes them (so what reads or overwrites them comes after it).
4. Per lane: fusion as MSCCL++ does it (consecutive puts; a reduction followed by
   puts of its result -> res/rres with channel_type memory; signals, waits,
   flushes and semaphore ops of one kind), the nops around sync ops their
   data_sync asks for, and a nop wherever a lane touches what it touched since its
   last nop with a write among the two.
5. JSON in MSCCL++ 0.9's layout (docs/plan-format.md), replicated `instances`
   times, with a provenance map: for every op, the DSL lines it came from.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from fractions import Fraction

from .types import BufferType, ChannelType, ReplicationPolicy, SyncType

READS = ("r", "pr")
WRITES = ("w", "pw")


# -- address spaces ------------------------------------------------------------------------


class Spaces:
    """Maps a buffer reference to the memory it touches, with the collective's in-place
    aliasing (docs/plan-format.md section 9): (owner, space) and a range in chunks."""

    def __init__(self, collective_name, inplace, in_chunks, out_chunks):
        self.name, self.inplace = collective_name, inplace
        self.ic, self.oc = in_chunks, out_chunks  # per rank lists

    def of(self, rank, buf, lo, hi, packet=False):
        """((rank, space), lo, hi). Packet regions sit at twice their data offset in scratch."""
        b = buf.value if isinstance(buf, BufferType) else buf
        if packet:
            return (rank, "s"), 2 * lo, 2 * hi
        if b == "s" or not self.inplace:
            return (rank, b), lo, hi
        if self.name == "allgather":
            if b == "i":
                base = rank * self.ic[rank]
                return (rank, "o"), base + lo, base + hi
            return (rank, "o"), lo, hi
        if self.name == "reducescatter":
            if b == "o":
                base = rank * self.oc[rank]
                return (rank, "i"), base + lo, base + hi
            return (rank, "i"), lo, hi
        return (rank, "m"), lo, hi


def _overlap(a_lo, a_hi, b_lo, b_hi):
    return a_lo < b_hi and b_lo < a_hi


def _conflict(old, new):
    """Whether access kind `new` must come after earlier access kind `old`."""
    if old in READS and new in READS:
        return False
    if old == "pw" and new == "pr":  # packets carry their own flags
        return False
    return True


# -- emitted ops -----------------------------------------------------------------------------


@dataclass(eq=False)
class EOp:
    """An op of one lane, before JSON."""

    name: str
    src: list = field(default_factory=list)  # Chunks
    dst: list = field(default_factory=list)
    channels: list = field(default_factory=list)  # channel objects (signal/wait/flush, port puts, get)
    ctype: str | None = None
    sems: list = field(default_factory=list)  # semaphore objects
    barrier: tuple | None = None  # (key, members)
    tbg: tuple | None = None
    reduce_op: str | None = None
    sync: SyncType = SyncType.none
    body: list | None = None  # pipeline
    loop: object = None
    pkt_dst: int = 0  # recpkt/recspkt: dst[1] is a local packet region
    origin: list = field(default_factory=list)  # strings: where it came from
    switch: object = None
    switch_index: tuple = ()
    switch_size: int = 0
    occ: object = None  # an inserted release/acquire pair this op belongs to
    ops: list = field(default_factory=list)  # the DSL ops it came from

    @property
    def is_sync(self):
        return self.name in ("signal", "wait", "rlxsignal", "rlxwait", "flush", "sem_acquire", "sem_release")


class _Sem:
    """A semaphore the compiler adds (one per ordered pair of lanes)."""

    def __init__(self, rank, label):
        self.rank, self.initial_value, self.label = rank, 0, label


class _Lane:
    def __init__(self, key):
        self.key = key
        self.entries = []
        self.tick = 0
        self.vc = {}  # lane key -> tick known to happen before this lane's current point
        self.open = None  # the pipeline EOp at the end of entries that is still being filled
        self.load = 0
        self.released = 0  # the tick of the lane's latest release (publishes its stores into peers)


# -- the compiler ----------------------------------------------------------------------------


class Compiler:
    def __init__(self, prog):
        self.prog = prog
        self.n = prog.num_ranks
        ic, oc = prog.collective.chunk_counts()
        self.ic = [ic] * self.n
        self.oc = [oc] * self.n
        self.spaces = Spaces(prog.collective.name, prog.collective.inplace, self.ic, self.oc)

    # -- step 1: channels

    def pair_channels(self):
        by = {}
        for ch in self.prog.channels:
            by.setdefault((ch.channel_type, ch.src_rank, ch.dst_rank), []).append(ch)
        self.pair = {}
        for (t, a, b), lst in by.items():
            back = by.get((t, b, a), [])
            for k, ch in enumerate(lst):
                self.pair[ch] = back[k] if k < len(back) else None
        # per channel end: the peer's ranges its ops write (wb) and read (rb), and the
        # sources of its port puts (ps)
        self.wb, self.rb, self.ps = {}, {}, {}
        for op in self.prog.ops:
            ch = op.channel
            if ch is None or op.kind not in ("put", "get", "reduce"):
                continue
            for c in op.dst:
                if c.rank != op.rank:
                    self.wb.setdefault(ch, []).append(self._acc(c, "w", packet=op.to_packet)[:3])
            for c in op.src:
                if c.rank != op.rank:
                    self.rb.setdefault(ch, []).append(self._acc(c, "r")[:3])
                elif op.kind == "put" and ch.channel_type == ChannelType.port:
                    self.ps.setdefault(ch, []).append(self._acc(c, "r", packet=op.from_packet)[:3])

    def _sets(self, ch):
        p = self.pair.get(ch)
        wa = self.wb.get(p, []) if p is not None else []
        ra = self.rb.get(p, []) if p is not None else []
        return wa, ra, self.wb.get(ch, []), self.rb.get(ch, [])

    def _acc(self, c, kind, packet=False, tbg=None):
        key, lo, hi = self.spaces.of(c.rank, c.buffer, Fraction(c.index), Fraction(c.index + c.size), packet)
        if tbg is not None:
            t, g = tbg
            w = (hi - lo) / g
            lo, hi = lo + w * t, lo + w * (t + 1)
        return key, lo, hi, kind

    def accesses(self, op):
        """(needs, records): the ranges op must be ordered after earlier accesses of, and
        the ranges later ops are ordered after it for, each (key, lo, hi, kind).

        Data ops need and record what they read and write. A signal needs what its
        channel pair carries: the ranges the peer will write here (after earlier reads
        and writes of them), and the ranges the peer will read (after earlier writes).
        A wait records them: what the peer wrote here and what this rank reaches of the
        peer through the channel are "written" by the wait for the ops that follow."""
        acc = []
        tbg = op.tbg
        if op.kind == "copy":
            acc.append(self._acc(op.src[0], "pr" if op.from_packet else "r", op.from_packet, tbg))
            acc.append(self._acc(op.dst[0], "pw" if op.to_packet else "w", op.to_packet, tbg))
        elif op.kind == "reduce":
            acc.append(self._acc(op.src[0], "r", False, tbg))
            for c in op.src[1:]:
                acc.append(self._acc(c, "pr" if op.from_packet else "r", op.from_packet, tbg))
            acc.append(self._acc(op.dst[0], "w", False, tbg))
        elif op.kind in ("put", "get"):
            for c in op.src:
                acc.append(self._acc(c, "pr" if op.from_packet else "r", op.from_packet, tbg))
            for c in op.dst:
                acc.append(self._acc(c, "pw" if op.to_packet else "w", op.to_packet, tbg))
        elif op.kind in ("signal", "flush"):
            wa, ra, wb, rb = self._sets(op.channel)
            # after this rank's reads of the peer's ranges too ("done reading"); on a port
            # channel it ends its puts' reads of their sources, as a flush does
            needs = [x + ("w",) for x in wa + rb] + [x + ("r",) for x in ra + wb]
            recs = [x + ("r",) for x in self.ps.get(op.channel, [])]
            return needs, recs
        elif op.kind == "wait":
            wa, ra, wb, rb = self._sets(op.channel)
            return [], [x + ("w",) for x in wa + wb + rb] + [x + ("r",) for x in ra]
        elif op.kind in ("switch_reduce", "switch_broadcast"):
            ch = op.channel
            for r in ch.ranks:
                key, lo, hi = self.spaces.of(r, ch.buffer_type, Fraction(op.switch_index),
                                             Fraction(op.switch_index + op.switch_size))
                acc.append((key, lo, hi, "r" if op.kind == "switch_reduce" else "w"))
            for c in op.dst:
                acc.append(self._acc(c, "w"))
            for c in op.src:
                acc.append(self._acc(c, "r"))
        return acc, acc

    # -- step 2: lanes

    def choose_lanes(self):
        """op -> lane key(s): ('p', tb) for pinned lanes, ('a', k) for the compiler's."""
        self.lane_of = {}
        self.barrier_members = {}
        self.rank_lanes = {}
        per_rank = {}
        for op in self.prog.ops:
            per_rank.setdefault(op.rank, []).append(op)
        for r, ops in per_rank.items():
            home = {}
            lanes = []  # in order of creation
            load = {}
            recs = []  # (key, lo, hi, kind, op)
            prev = None
            pending_acquires = []
            pinned = {("p", op.tb) for op in ops if op.tb is not None}
            auto_count = 0

            def use(lk):
                if lk not in load:
                    load[lk] = 0
                    lanes.append(lk)
                load[lk] += 1

            def fresh():
                nonlocal auto_count
                total = len(pinned | set(lanes))
                if total < self.prog.max_lanes or not lanes:
                    lk = ("a", auto_count)
                    auto_count += 1
                    return lk
                autos = [lk for lk in lanes if lk[0] == "a"] or lanes
                return min(autos, key=lambda lk: load[lk])

            for op in ops:
                if op.kind == "barrier":
                    if op.tb_list is None:
                        members = list(lanes) or [("a", 0)]
                    else:
                        members = [("p", t) for t in op.tb_list]
                    self.barrier_members[op] = members
                    for lk in members:
                        use(lk)
                    continue
                acc, recs_of = self.accesses(op)
                if op.tb is not None:
                    lk = ("p", op.tb)
                elif op.kind == "sem_acquire":
                    pending_acquires.append(op)
                    continue
                elif op.kind in ("sem_release", "nop"):
                    lk = self.lane_of[prev] if prev is not None else fresh()
                elif op.channel is not None and op.kind in ("signal", "wait", "flush") and op.channel in home:
                    lk = home[op.channel]
                else:
                    deps = [rec for rec in recs if any(a[0] == rec[0] and _overlap(a[1], a[2], rec[1], rec[2])
                                                       and _conflict(rec[3], a[3]) for a in acc)]
                    dep_lanes = {self.lane_of[rec[4]] for rec in deps}
                    ch = op.channel if op.channel in home else None
                    if ch is not None and (not deps or home[ch] in dep_lanes):
                        lk = home[ch]
                    elif deps:
                        lk = self.lane_of[max(deps, key=lambda rec: rec[4].seq)[4]]
                    else:
                        lk = fresh()
                for a in pending_acquires:
                    self.lane_of[a] = lk
                    use(lk)
                pending_acquires = []
                self.lane_of[op] = lk
                use(lk)
                if op.channel is not None and op.channel not in home and op.kind not in (
                        "switch_reduce", "switch_broadcast"):
                    home[op.channel] = lk
                recs.extend((k, lo, hi, kind, op) for k, lo, hi, kind in recs_of)
                prev = op
            for a in pending_acquires:  # acquires at the very end: the last op's lane
                lk = self.lane_of[prev] if prev is not None else ("a", 0)
                self.lane_of[a] = lk
                use(lk)
            self.rank_lanes[r] = lanes

    # -- step 3: placement with synchronisation

    def place(self):
        self.lanes = {r: {} for r in range(self.n)}
        self.inserted_sems = {r: [] for r in range(self.n)}
        self.occurrences = []
        self.occ_info = {}
        self.pair_sem = {}
        self.barrier_ids = {r: {} for r in range(self.n)}
        per_rank = {}
        for op in self.prog.ops:
            per_rank.setdefault(op.rank, []).append(op)
        for r in range(self.n):
            for lk in self.rank_lanes.get(r, []):
                self.lanes[r][lk] = _Lane(lk)
            self.recs = []  # (key, lo, hi, kind, lane key, tick, op)
            self.sem_rel = {}  # user semaphore -> [(lane key, vc snapshot)]
            self.sem_acq = {}
            ops = per_rank.get(r, [])
            cur_loop = None
            for i, op in enumerate(ops):
                if op.loop is not cur_loop:
                    self._close_loops(r)
                    cur_loop = op.loop
                    if cur_loop is not None:
                        body = [o for o in ops[i:] if o.loop is cur_loop]
                        self._pre_loop_syncs(r, body)
                self._place(r, op)
            self._close_loops(r)

    def _lane(self, r, lk):
        lanes = self.lanes[r]
        if lk not in lanes:
            lanes[lk] = _Lane(lk)
        return lanes[lk]

    def _close_loops(self, r):
        for ln in self.lanes[r].values():
            ln.open = None

    def _append(self, r, lk, e, loop=None):
        """Append e to lane lk (inside its pipeline for `loop` when given)."""
        ln = self._lane(r, lk)
        if loop is not None:
            if ln.open is None or ln.open.loop is not loop:
                pipe = EOp("pipeline", body=[], loop=loop, origin=[f"loop at {getattr(loop, 'where', '?')}"])
                ln.entries.append(pipe)
                ln.open = pipe
            ln.open.body.append(e)
        else:
            ln.open = None
            ln.entries.append(e)
        ln.tick += 1
        ln.load += 1
        if e.name in ("sem_release", "barrier") or (e.name == "signal" and e.ctype == "memory"):
            ln.released = ln.tick
        return ln.tick

    def _snapshot(self, r, lk):
        ln = self._lane(r, lk)
        vc = dict(ln.vc)
        vc[lk] = ln.tick
        return vc

    def _join(self, r, lk, vc):
        ln = self._lane(r, lk)
        for k, v in vc.items():
            if k != lk and ln.vc.get(k, 0) < v:
                ln.vc[k] = v

    def _unsatisfied(self, r, lk, acc, op=None):
        ln = self._lane(r, lk)
        reads_data = op is not None and op.kind in ("copy", "reduce", "put", "get")
        # what of a peer's range, written by a memory put of this lane, needs the put released:
        # a read, and a port put's write (a memory put's own stores land in order)
        after_store = ("r", "w") if op is not None and op.kind == "put" and op.channel is not None \
            and op.channel.channel_type == ChannelType.port else ("r",)
        need = {}
        for rec in self.recs:
            key, lo, hi, kind, rlk, tick, rop = rec
            if rlk == lk:
                # A lane reads back (or port-puts over) its own store into a peer (memory put)
                # only once it has released it: then it needs a release and acquire of its own.
                if not reads_data or kind != "w" or key[0] == r or rop.kind != "put" or rop.channel is None \
                        or rop.channel.channel_type != ChannelType.memory or ln.released >= tick:
                    continue
            elif ln.vc.get(rlk, 0) >= tick:
                continue
            for a in acc:
                if a[0] == key and _overlap(a[1], a[2], lo, hi) and _conflict(kind, a[3]) \
                        and (rlk != lk or a[3] in after_store):
                    if need.get(rlk, (0,))[0] < tick:
                        need[rlk] = (tick, rop, a, kind)
                    break
        return need

    def _sync(self, r, lk, need, op, loop):
        """Order lane lk after the needs: release on each source lane, one acquire here."""
        sems = []
        for src, (tick, rop, a, kind) in sorted(need.items(), key=lambda kv: str(kv[0])):
            key = (r, src, lk)
            sem = self.pair_sem.get(key)
            if sem is None:
                sem = _Sem(r, f"lane {_lk(src)} -> lane {_lk(lk)}")
                self.pair_sem[key] = sem
                self.inserted_sems[r].append(sem)
            what = {"r": "reads", "w": "writes", "pr": "reads packets of", "pw": "writes packets to"}
            why = (f"inserted: {op.describe()} at {op.where} {what[a[3]]} {_range(a)} that "
                   f"{rop.describe()} at {rop.where} {what[kind]} on lane {_lk(src)}")
            src_ln = self._lane(r, src)
            in_loop = loop if (loop is not None and src_ln.open is not None and src_ln.open.loop is loop) else None
            occ = (sem, len(self.occurrences))
            self.occurrences.append(occ)
            self.occ_info[occ] = (r, src, rop, op)
            self._append(r, src, EOp("sem_release", sems=[sem], sync=SyncType.before, origin=[why], occ=occ),
                         in_loop)
            self._join(r, lk, self._snapshot(r, src))
            sems.append((sem, why, occ))
        in_loop = loop if loop is not None else None
        for sem, why, occ in sems:
            self._append(r, lk, EOp("sem_acquire", sems=[sem], sync=SyncType.after, origin=[why], occ=occ),
                         in_loop)

    def _pre_loop_syncs(self, r, body):
        """Before a loop's ops are placed: the syncs they need on ops before the loop."""
        for op in body:
            if op.kind == "barrier":
                continue
            lk = self.lane_of[op]
            need = self._unsatisfied(r, lk, self.accesses(op)[0], op)
            if need:
                self._sync(r, lk, need, op, None)

    def _place(self, r, op):
        loop = op.loop
        if op.kind == "barrier":
            members = self.barrier_members[op]
            bkey = tuple(sorted(members, key=str))
            snap = {}
            for lk in members:
                for k, v in self._snapshot(r, lk).items():
                    snap[k] = max(snap.get(k, 0), v)
            if len(members) == 1:
                self._append(r, members[0], EOp("nop", origin=[f"{op.where} barrier"]), loop)
                return
            for lk in members:
                self._append(r, lk, EOp("barrier", barrier=(bkey, len(members)),
                                        origin=[f"{op.where} barrier"]), loop)
            for lk in members:
                self._join(r, lk, snap)
            return
        lk = self.lane_of[op]
        acc, recs_of = self.accesses(op)
        need = self._unsatisfied(r, lk, acc, op)
        if need:
            self._sync(r, lk, need, op, loop)
        for e in self._split(r, self._lower(op)):
            tick = self._append(r, lk, e, loop)
        if op.kind == "sem_release":
            for s in op.sems:
                self.sem_rel.setdefault(s, []).append((lk, self._snapshot(r, lk)))
        elif op.kind == "sem_acquire":
            for s in op.sems:
                k = self.sem_acq.get(s, 0) + 1
                self.sem_acq[s] = k
                rels = self.sem_rel.get(s, [])
                j = k - s.initial_value
                if 1 <= j <= len(rels) and len({x[0] for x in rels}) == 1:
                    self._join(r, lk, rels[j - 1][1])
        for a in recs_of:
            self.recs.append((a[0], a[1], a[2], a[3], lk, tick, op))

    def _split(self, r, e):
        """A reduction of more sources than an op may list (MAX_REFS), as a chain of
        reductions into its destination."""
        if e.name not in ("re", "rre", "repkt") or len(e.src) <= MAX_REFS:
            return [e]
        out = []
        first, rest = e.src[0], e.src[1:]
        while rest:
            take, rest = rest[:MAX_REFS - 1], rest[MAX_REFS - 1:]
            name = e.name
            if name == "rre" and all(c.rank == r for c in take):
                name = "re"
            out.append(EOp(name, [first] + take, list(e.dst), ctype=e.ctype if name == "rre" else None, tbg=e.tbg,
                           reduce_op=e.reduce_op, origin=list(e.origin), ops=list(e.ops)))
            first = e.dst[0]
        return out

    def _lower(self, op):
        """The EOp of one DSL op (before fusion)."""
        e = self._lower1(op)
        e.ops = [op]
        return e

    def _lower1(self, op):
        org = [f"{op.where} {op.describe()}"]
        k = op.kind
        if k == "copy":
            name = "upkt" if op.from_packet else ("cpkt" if op.to_packet else "copy")
            return EOp(name, [op.src[0]], [op.dst[0]], tbg=op.tbg, origin=org)
        if k == "reduce":
            remote = [c for c in op.src[1:] if c.rank != op.rank]
            name = "repkt" if op.from_packet else ("rre" if remote else "re")
            return EOp(name, list(op.src), [op.dst[0]], ctype="memory" if remote else None, tbg=op.tbg,
                       reduce_op=op.reduce_op, origin=org)
        if k == "put":
            ct = op.channel.channel_type.value
            if op.from_packet:
                name = "rppkt"
            elif op.to_packet:
                name = "ppkt"
            elif op.with_flush:
                name = "pwsf"
            elif op.with_signal:
                name = "pws"
            else:
                name = "put"
            return EOp(name, list(op.src), list(op.dst), channels=[op.channel], ctype=ct, tbg=op.tbg, origin=org)
        if k == "get":
            return EOp("get", list(op.src), list(op.dst), channels=[op.channel], ctype="memory", tbg=op.tbg,
                       origin=org)
        if k in ("signal", "wait"):
            name = ("rlx" if op.relaxed else "") + k
            return EOp(name, channels=[op.channel], ctype=op.channel.channel_type.value, sync=op.sync, origin=org)
        if k == "flush":
            return EOp("flush", channels=[op.channel], ctype="port", sync=op.sync, origin=org)
        if k in ("sem_acquire", "sem_release"):
            return EOp(k, sems=list(op.sems), sync=op.sync, origin=org)
        if k == "nop":
            return EOp("nop", origin=org)
        if k == "switch_reduce":
            return EOp("glre", dst=list(op.dst), ctype="switch", switch=op.channel,
                       switch_index=(op.switch_index,), switch_size=op.switch_size, reduce_op=op.reduce_op,
                       origin=org)
        if k == "switch_broadcast":
            return EOp("gstore", src=list(op.src), ctype="switch", switch=op.channel,
                       switch_index=(op.switch_index,), switch_size=op.switch_size, origin=org)
        raise AssertionError(k)

    # -- step 4: per-lane passes

    def finish_lanes(self):
        for r in range(self.n):
            for ln in self.lanes[r].values():
                ln.entries = self._passes(r, ln.entries)

    def _passes(self, r, entries):
        for e in entries:
            if e.name == "pipeline":
                e.body = self._passes(r, e.body)
        if self.prog.instr_fusion:
            entries = fuse(entries, r)
        out = []
        for e in entries:
            if e.is_sync and e.sync in (SyncType.before, SyncType.both):
                out.append(EOp("nop", origin=["data_sync before " + e.name]))
            out.append(e)
            if e.is_sync and e.sync in (SyncType.after, SyncType.both):
                out.append(EOp("nop", origin=["data_sync after " + e.name]))
        if self.prog.auto_sync:
            out = self._dependency_nops(r, out)
        return collapse_nops(out)

    def _eop_accesses(self, r, e):
        acc = []
        if e.name == "pipeline":
            for x in e.body:
                acc += self._eop_accesses(r, x)
            return acc
        pr_src, pw_dst = _packet_positions(e)
        for i, c in enumerate(e.src):
            acc.append(self._acc(c, "pr" if i in pr_src else "r", i in pr_src, e.tbg))
        for i, c in enumerate(e.dst):
            acc.append(self._acc(c, "pw" if i in pw_dst else "w", i in pw_dst, e.tbg))
        return acc

    def _dependency_nops(self, r, entries):
        out, seen = [], []
        for e in entries:
            if e.name in ("nop", "barrier"):
                seen = []
                out.append(e)
                continue
            acc = [a for a in self._eop_accesses(r, e) if a[3] in ("r", "w")]
            if any(a[0] == b[0] and _overlap(a[1], a[2], b[1], b[2]) and _conflict(b[3], a[3])
                   for a in acc for b in seen):
                out.append(EOp("nop", origin=["a lane reads or overwrites what it touched before"]))
                seen = []
            seen += acc
            out.append(e)
        return out

    # -- step 5: JSON

    def number_lanes(self):
        """Final thread-block ids: pinned lanes keep theirs, the compiler's follow."""
        self.tb_of = {}
        for r in range(self.n):
            keys = list(self.lanes[r])
            pinned = sorted(k[1] for k in keys if k[0] == "p")
            nxt = (max(pinned) + 1) if pinned else 0
            ids = {("p", t): t for t in pinned}
            for k in keys:
                if k[0] == "a":
                    ids[k] = nxt
                    nxt += 1
            self.tb_of[r] = ids

    def to_plan(self):
        prog = self.prog
        self.eop_at = {}
        gpus, prov = [], {}
        for r in range(self.n):
            g, p = self._gpu(r)
            gpus.append(g)
            prov.update(p)
        plan = {
            "name": prog.name,
            "collective": prog.collective.name,
            "protocol": prog.protocol,
            "inplace": prog.collective.inplace,
            "reuse_resources": prog.reuse_resources,
            **getattr(prog.collective, "plan_fields", dict)(),
            "gpus": gpus,
            "num_threads_per_block": prog.num_threads_per_block,
            "use_double_scratch_buffer": prog.use_double_scratch_buffer,
            "buffer_alignment": prog.buffer_alignment,
            "min_message_size": prog.min_message_size,
            "max_message_size": prog.max_message_size,
        }
        return plan, prov

    def _gpu(self, r):
        prog = self.prog
        chans = {}
        gpu_chan_index = {}
        for ch in prog.channels:
            if ch.src_rank == r:
                lst = chans.setdefault(ch.channel_type.value, [])
                gpu_chan_index[ch] = len(lst)
                lst.append(ch.dst_rank)
        switch_index = {}
        switch_entries = []
        for sw in prog.switch_channels:
            if r in sw.ranks:
                switch_index[sw] = len(switch_entries)
                switch_entries.append({"channel_type": "switch", "buffer_type": sw.buffer_type.value,
                                       "rank_groups": [{"size": len(sw.ranks), "ranks": list(sw.ranks)}]})
        sem_ids = {}
        sems = []
        for s in list(prog.semaphores[r]) + self.inserted_sems[r]:
            sem_ids[s] = len(sems)
            sems.append({"init_value": s.initial_value})
        remote = {}  # (rank, type) -> [id, access set]
        remote_order = []
        barrier_ids = {}
        ids = self.tb_of[r]
        nlanes = (max(ids.values()) + 1) if ids else 0
        by_id = {v: k for k, v in ids.items()}
        tbs, prov = [], {}
        for t in range(nlanes):
            lk = by_id.get(t)
            entries = self.lanes[r][lk].entries if lk is not None else []
            tb_ch = {}  # type -> [gpu channel ids]
            tb_rb = {}  # access type -> [gpu remote buffer ids]

            def chan_id(ch, ctype):
                if ctype == "switch":
                    gid = switch_index[ch]
                else:
                    gid = gpu_chan_index[ch]
                lst = tb_ch.setdefault(ctype, [])
                if gid not in lst:
                    lst.append(gid)
                return lst.index(gid)

            def buf_ref(c, access):
                if c.rank == r:
                    return {"type": c.buffer.value, "index": c.index, "size": c.size}
                key = (c.rank, c.buffer.value)
                if key not in remote:
                    remote[key] = [len(remote_order), set()]
                    remote_order.append(key)
                remote[key][1].add(access)
                gid = remote[key][0]
                lst = tb_rb.setdefault(access, [])
                if gid not in lst:
                    lst.append(gid)
                return {"buffer_id": lst.index(gid), "index": c.index, "size": c.size}

            def emit(e, where):
                d = {"name": e.name}
                if e.name == "pipeline":
                    d["iter_context"] = {"unit_size": e.loop.unit, "num_chunks": e.loop.num_chunks}
                    d["ops"] = [emit(x, where + (i,)) for i, x in enumerate(e.body)]
                elif e.name in ("signal", "wait", "rlxsignal", "rlxwait", "flush"):
                    d["channel_ids"] = [chan_id(ch, e.ctype) for ch in e.channels]
                    d["channel_type"] = e.ctype
                elif e.name in ("sem_acquire", "sem_release"):
                    d["semaphore_ids"] = [sem_ids[s] for s in e.sems]
                elif e.name == "barrier":
                    bkey, count = e.barrier
                    if bkey not in barrier_ids:
                        barrier_ids[bkey] = len(barrier_ids)
                    d["barrier_id"] = barrier_ids[bkey]
                    d["num_threadblocks"] = count
                elif e.name in ("glres", "glre", "gstore"):
                    sid = chan_id(e.switch, "switch")
                    if e.name in ("glres", "glre"):
                        d["src_buff"] = [{"switch_channel_id": sid, "index": e.switch_index[0],
                                          "size": e.switch_size}]
                    if e.name == "glres":
                        d["dst_buff"] = [{"switch_channel_id": sid, "index": e.switch_index[1],
                                          "size": e.switch_size}]
                    if e.name == "glre":
                        d["dst_buff"] = [buf_ref(e.dst[0], "memory")]
                    if e.name == "gstore":
                        d["src_buff"] = [buf_ref(e.src[0], "memory")]
                        d["dst_buff"] = [{"switch_channel_id": sid, "index": e.switch_index[0],
                                          "size": e.switch_size}]
                    d["channel_type"] = "switch"
                    if e.reduce_op:
                        d["reduce_op"] = e.reduce_op
                elif e.name != "nop":
                    access = e.ctype if e.ctype in ("memory", "port") else "memory"
                    if e.src:
                        d["src_buff"] = [buf_ref(c, access) for c in e.src]
                    if e.dst:
                        d["dst_buff"] = [buf_ref(c, access) for c in e.dst]
                    if e.ctype == "port" and e.name in ("put", "pws", "pwsf", "ppkt", "rppkt"):
                        d["channel_ids"] = [chan_id(ch, "port") for ch in e.channels]
                    if e.name == "get":
                        d["channel_ids"] = [chan_id(ch, "memory") for ch in e.channels]
                    if e.ctype is not None:
                        d["channel_type"] = e.ctype
                    if e.reduce_op is not None:
                        d["reduce_op"] = e.reduce_op
                    if e.tbg is not None:
                        d["tbg_info"] = {"tb_id": e.tbg[0], "tbg_size": e.tbg[1]}
                prov[(r, t) + where] = list(e.origin)
                self.eop_at[(r, t) + where] = e
                return d

            ops = [emit(e, (i,)) for i, e in enumerate(entries)]
            tb = {"id": t, "ops": ops,
                  "channels": [{"channel_type": ct, "channel_ids": lst} for ct, lst in tb_ch.items()],
                  "remote_buffer_refs": [{"access_channel_type": at, "remote_buffer_ids": lst}
                                         for at, lst in tb_rb.items()]}
            tbs.append(tb)
        gpu = {
            "id": r,
            "input_chunks": self.ic[r],
            "output_chunks": self.oc[r],
            "scratch_chunks": prog.scratch_chunks[r],
            "threadblocks": tbs,
            "channels": [{"channel_type": ct, "connected_to": lst} for ct, lst in chans.items()] + switch_entries,
            "remote_buffers": [{"rank": k[0], "type": k[1],
                                "access_channel_types": sorted(remote[k][1])} for k in remote_order],
            "semaphores": sems,
        }
        return gpu, prov


def _lk(lk):
    return f"tb{lk[1]}" if lk[0] == "p" else f"auto{lk[1]}"


def _range(a):
    (rank, space), lo, hi = a[0], a[1], a[2]
    names = {"i": "input", "o": "output", "s": "scratch", "m": "input/output"}
    return f"rank {rank}'s {names[space]} chunks [{_fmt(lo)}, {_fmt(hi)})"


def _fmt(x):
    return str(x) if isinstance(x, int) or getattr(x, "denominator", 1) != 1 else str(int(x))


def _packet_positions(e):
    """Positions of src and dst refs of an EOp that are LL packet regions."""
    ns, nd = len(e.src), len(e.dst)
    if e.name == "ppkt":
        return (set(range(ns)) if e.ctype == "port" else set()), set(range(nd))
    if e.name == "rppkt":
        return set(range(ns)), set(range(nd))
    if e.name == "cpkt":
        return set(), {0}
    if e.name == "upkt":
        return {0}, set()
    if e.name == "repkt":
        return set(range(1, ns)), set()
    if e.name == "respkt":
        return set(range(1, ns)), set(range(1, nd))
    if e.name == "recpkt":
        return set(range(1, ns)), {1}
    if e.name == "recspkt":
        return set(range(1, ns)), set(range(1, nd))
    return set(), set()


# -- fusion ------------------------------------------------------------------------------------

MAX_REFS = 8  # per list: 0.9 gives thread i channel i of at most 8, and lists 10 refs
MAX_CHANNELS = 8
MAX_SEMS = 16


def _fuse2(a, b, r):
    """The fusion of consecutive ops a, b of one lane, or None."""
    same = a.tbg == b.tbg
    if a.name == b.name and a.name in ("put", "pws", "pwsf", "ppkt") and same and a.ctype == b.ctype:
        if a.src[0].size == b.src[0].size and len(a.dst) + len(b.dst) <= MAX_REFS:
            if a.ctype != "memory" or a.name == "ppkt" or all(
                    c.buffer == a.src[0].buffer for c in b.src):
                return EOp(a.name, a.src + b.src, a.dst + b.dst, channels=a.channels + b.channels, ctype=a.ctype,
                           tbg=a.tbg, origin=a.origin + b.origin, ops=a.ops + b.ops)
    if a.name == b.name == "get" and same and a.src[0].size == b.src[0].size \
            and len(a.dst) + len(b.dst) <= MAX_REFS:
        return EOp("get", a.src + b.src, a.dst + b.dst, channels=a.channels + b.channels, ctype=a.ctype, tbg=a.tbg,
                   origin=a.origin + b.origin, ops=a.ops + b.ops)
    if a.name == b.name == "rppkt" and same and a.ctype == b.ctype and a.src == b.src \
            and len(a.dst) + len(b.dst) <= MAX_REFS:
        return EOp("rppkt", a.src, a.dst + b.dst, channels=a.channels + b.channels, ctype=a.ctype, tbg=a.tbg,
                   origin=a.origin + b.origin, ops=a.ops + b.ops)
    if a.name == b.name and a.name in ("re", "rre", "repkt") and same and a.src[0] == b.src[0] \
            and a.dst == b.dst and a.reduce_op == b.reduce_op and len(a.src) + len(b.src) - 1 <= MAX_REFS:
        return EOp(a.name, a.src + b.src[1:], a.dst, ctype=a.ctype, tbg=a.tbg, reduce_op=a.reduce_op,
                   origin=a.origin + b.origin, ops=a.ops + b.ops)
    if a.name in ("re", "res", "rre", "rres") and b.name == "put" and b.ctype == "memory" and same \
            and len(b.src) == 1 and b.src[0] == a.dst[0] and len(a.dst) + len(b.dst) <= MAX_REFS:
        name = {"re": "res", "res": "res", "rre": "rres", "rres": "rres"}[a.name]
        return EOp(name, a.src, a.dst + b.dst, ctype="memory", tbg=a.tbg, reduce_op=a.reduce_op,
                   origin=a.origin + b.origin, ops=a.ops + b.ops)
    if a.name in ("repkt", "respkt") and b.name == "ppkt" and b.ctype == "memory" and same \
            and len(b.src) == 1 and b.src[0] == a.dst[0] and len(a.dst) + len(b.dst) <= MAX_REFS:
        return EOp("respkt", a.src, a.dst + b.dst, ctype="memory", tbg=a.tbg, reduce_op=a.reduce_op,
                   origin=a.origin + b.origin, ops=a.ops + b.ops)
    if a.name == "repkt" and b.name == "cpkt" and same and b.src[0] == a.dst[0]:
        return EOp("recpkt", a.src, a.dst + b.dst, ctype=a.ctype, tbg=a.tbg, reduce_op=a.reduce_op, pkt_dst=1,
                   origin=a.origin + b.origin, ops=a.ops + b.ops)
    if a.name in ("recpkt", "recspkt") and b.ctype == "memory" and same and len(b.src) == 1 and (
            (b.name == "ppkt" and b.src[0] == a.dst[0]) or (b.name == "rppkt" and b.src[0] == a.dst[1])) \
            and len(a.dst) + len(b.dst) <= MAX_REFS:
        return EOp("recspkt", a.src, a.dst + b.dst, ctype="memory", tbg=a.tbg, reduce_op=a.reduce_op, pkt_dst=1,
                   origin=a.origin + b.origin, ops=a.ops + b.ops)
    if a.name == b.name and a.name in ("signal", "wait", "rlxsignal", "rlxwait", "flush") \
            and a.ctype == b.ctype and not set(map(id, a.channels)) & set(map(id, b.channels)) \
            and len(a.channels) + len(b.channels) <= MAX_CHANNELS:
        return EOp(a.name, channels=a.channels + b.channels, ctype=a.ctype, sync=a.sync | b.sync,
                   origin=a.origin + b.origin, ops=a.ops + b.ops)
    if a.name == b.name and a.name in ("sem_acquire", "sem_release") \
            and not set(map(id, a.sems)) & set(map(id, b.sems)) and len(a.sems) + len(b.sems) <= MAX_SEMS:
        return EOp(a.name, sems=a.sems + b.sems, sync=a.sync | b.sync, origin=a.origin + b.origin, ops=a.ops + b.ops)
    if a.name == "glre" and b.name == "gstore" and a.switch is b.switch and a.switch_size == b.switch_size \
            and b.src[0] == a.dst[0]:
        return EOp("glres", ctype="switch", switch=a.switch, switch_index=(a.switch_index[0], b.switch_index[0]),
                   switch_size=a.switch_size, reduce_op=a.reduce_op, origin=a.origin + b.origin, ops=a.ops + b.ops)
    return None


def fuse(entries, r):
    out = []
    for e in entries:
        if out and all(op.fuse for op in out[-1].ops + e.ops):  # no_fusion's ops stay apart
            f = _fuse2(out[-1], e, r)
            if f is not None:
                out[-1] = f
                continue
        out.append(e)
    return out


def collapse_nops(entries):
    """One nop where several meet; none right after a barrier, nor right before one
    unless the program asked for it (rank.barrier of one lane): a barrier syncs the
    thread block too."""
    out = []
    for e in entries:
        if e.name == "nop" and out and out[-1].name in ("nop", "barrier"):
            if out[-1].name == "nop" and _asked(e):
                out[-1] = e
            continue
        if e.name == "barrier" and out and out[-1].name == "nop" and not _asked(out[-1]):
            out.pop()
        out.append(e)
    return out


def _asked(e):
    """Whether nop e is one the program wrote, not one the compiler added."""
    return any(op.kind == "nop" for op in e.ops)


# -- instances -------------------------------------------------------------------------------


def replicate(plan, prov, instances, policy):
    """MSCCL++'s instances: every lane, channel, semaphore and barrier I times; chunk
    refs of instance k at index·I + k·size (interleaved) or unchanged (none)."""
    if instances == 1:
        return plan, prov
    inst = instances

    def shift_ref(ref, k):
        ref = dict(ref)
        if policy == ReplicationPolicy.interleaved:
            ref["index"] = ref["index"] * inst + k * ref["size"]
        return ref

    def shift_op(op, k):
        op = copy.deepcopy(op)
        for lst in ("src_buff", "dst_buff"):
            if lst in op:
                op[lst] = [shift_ref(x, k) for x in op[lst]]
        if "semaphore_ids" in op:
            op["semaphore_ids"] = [s * inst + k for s in op["semaphore_ids"]]
        if "barrier_id" in op:
            op["barrier_id"] = op["barrier_id"] * inst + k
        if "ops" in op:
            op["ops"] = [shift_op(x, k) for x in op["ops"]]
        return op

    new_prov = {}
    for g in plan["gpus"]:
        r = g["id"]
        mult = inst if policy == ReplicationPolicy.interleaved else 1
        g["input_chunks"] *= mult
        g["output_chunks"] *= mult
        g["scratch_chunks"] *= mult
        chans = []
        for ch in g["channels"]:
            if ch["channel_type"] in ("memory", "port"):
                ch = dict(ch, connected_to=[p for p in ch["connected_to"] for _ in range(inst)])
                chans.append(ch)
        for ch in g["channels"]:
            if ch["channel_type"] == "switch":
                chans += [copy.deepcopy(ch) for _ in range(inst)]
        g["channels"] = chans
        g["semaphores"] = [s for s in g["semaphores"] for _ in range(inst)]
        tbs = []
        for tb in g["threadblocks"]:
            for k in range(inst):
                t = copy.deepcopy(tb)
                t["id"] = tb["id"] * inst + k
                for ch in t["channels"]:
                    ch["channel_ids"] = [c * inst + k for c in ch["channel_ids"]]
                t["ops"] = [shift_op(op, k) for op in tb["ops"]]
                tbs.append(t)
                for key, v in prov.items():
                    if key[0] == r and key[1] == tb["id"]:
                        new_prov[(r, t["id"]) + key[2:]] = v
        g["threadblocks"] = tbs
    return plan, new_prov


def _strip(entries, drop):
    """A copy of a lane's entries without the inserted release/acquire pairs in drop."""
    out = []
    for e in entries:
        if e.occ is not None and e.occ in drop:
            continue
        if e.name == "pipeline":
            e = copy.copy(e)
            e.body = _strip(e.body, drop)
        out.append(e)
    return out


def _used_sems(entries, acc):
    for e in entries:
        if e.name in ("sem_acquire", "sem_release"):
            acc.update(e.sems)
        if e.body:
            _used_sems(e.body, acc)
    return acc


def _build(c, prog, placed, drop):
    for r in range(c.n):
        for lk, ln in c.lanes[r].items():
            ln.entries = _strip(placed[r][lk], drop)
    saved = c.inserted_sems
    used = set()
    for r in range(c.n):
        for ln in c.lanes[r].values():
            _used_sems(ln.entries, used)
    c.inserted_sems = {r: [s for s in lst if s in used] for r, lst in saved.items()}
    try:
        c.finish_lanes()
        c.number_lanes()
        plan, prov = c.to_plan()
    finally:
        c.inserted_sems = saved
    return replicate(plan, prov, prog.instances, prog.replication_policy)


PRUNE_ONE_BY_ONE = 64  # kept release/acquire pairs each tried alone when no more than this


def tb_of_op(c, r, op):
    lk = c.lane_of.get(op)
    return c.tb_of[r].get(lk) if lk is not None else None


def compile_program(prog):
    from .checker import PlanCheckError, check_plan

    c = Compiler(prog)
    root = getattr(prog.collective, "root", None)  # of broadcast and reduce: the checker's spec
    c.pair_channels()
    c.choose_lanes()
    c.place()
    placed = {r: {lk: list(ln.entries) for lk, ln in c.lanes[r].items()} for r in range(c.n)}
    inserted = list(c.occurrences)
    drop = set()
    prune = prog.prune_syncs
    if prune == "auto":
        prune = all(op.tb is not None or op.kind == "barrier" for op in prog.ops)
    if prog.check and prune and inserted:
        # Release/acquire pairs the compiler added that the plan does not need (the order
        # already comes through another rank, or a lane's own signal publishes its
        # slice). Without any of them the checker lists the racing pairs of ops; a
        # pair is kept when one of those races joins its op to its source lane. The
        # result is checked; should it still race, pairs are tried one by one.
        def ok(d):
            plan, prov = _build(c, prog, placed, d)
            try:
                check_plan(plan, provenance=prov, root=root)
                return True
            except PlanCheckError:
                return False

        plan0, _ = _build(c, prog, placed, set(inserted))
        try:
            races = check_plan(plan0, collect_races=True).races
        except PlanCheckError:
            races = None
        if races is not None:
            tb_ids = c.tb_of
            touched = set()
            for x, y in races:
                for a, b in ((x, y), (y, x)):
                    ea = c.eop_at.get((a[0], a[1]) + tuple(a[2][:2] if len(a[2]) > 1 else a[2]))
                    if ea is not None:
                        for o in ea.ops:
                            # a race with another rank: the op's order after its own
                            # rank's waits is missing, from whichever lane
                            touched.add((o, b[1] if a[0] == b[0] else "*"))
            keep = set()
            for occ in inserted:
                r, src, rop, op = c.occ_info[occ]
                if (op, tb_ids[r].get(src)) in touched or (rop, tb_of_op(c, r, op)) in touched \
                        or (op, "*") in touched:
                    keep.add(occ)
            trial = set(inserted) - keep
            if ok(trial):
                drop = trial
                if len(keep) <= PRUNE_ONE_BY_ONE:  # then each kept pair is proven needed
                    for s in [o for o in inserted if o in keep]:
                        if ok(drop | {s}):
                            drop.add(s)
            else:
                races = None
        if races is None:
            for s in inserted:
                if ok(drop | {s}):
                    drop.add(s)
    plan, prov = _build(c, prog, placed, drop)
    if prog.check:
        check_plan(plan, provenance=prov, root=root)
    return plan, prov
