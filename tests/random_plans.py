"""Random valid MSCCL++ 0.9 execution plans, seeded, for checking the Go executor
against the reference interpreter (plan_reference.py) on plans nobody wrote by hand.

    from random_plans import generate, make_buffers, reference

    rp = generate(seed=7)            # or generate(7, nranks=3)
    rp.plan                          # the plan's JSON (a dict)
    send, recv = make_buffers(rp, rank)
    want = reference(rp)             # [(send bytes, recv bytes)] per rank after the call

A plan has 2 to 5 ranks, 1 to 4 lanes per rank, memory and port channels, random
input, output and scratch chunk counts, in place (one buffer, or allgather's and
reducescatter's conventions) or not, Simple or LL, and random ops over random chunk
ranges: put (memory and port), pws, pwsf, get (source and destination at one
offset: 0.9 swaps them), copy, re, res, rre, rres (a destination may be one of the
sources), signal/wait and rlxsignal/rlxwait (fused over several channels too),
flush, barriers among a rank's lanes, sem_acquire/sem_release, nop, pipelines over
windows (on one lane, or a pipelined put on one rank feeding a pipeline that waits
window by window on another), thread-block groups (tbg_info), and in LL plans the
packet ops cpkt, ppkt (memory and port), rppkt, upkt, repkt, respkt, recpkt and
recspkt on packet regions in scratch.

Every plan is deterministic: its result does not depend on how lanes and ranks
interleave, so the interpreter's answer is THE answer. The plan is built as a
sequence of steps; a step places one op (or a thread-block group, or a pair of
pipelines) on a random lane, after the synchronisation it needs. The generator
keeps a vector clock per lane (what each lane's ops are ordered after, through
signal/wait, barriers and semaphores) and a log of every byte range each op
read or wrote. Before an op touches a range that an op of another lane wrote
(RAW, WAW), or writes one that another lane read (WAR), without being ordered
after it, it inserts an edge: a signal on the earlier lane and a wait on this one
(across ranks, over memory or port channels), or a barrier or a semaphore
release/acquire (within a rank). Edges that only order reads before writes may be
relaxed (rlxsignal, rlxwait); the others are not. Stores into peers' buffers (put,
res, rres) count as done only once their lane releases them, as the interpreter
models them (a memory signal, a barrier or a sem_release; a port channel's signal,
pws or flush for port puts, whose sources count as read only then too): a lane
that reads back what it stored into a peer releases it first (flush, or a
semaphore it releases and acquires itself). LL packets need no edge: a reader polls
the flags. Packet regions are written once per call, in a part of scratch that no
plain op uses, and read only once written, so that a flag is never stale.
Finally every access of a peer's input or output buffer is ordered before some lane
of that peer, which may return from its call as soon as its own lanes end.

Deadlock freedom: every edge's signal (release, packet store) is emitted before its
wait (acquire, packet read) in the step order, every lane's channel of a pair is
used by one signalling lane and one waiting lane (semaphores likewise), and a
barrier id always has the same lanes, all reaching it in one step. Running the ops
in step order therefore never blocks, and since waits only become possible and
never impossible, no schedule blocks forever.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from plan_reference import run_plan

MAX_OPS = 64  # MaxOpsPerLane, counting a pipeline's inner ops
BUDGET = 44  # no new steps once a lane carries this many: room for the edges that follow
LIST_MAX = 16  # channels, remote buffers per type per lane
MAX_OP_CHANNELS = 8
MAX_OP_SEMS = 16

# A reduction whose dst[0] is one of its sources src[k], k >= 2. MSCCL++ reads every
# source of an element before it stores it, so this is well-defined (the executor
# once folded sources into dst[0] one at a time; fixed).
ALIAS_LATER_SOURCES = True
# A lane that reaches a peer's scratch through remote_buffers while the two ranks
# share no channel. MSCCL++ exchanges registered memory over its bootstrap, channel
# or not (the executor once mapped only channel peers' segments; fixed). Off: the
# generator adds an unused memory channel pair between such ranks.
REMOTE_SCRATCH_WITHOUT_CHANNEL = True
# A memory ppkt whose sources have different buffer types: each source its own
# buffer (0.9 packs every source from src_buff[0]'s, docs/plan-format.md 7.3; the
# executor once did too; fixed). Off: one buffer type for all sources.
MIXED_PPKT_SOURCES = True

__all__ = ["RandomPlan", "generate", "make_buffers", "reference", "count_ops"]


@dataclass
class RandomPlan:
    """A generated plan and how to call it.

    ``mode``: "oop" (two buffers), "one" (one buffer), "allgather" or
    "reducescatter" (the send buffer is the receive buffer's slot rank, or the
    reverse). ``op`` is the call's operator, or None: then each reduction's own
    reduce_op counts and ``interp_op`` ("sum") is the interpreter's default.
    """

    plan: dict
    seed: int
    nranks: int
    mode: str
    in_bytes: int
    out_bytes: int
    dtype: str
    op: str | None
    steps: int

    @property
    def interp_op(self):
        return self.op or "sum"


class _Skip(Exception):
    """A step cannot be placed (no free range, a list is full): try another."""


class _Rec:
    """One access of a byte range: by lane, at its op number t (1-based), 'r', 'w',
    'pw' (packet store) or 'pr' (packet poll); rel: when it counts as done (None
    while its lane has not released it)."""

    __slots__ = ("lane", "t", "kind", "lo", "hi", "rel")

    def __init__(self, lane, t, kind, lo, hi, rel):
        self.lane, self.t, self.kind, self.lo, self.hi, self.rel = lane, t, kind, lo, hi, rel


class _Acc:
    """An access an op makes: owner rank, space, bytes [lo, hi), kind, pending
    ('mem', ('port', pair) or None), whether it is a destination."""

    __slots__ = ("owner", "space", "lo", "hi", "kind", "pend", "dst", "remote")

    def __init__(self, owner, space, lo, hi, kind, pend, dst, remote):
        self.owner, self.space, self.lo, self.hi = owner, space, lo, hi
        self.kind, self.pend, self.dst, self.remote = kind, pend, dst, remote


@dataclass
class _ARef:
    """An abstract ref, resolved per lane: owner None for a local ref."""

    buf: str
    index: int
    size: int
    kind: str  # 'r', 'w', 'pw', 'pr'
    owner: int | None = None
    access: str = "memory"
    packet: bool = False
    pend: str | None = None  # 'mem' or 'port' (resolved to the ref's port channel)


@dataclass
class _AOp:
    name: str
    src: list
    dst: list
    ctype: str | None = None
    port_per_dst: bool = False  # channel_ids: one port channel per destination
    alias: bool = False  # a destination may be exactly one of the sources
    extra: dict | None = None
    fold: bool = False  # a reduction of plain sources (see ALIAS_LATER_SOURCES)


class _Lane:
    def __init__(self, g, rank, lane):
        self.g, self.rank, self.lane = g, rank, lane
        self.ops = []
        self.weight = 0
        self.chans = {"memory": [], "port": []}  # channel pair ids, in lane order
        self.bufs = {"memory": [], "port": []}  # rank-level remote buffer ids (before shuffling)
        self.pend_mem = []
        self.pend_port = {}  # pair id -> [records]
        self.private_sem = None


class _Gen:
    def __init__(self, seed, nranks=None):
        rng = self.rng = random.Random(seed)
        self.seed = seed
        n = self.n = nranks or rng.randint(2, 5)
        self.ll = rng.random() < 0.4
        self.align = rng.choice([8, 16, 32] if self.ll else [4, 8, 16, 16, 32])
        self.units = rng.randint(1, 3)  # alignment units per chunk
        self.C = self.align * self.units
        self.mode = rng.choice(["oop", "oop", "oop", "one", "one", "allgather", "reducescatter"])
        if self.mode == "oop":
            self.collective = rng.choice(["custom", "test", "allreduce", "alltoall", "allgather", "reducescatter"])
            self.ic, self.oc = rng.randint(1, 6), rng.randint(1, 6)
        elif self.mode == "one":
            self.collective = rng.choice(["allreduce", "custom", "alltoall", "test"])
            self.ic = self.oc = rng.randint(1, 6)
        elif self.mode == "allgather":
            self.collective = "allgather"
            self.ic = rng.randint(1, 2)
            self.oc = n * self.ic
        else:
            self.collective = "reducescatter"
            self.oc = rng.randint(1, 2)
            self.ic = n * self.oc
        self.in_bytes, self.out_bytes = self.ic * self.C, self.oc * self.C
        # Scratch: in LL plans chunks [0, pz) hold packets (bytes [0, 2·pz·C)) and
        # data chunks start at 2·pz, so that no plain op touches a packet's bytes.
        self.pz, self.dz0, self.sc = [], [], []
        for _ in range(n):
            if self.ll:
                p, d = rng.randint(0, 4), rng.randint(0, 3)
                self.pz.append(p)
                self.dz0.append(2 * p)
                self.sc.append(2 * p + d)
            else:
                self.pz.append(0)
                self.dz0.append(0)
                self.sc.append(rng.choice([0, 1, 2, 3, 4, 5]))
        self.double = rng.random() < 0.2
        self.dtype = rng.choice(["int32", "float32"])
        self.op = rng.choice([None, None, "sum", "prod", "min", "max"])
        self.lanes = []
        self.by_rank = []
        for r in range(n):
            ls = []
            for li in range(rng.randint(1, 4)):
                ln = _Lane(len(self.lanes), r, li)
                self.lanes.append(ln)
                ls.append(ln.g)
            self.by_rank.append(ls)
        G = len(self.lanes)
        self.vc = [[0] * G for _ in range(G)]
        self.xvc = [[0] * G for _ in range(G)]
        self.recs = {}
        self.pairs = []  # pair id -> (kind, g1, g2)
        self.pair_of = {}
        self.rank_chans = {(r, k): [] for r in range(n) for k in ("memory", "port")}  # [(peer, pair id)]
        self.rbufs = [[] for _ in range(n)]  # rank-level remote buffers: [owner, buf, set(access)]
        self.sems = [[] for _ in range(n)]  # init values
        self.sem_of = {}
        self.barrier_ids = [{} for _ in range(n)]
        self.pkt_used = [set() for _ in range(n)]  # packet chunks stored to
        self.pkt_written = [[] for _ in range(n)]  # (index, size) regions wholly stored
        self.steps = 0

    # -- layout ------------------------------------------------------------------------

    def _space(self, rank, buf, off):
        if buf == "s":
            return "s", off
        if self.mode == "oop":
            return buf, off
        if self.mode == "one":
            return "m", off
        if self.mode == "allgather":
            return "m", off + (rank * self.in_bytes if buf == "i" else 0)
        return "m", off + (rank * self.out_bytes if buf == "o" else 0)

    def _slice(self, length, t, g):
        def at(k):
            nel = length // self.align
            q, rem = divmod(nel, g)
            return (k * q + min(k, rem)) * self.align
        return at(t), at(t + 1) - at(t)

    def _acc(self, owner, buf, index, size, kind, pend, dst, remote, tbg, packet):
        off, ln = index * self.C, size * self.C
        if tbg is not None:
            a, ln = self._slice(ln, *tbg)
            off += a
        if packet:
            off, ln = 2 * off, 2 * ln
        space, lo = self._space(owner, buf, off)
        return _Acc(owner, space, lo, lo + ln, kind, pend, dst, remote)

    def _zone(self, r, buf, packet=False):
        if buf == "i":
            return 0, self.ic
        if buf == "o":
            return 0, self.oc
        if packet:
            return 0, self.pz[r]
        return self.dz0[r], self.sc[r]

    def _bufs(self, r):
        return ["i", "o"] + (["s"] if self.sc[r] > self.dz0[r] else [])

    def _size(self):
        return self.rng.choice((1, 1, 1, 2, 2, 3))

    def _pick(self, r, buf, size):
        lo, hi = self._zone(r, buf)
        if hi - lo < size:
            raise _Skip
        return self.rng.randint(lo, hi - size)

    def _local(self, r, size, kind, bufs=None):
        buf = self.rng.choice(bufs or self._bufs(r))
        return _ARef(buf, self._pick(r, buf, size), size, kind)

    def _remote(self, r, size, kind, access="memory", pend=None, q=None):
        q = self._peer(r) if q is None else q
        buf = self.rng.choice(self._bufs(q))
        return _ARef(buf, self._pick(q, buf, size), size, kind, owner=q, access=access, pend=pend)

    def _peer(self, r):
        return self.rng.choice([q for q in range(self.n) if q != r])

    def _free_pkt(self, r, size):
        free = [k for k in range(self.pz[r] - size + 1)
                if not any(c in self.pkt_used[r] for c in range(k, k + size))]
        if not free:
            raise _Skip
        return self.rng.choice(free)

    def _written_pkt(self, r, size=None):
        regions = [(i, s) for i, s in self.pkt_written[r] if size is None or s >= size]
        if not regions:
            raise _Skip
        i, s = self.rng.choice(regions)
        size = size or self.rng.randint(1, s)
        return self.rng.randint(i, i + s - size), size

    # -- lists -------------------------------------------------------------------------

    def _pair(self, kind, g1, g2):
        """The channel pair of lanes g1 and g2 (other ranks) of a type, made on first use."""
        key = (kind, min(g1, g2), max(g1, g2))
        pid = self.pair_of.get(key)
        if pid is None:
            l1, l2 = self.lanes[g1], self.lanes[g2]
            assert l1.rank != l2.rank
            if len(l1.chans[kind]) >= LIST_MAX or len(l2.chans[kind]) >= LIST_MAX:
                raise AssertionError("a lane has a channel pair with every lane of the other ranks")
            pid = len(self.pairs)
            self.pairs.append(key)
            self.pair_of[key] = pid
            self.rank_chans[(l1.rank, kind)].append((l2.rank, pid))
            self.rank_chans[(l2.rank, kind)].append((l1.rank, pid))
            l1.chans[kind].append(pid)
            l2.chans[kind].append(pid)
        return pid

    def _other(self, pid, g):
        _, a, b = self.pairs[pid]
        return b if a == g else a

    def _lid(self, g, kind, pid):
        return self.lanes[g].chans[kind].index(pid)

    def _port_to(self, g, q):
        """A port channel pair of lane g to some lane of rank q."""
        have = [pid for pid in self.lanes[g].chans["port"] if self.lanes[self._other(pid, g)].rank == q]
        if have and self.rng.random() < 0.7:
            return self.rng.choice(have)
        return self._pair("port", g, self.rng.choice(self.by_rank[q]))

    def _rbuf(self, g, owner, buf, access):
        """Lane-local buffer_id of a remote buffer (owner, buf) with this access type."""
        lane = self.lanes[g]
        lst = lane.bufs[access]
        rbs = self.rbufs[lane.rank]
        mine = [i for i, b in enumerate(lst) if rbs[b][0] == owner and rbs[b][1] == buf]
        if mine and self.rng.random() < 0.85:
            return self.rng.choice(mine)
        distinct = {(rbs[b][0], rbs[b][1]) for b in lst}
        room = LIST_MAX - len(lst) - (3 * (self.n - 1) - len(distinct | {(owner, buf)}))
        if room <= 0:
            if mine:
                return self.rng.choice(mine)
            raise AssertionError("remote buffer list full")
        cands = [i for i, b in enumerate(rbs) if b[0] == owner and b[1] == buf and access in b[2] and i not in lst]
        if cands and self.rng.random() < 0.7:
            rid = self.rng.choice(cands)
        else:
            acc = {access} if self.rng.random() < 0.7 else {"memory", "port"}
            rid = len(rbs)
            rbs.append([owner, buf, acc])
        lst.append(rid)
        return len(lst) - 1

    def _sem(self, g1, g2):
        """The semaphore lane g1 releases for lane g2 (one rank); a new one may start
        above 0, and g2 then takes its initial value at once."""
        key = (g1, g2)
        sid = self.sem_of.get(key)
        if sid is None:
            r = self.lanes[g1].rank
            v = self.rng.choice([0, 0, 0, 1, 2])
            sid = len(self.sems[r])
            self.sems[r].append(v)
            self.sem_of[key] = sid
            for _ in range(v):
                self._emit(g2, {"name": "sem_acquire", "semaphore_ids": [sid]})
        return sid

    def _barrier_id(self, r, members):
        ids = self.barrier_ids[r]
        key = frozenset(members)
        if key not in ids:
            ids[key] = len(ids)
            assert ids[key] < 15  # 15 is for barriers of one thread block
        return ids[key]

    # -- emitting and ordering -----------------------------------------------------------

    def _emit(self, g, op, weight=1):
        lane = self.lanes[g]
        lane.ops.append(op)
        lane.weight += weight
        t = len(lane.ops)
        self.vc[g][g] = t
        self.xvc[g][g] = t
        return t

    def _rel_mem(self, g, t):
        lane = self.lanes[g]
        for rec in lane.pend_mem:
            rec.rel = t
        lane.pend_mem = []

    def _rel_port(self, g, pid, t):
        for rec in self.lanes[g].pend_port.pop(pid, []):
            rec.rel = t

    def _join(self, dst, vc, xvc):
        if vc is not None:
            self.vc[dst] = [max(a, b) for a, b in zip(self.vc[dst], vc)]
        self.xvc[dst] = [max(a, b) for a, b in zip(self.xvc[dst], xvc)]

    def _flush(self, g):
        """Release lane g's port stores (and port sources) with flush ops."""
        lane = self.lanes[g]
        pids = sorted(lane.pend_port)
        for k in range(0, len(pids), MAX_OP_CHANNELS):
            chunk = pids[k:k + MAX_OP_CHANNELS]
            t = self._emit(g, {"name": "flush", "channel_ids": [self._lid(g, "port", p) for p in chunk],
                               "channel_type": "port"})
            for p in chunk:
                self._rel_port(g, p, t)

    def _self_fence(self, g):
        lane = self.lanes[g]
        if lane.pend_port:
            self._flush(g)
        if lane.pend_mem:
            if lane.private_sem is None:
                lane.private_sem = len(self.sems[lane.rank])
                self.sems[lane.rank].append(0)
            t = self._emit(g, {"name": "sem_release", "semaphore_ids": [lane.private_sem]})
            self._rel_mem(g, t)
            self._emit(g, {"name": "sem_acquire", "semaphore_ids": [lane.private_sem]})

    def _needs(self, m, accs):
        """Lanes whose earlier accesses the accesses accs of lane m must be ordered
        after: lane -> 'full' (after a store) or 'x' (after a read: a relaxed edge does)."""
        need = {}
        vc, xvc = self.vc[m], self.xvc[m]
        for a in accs:
            if a.kind == "pw":
                for rec in self.recs.get((a.owner, a.space), ()):
                    assert rec.hi <= a.lo or rec.lo >= a.hi, "a packet region stored to twice"
                continue
            covered = []
            for rec in self.recs.get((a.owner, a.space), ()):
                if rec.hi <= a.lo or rec.lo >= a.hi:
                    continue
                if rec.kind in ("r", "pr"):
                    if a.kind in ("r", "pr"):
                        continue
                    if rec.rel is None or xvc[rec.lane] < rec.rel:
                        need.setdefault(rec.lane, "x")
                    continue
                if rec.kind == "pw" and a.kind == "pr":
                    covered.append((rec.lo, rec.hi))
                    continue
                if rec.rel is None or vc[rec.lane] < rec.rel:
                    need[rec.lane] = "full"
            if a.kind == "pr":
                at = a.lo
                for lo, hi in sorted(covered):
                    if lo <= at:
                        at = max(at, hi)
                assert at >= a.hi, "a packet poll of a region nobody stores to"
        return need

    def _sync_for(self, m, accs):
        for _ in range(3):
            need = self._needs(m, accs)
            if not need:
                return
            self._satisfy(m, need)
        raise AssertionError(f"lane {m}: edges did not order the op: {self._needs(m, accs)}")

    def _satisfy(self, m, need):
        rng = self.rng
        r = self.lanes[m].rank
        if m in need:
            self._self_fence(m)
            del need[m]
        same = [g for g in need if self.lanes[g].rank == r]
        cross = [g for g in need if self.lanes[g].rank != r]
        rng.shuffle(cross)
        if same:
            if rng.random() < 0.4:
                members = set(same) | {m} | {g for g in self.by_rank[r] if rng.random() < 0.3}
                self._barrier(r, members)
            else:
                self._sem_edges(same, m)
        if cross:
            self._edges([(g, need[g] == "full") for g in cross], m)

    def _edges(self, sources, m):
        """Signal on each source lane (g, full), then wait on m, fusing waits."""
        rng = self.rng
        waits = {}
        joins = []
        for g, full in sources:
            self._flush(g)
            kind = "port" if rng.random() < 0.25 else "memory"
            if full and self.lanes[g].pend_mem:
                kind = "memory"
            rs = not full and rng.random() < 0.5
            rw = not full and rng.random() < 0.5
            pid = self._pair(kind, g, m)
            t = self._emit(g, {"name": "rlxsignal" if rs else "signal", "channel_ids": [self._lid(g, kind, pid)],
                               "channel_type": kind})
            if kind == "memory" and not rs:
                self._rel_mem(g, t)
            if kind == "port":
                self._rel_port(g, pid, t)
            waits.setdefault((kind, "rlxwait" if rw else "wait"), []).append(self._lid(m, kind, pid))
            joins.append((list(self.vc[g]) if not (rs or rw) else None, list(self.xvc[g])))
        for (kind, name), ids in waits.items():
            ids = list(ids)
            while ids:
                k = len(ids) if rng.random() < 0.7 else 1
                k = min(k, MAX_OP_CHANNELS)
                self._emit(m, {"name": name, "channel_ids": ids[:k], "channel_type": kind})
                ids = ids[k:]
        for vc, xvc in joins:
            self._join(m, vc, xvc)

    def _sem_edges(self, sources, m):
        joins, sids = [], []
        for g in sources:
            self._flush(g)
            sid = self._sem(g, m)
            t = self._emit(g, {"name": "sem_release", "semaphore_ids": [sid]})
            self._rel_mem(g, t)
            joins.append((list(self.vc[g]), list(self.xvc[g])))
            sids.append(sid)
        if self.rng.random() < 0.6:
            self._emit(m, {"name": "sem_acquire", "semaphore_ids": sids[:MAX_OP_SEMS]})
        else:
            for s in sids:
                self._emit(m, {"name": "sem_acquire", "semaphore_ids": [s]})
        for vc, xvc in joins:
            self._join(m, vc, xvc)

    def _barrier(self, r, members):
        members = sorted(members)
        bid = self._barrier_id(r, members)
        for g in members:
            self._flush(g)
        for g in members:
            t = self._emit(g, {"name": "barrier", "barrier_id": bid, "num_threadblocks": len(members)})
            self._rel_mem(g, t)
        vc = [max(col) for col in zip(*(self.vc[g] for g in members))]
        xvc = [max(col) for col in zip(*(self.xvc[g] for g in members))]
        for g in members:
            self._join(g, vc, xvc)

    def _record(self, g, t, accs):
        lane = self.lanes[g]
        for a in accs:
            rec = _Rec(g, t, a.kind, a.lo, a.hi, None if a.pend else t)
            self.recs.setdefault((a.owner, a.space), []).append(rec)
            if a.pend == "mem":
                lane.pend_mem.append(rec)
            elif a.pend is not None:
                lane.pend_port.setdefault(a.pend[1], []).append(rec)

    # -- materialising ops --------------------------------------------------------------

    def _materialise(self, g, aop, tbg=None):
        """The JSON of an abstract op on lane g and its accesses."""
        lane = self.lanes[g]
        r = lane.rank
        op = {"name": aop.name}
        accs = []
        port_pids = []
        if aop.port_per_dst:
            port_pids = [self._port_to(g, d.owner) for d in aop.dst]

        def one(ref, i, dst):
            if ref.owner is None:
                js = {"type": ref.buf, "index": ref.index, "size": ref.size}
                owner, remote = r, False
            else:
                js = {"buffer_id": self._rbuf(g, ref.owner, ref.buf, ref.access), "index": ref.index, "size": ref.size}
                owner, remote = ref.owner, True
            pend = None
            if ref.pend == "mem":
                pend = "mem"
            elif ref.pend == "port":
                pend = ("port", port_pids[i])
            accs.append(self._acc(owner, ref.buf, ref.index, ref.size, ref.kind, pend, dst, remote, tbg, ref.packet))
            return js

        src = [one(ref, i, False) for i, ref in enumerate(aop.src)]
        dst = [one(ref, i, True) for i, ref in enumerate(aop.dst)]
        if src:
            op["src_buff"] = src
        if dst:
            op["dst_buff"] = dst
        if aop.ctype:
            op["channel_type"] = aop.ctype
        if port_pids:
            op["channel_ids"] = [self._lid(g, "port", p) for p in port_pids]
        if tbg is not None:
            op["tbg_info"] = {"tb_id": tbg[0], "tbg_size": tbg[1]}
        if aop.extra:
            op.update(aop.extra)
        return op, accs, port_pids

    @staticmethod
    def _overlap(a, b):
        return a.owner == b.owner and a.space == b.space and a.lo < b.hi and b.lo < a.hi

    def _op_ok(self, accs, alias):
        """No partial overlaps within one op: destinations are disjoint from each
        other and from the sources, except a destination that is exactly a source
        where the op allows it (reductions read every source before they store)."""
        for i, a in enumerate(accs):
            for b in accs[:i]:
                if not self._overlap(a, b) or (not a.dst and not b.dst):
                    continue
                if a.dst and b.dst:
                    return False
                if alias and a.lo == b.lo and a.hi == b.hi and "p" not in a.kind + b.kind:
                    continue
                return False
        return True

    def _reduce_op(self):
        if self.op is not None:
            return None  # the call's operator: no reduce_op at all (the executor lets the call's win)
        return self.rng.choice([None, "sum", "min", "max"])

    def _aop_ok(self, aop, accs):
        if not self._op_ok(accs, aop.alias):
            return False
        if aop.fold and not ALIAS_LATER_SOURCES:
            d0 = accs[len(aop.src)]
            if any(self._overlap(d0, x) for x in accs[2:len(aop.src)]):
                return False
        return True

    def _place(self, g, aop, tbg=None, post=None):
        op, accs, port_pids = self._materialise(g, aop, tbg)
        if not self._aop_ok(aop, accs):
            raise _Skip
        self._sync_for(g, accs)
        t = self._emit(g, op)
        self._record(g, t, accs)
        if post:
            post(g, t, port_pids)
        return t

    # -- abstract ops ------------------------------------------------------------------------

    def _a_copy(self, r, size):
        return _AOp("copy", [self._local(r, size, "r")], [self._local(r, size, "w")])

    def _a_put(self, r, size=None, name="put", ctype=None, pairs=None):
        rng = self.rng
        ctype = ctype or ("port" if name != "put" or rng.random() < 0.4 else "memory")
        pairs = pairs or rng.choice((1, 1, 2, 3))
        src, dst = [], []
        for _ in range(pairs):
            s = size or self._size()
            pend = "mem" if ctype == "memory" else "port"
            src.append(self._local(r, s, "r"))
            if ctype == "port":
                src[-1].pend = "port"
            dst.append(self._remote(r, s, "w", access=ctype, pend=pend))
        return _AOp(name, src, dst, ctype=ctype, port_per_dst=ctype == "port")

    def _a_get(self, r, size=None):
        src, dst = [], []
        for _ in range(self.rng.choice((1, 1, 2))):
            s = size or self._size()
            q = self._peer(r)
            bq, br = self.rng.choice(self._bufs(q)), self.rng.choice(self._bufs(r))
            lo = max(self._zone(q, bq)[0], self._zone(r, br)[0])
            hi = min(self._zone(q, bq)[1], self._zone(r, br)[1])
            if hi - lo < s:
                raise _Skip
            i = self.rng.randint(lo, hi - s)  # one offset: 0.9 swaps the two
            src.append(_ARef(bq, i, s, "r", owner=q))
            dst.append(_ARef(br, i, s, "w"))
        return _AOp("get", src, dst, ctype="memory")

    def _a_reduce(self, r, name, size=None):
        rng = self.rng
        s = size or self._size()
        src = [self._local(r, s, "r")]
        for _ in range(rng.choice((0, 1, 1, 2, 3)) if name in ("re", "res") else rng.choice((1, 1, 2, 3))):
            src.append(self._local(r, s, "r") if name in ("re", "res") else self._remote(r, s, "r"))
        local_src = [x for x in src if x.owner is None]
        if rng.random() < 0.35:
            x = rng.choice(local_src)
            dst = [_ARef(x.buf, x.index, s, "w")]
        else:
            dst = [self._local(r, s, "w")]
        if name in ("res", "rres"):
            remote_src = [x for x in src if x.owner is not None]
            for _ in range(rng.choice((1, 1, 2))):
                if remote_src and rng.random() < 0.25:
                    x = rng.choice(remote_src)
                    dst.append(_ARef(x.buf, x.index, s, "w", owner=x.owner, pend="mem"))
                else:
                    dst.append(self._remote(r, s, "w", pend="mem"))
        extra = {}
        red = self._reduce_op()
        if red:
            extra["reduce_op"] = red
        return _AOp(name, src, dst, ctype=None if name == "re" else "memory", alias=True, extra=extra, fold=True)

    # packets

    def _pkt_post(self, regions):
        """After a packet store: mark its regions (rank, index, size) stored."""
        def post(g, t, pids):
            for q, i, s in regions:
                self.pkt_used[q].update(range(i, i + s))
                self.pkt_written[q].append((i, s))
        return post

    def _a_cpkt(self, r):
        s = self._size()
        i = self._free_pkt(r, s)
        aop = _AOp("cpkt", [self._local(r, s, "r")], [_ARef("s", i, s, "pw", packet=True)])
        return aop, [(r, i, s)]

    def _a_ppkt(self, r):
        rng = self.rng
        port = rng.random() < 0.35
        src, dst, regions = [], [], []
        for _ in range(rng.choice((1, 1, 2))):
            q = self._peer(r)
            if port:
                i0, s = self._written_pkt(r)
                src.append(_ARef("s", i0, s, "r", packet=True))  # the proxy copies packets already there
            else:
                s = self._size()
                first = [src[0].buf] if src and not MIXED_PPKT_SOURCES else None
                src.append(self._local(r, s, "r", bufs=first))
            i = self._free_pkt(q, s)
            if any(x[0] == q and set(range(i, i + s)) & set(range(x[1], x[1] + x[2])) for x in regions):
                raise _Skip
            dst.append(_ARef("s", i, s, "pw", owner=q, access="port" if port else "memory", packet=True))
            regions.append((q, i, s))
        aop = _AOp("ppkt", src, dst, ctype="port" if port else "memory", port_per_dst=port)
        return aop, regions

    def _a_rppkt(self, r):
        rng = self.rng
        port = rng.random() < 0.3
        i0, s = self._written_pkt(r)
        dst, regions = [], []
        for q in rng.sample([q for q in range(self.n) if q != r], rng.choice((1, 1, 2)) if self.n > 2 else 1):
            i = self._free_pkt(q, s)
            dst.append(_ARef("s", i, s, "pw", owner=q, access="port" if port else "memory", packet=True))
            regions.append((q, i, s))
        aop = _AOp("rppkt", [_ARef("s", i0, s, "pr", packet=True)], dst, ctype="port" if port else "memory",
                   port_per_dst=port)
        return aop, regions

    def _a_upkt(self, r):
        i0, s = self._written_pkt(r)
        return _AOp("upkt", [_ARef("s", i0, s, "pr", packet=True)], [self._local(r, s, "w")]), []

    def _a_repkt(self, r, name):
        rng = self.rng
        i0, s = self._written_pkt(r)
        src = [self._local(r, s, "r"), _ARef("s", i0, s, "pr", packet=True)]
        if rng.random() < 0.4:
            try:
                i1, _ = self._written_pkt(r, s)
                src.append(_ARef("s", i1, s, "pr", packet=True))
            except _Skip:
                pass
        if rng.random() < 0.35:
            dst = [_ARef(src[0].buf, src[0].index, s, "w")]
        else:
            dst = [self._local(r, s, "w")]
        regions = []
        if name in ("recpkt", "recspkt"):
            i = self._free_pkt(r, s)
            dst.append(_ARef("s", i, s, "pw", packet=True))
            regions.append((r, i, s))
        if name in ("respkt", "recspkt"):
            for q in rng.sample([q for q in range(self.n) if q != r], rng.choice((1, 1, 2)) if self.n > 2 else 1):
                i = self._free_pkt(q, s)
                if any(x[0] == q and set(range(i, i + s)) & set(range(x[1], x[1] + x[2])) for x in regions):
                    raise _Skip
                dst.append(_ARef("s", i, s, "pw", owner=q, packet=True))
                regions.append((q, i, s))
        extra = {}
        red = self._reduce_op()
        if red:
            extra["reduce_op"] = red
        ctype = "memory" if name in ("respkt", "recspkt") else None
        return _AOp(name, src, dst, ctype=ctype, alias=True, extra=extra), regions

    # -- steps -------------------------------------------------------------------------------

    def _lane(self):
        return self.rng.choice(self.lanes).g

    def step_op(self, kind):
        g = self._lane()
        r = self.lanes[g].rank
        if kind == "copy":
            self._place(g, self._a_copy(r, self._size()))
        elif kind == "put":
            self._place(g, self._a_put(r))
        elif kind == "pws":
            self._step_pws(g, self.rng.choice(["pws", "pws", "pwsf"]))
        elif kind == "get":
            self._place(g, self._a_get(r))
        elif kind in ("re", "res", "rre", "rres"):
            self._place(g, self._a_reduce(r, kind))
        elif kind in ("cpkt", "ppkt", "rppkt", "upkt", "repkt", "respkt", "recpkt", "recspkt"):
            if kind.startswith("re"):
                aop, regions = self._a_repkt(r, kind)
            else:
                aop, regions = getattr(self, "_a_" + kind)(r)
            self._place(g, aop, post=self._pkt_post(regions))
        else:
            raise ValueError(kind)

    def _step_pws(self, g, name):
        """A port put with signal: every destination's channel peer lane then waits."""
        r = self.lanes[g].rank
        aop = self._a_put(r, name=name, ctype="port")
        owners = [d.owner for d in aop.dst]
        if len(set(owners)) != len(owners):
            raise _Skip  # one channel per destination, each signalled once

        def post(g, t, pids):
            for pid in pids:
                self._rel_port(g, pid, t)
            snap = (list(self.vc[g]), list(self.xvc[g]))
            for pid in pids:
                w = self._other(pid, g)
                relaxed = self.rng.random() < 0.2
                self._emit(w, {"name": "rlxwait" if relaxed else "wait", "channel_ids": [self._lid(w, "port", pid)],
                               "channel_type": "port"})
                self._join(w, None if relaxed else snap[0], snap[1])

        self._place(g, aop, post=post)

    def step_signal(self):
        """A lane signals lanes of other ranks (one fused signal), each waits."""
        rng = self.rng
        g = self._lane()
        r = self.lanes[g].rank
        others = [h.g for h in self.lanes if h.rank != r]
        targets = rng.sample(others, min(len(others), rng.choice((1, 1, 2, 3))))
        kind = "port" if rng.random() < 0.3 else "memory"
        relaxed = rng.random() < 0.3
        self._flush(g)
        pids = [self._pair(kind, g, w) for w in targets]
        t = self._emit(g, {"name": "rlxsignal" if relaxed else "signal",
                           "channel_ids": [self._lid(g, kind, p) for p in pids], "channel_type": kind})
        if kind == "memory" and not relaxed:
            self._rel_mem(g, t)
        if kind == "port":
            for p in pids:
                self._rel_port(g, p, t)
        snap = (None if relaxed else list(self.vc[g]), list(self.xvc[g]))
        for w, p in zip(targets, pids):
            rw = rng.random() < 0.3
            self._emit(w, {"name": "rlxwait" if rw else "wait", "channel_ids": [self._lid(w, kind, p)],
                           "channel_type": kind})
            self._join(w, None if rw else snap[0], snap[1])

    def step_barrier(self):
        r = self.rng.randrange(self.n)
        lanes = self.by_rank[r]
        if len(lanes) < 2:
            raise _Skip
        k = self.rng.randint(2, len(lanes))
        self._barrier(r, self.rng.sample(lanes, k))

    def step_sem(self):
        r = self.rng.randrange(self.n)
        lanes = self.by_rank[r]
        if len(lanes) < 2:
            raise _Skip
        g = self.rng.choice(lanes)
        targets = self.rng.sample([h for h in lanes if h != g], self.rng.randint(1, len(lanes) - 1))
        self._flush(g)
        sids = [self._sem(g, w) for w in targets]
        t = self._emit(g, {"name": "sem_release", "semaphore_ids": sids})
        self._rel_mem(g, t)
        snap = (list(self.vc[g]), list(self.xvc[g]))
        for w, s in zip(targets, sids):
            self._emit(w, {"name": "sem_acquire", "semaphore_ids": [s]})
            self._join(w, *snap)

    def step_noise(self):
        g = self._lane()
        if self.rng.random() < 0.6:
            self._emit(g, {"name": "nop"})
        else:
            self._emit(g, {"name": "barrier", "barrier_id": 15, "num_threadblocks": 1})

    def _pipe_ctx(self, nc):
        """An iter_context over nc chunks with 1 to 4 windows."""
        units = nc * self.units
        it = self.rng.randint(1, min(4, units))
        per = -(-units // it)
        return {"unit_size": per * self.align, "num_chunks": nc}

    def step_pipe_local(self):
        """One lane's pipeline of 1 to 3 windowed ops over refs of num_chunks chunks."""
        rng = self.rng
        g = self._lane()
        r = self.lanes[g].rank
        nc = rng.choice((1, 2, 2, 3))
        inner, accs = [], []
        for _ in range(rng.choice((1, 2, 2, 3))):
            kind = rng.choice(["copy", "put", "get", "re", "res", "rre", "rres"])
            if kind == "copy":
                aop = self._a_copy(r, nc)
            elif kind == "put":
                aop = self._a_put(r, nc, pairs=rng.choice((1, 2)))
            elif kind == "get":
                aop = self._a_get(r, nc)
            else:
                aop = self._a_reduce(r, kind, nc)
            op, a, _ = self._materialise(g, aop)
            if not self._aop_ok(aop, a):
                raise _Skip
            # Stores into peers are held back until released: no other inner op (nor
            # another window of this one) may touch what one of them stores.
            # Port sources count as read only once flushed: no other inner op may store there.
            for x in a:
                for y in accs:
                    if not self._overlap(x, y):
                        continue
                    if (x.remote and x.dst) or (y.remote and y.dst) or (x.pend and y.dst) or (y.pend and x.dst):
                        raise _Skip
            if inner and rng.random() < 0.3:
                inner.append({"name": "nop"})
            inner.append(op)
            accs.extend(a)
        if self.lanes[g].weight + 1 + len(inner) > MAX_OPS - 8:
            raise _Skip
        self._sync_for(g, accs)
        t = self._emit(g, {"name": "pipeline", "iter_context": self._pipe_ctx(nc), "ops": inner}, 1 + len(inner))
        self._record(g, t, accs)

    def step_pipe_pair(self):
        """Lane a on rank A puts windows into rank B, signalling after each; lane b on
        B waits for each window in a pipeline of the same iter_context and copies or
        reduces it into a range of its own."""
        rng = self.rng
        a = self._lane()
        A = self.lanes[a].rank
        B = self._peer(A)
        b = rng.choice(self.by_rank[B])
        nc = rng.choice((1, 2, 2, 3))
        ctx = self._pipe_ctx(nc)
        style = rng.choice(["memory", "memory", "port", "pws"])
        ctype = "memory" if style == "memory" else "port"
        put = _AOp("pws" if style == "pws" else "put", [self._local(A, nc, "r")],
                   [self._remote(A, nc, "w", access=ctype, q=B)], ctype=ctype)
        landing = put.dst[0]
        # lane b: copy or reduce the landing range into a range of its own
        if rng.random() < 0.5:
            use = _AOp("copy", [_ARef(landing.buf, landing.index, nc, "r")], [self._local(B, nc, "w")])
        else:
            src = [_ARef(landing.buf, landing.index, nc, "r")]
            src += [self._local(B, nc, "r") for _ in range(rng.randint(1, 2))]
            if rng.random() < 0.3:
                rng.shuffle(src)
            extra = {"reduce_op": self._reduce_op()} if self.op is None else {}
            if not extra.get("reduce_op"):
                extra = {}
            use = _AOp("re", src, [self._local(B, nc, "w")], extra=extra, fold=True)
        if self.lanes[a].weight > MAX_OPS - 12 or self.lanes[b].weight > MAX_OPS - 12:
            raise _Skip
        pid = self._pair(ctype, a, b)
        put_op, put_accs, _ = self._materialise(a, put)  # no pending accesses: each iteration signals
        if ctype == "port":
            put_op["channel_ids"] = [self._lid(a, ctype, pid)]
        use_op, use_accs, _ = self._materialise(b, use)
        land = self._acc(B, landing.buf, landing.index, nc, "r", None, False, False, None, False)
        own = [x for x in use_accs if not (x.space == land.space and x.lo == land.lo and x.hi == land.hi and not x.dst)]
        if any(self._overlap(x, land) for x in own) or not self._aop_ok(use, use_accs):
            raise _Skip
        # Order both lanes' ranges first: an edge from a to b emitted between the two
        # pipelines would use their channel and be waited for before its signal.
        self._sync_for(a, put_accs)
        self._sync_for(b, own)
        # lane a's pipeline
        ops_a = [put_op]
        if style != "pws":
            if rng.random() < 0.5:
                ops_a.append({"name": "nop"})
            ops_a.append({"name": "signal", "channel_ids": [self._lid(a, ctype, pid)], "channel_type": ctype})
        ta = self._emit(a, {"name": "pipeline", "iter_context": ctx, "ops": ops_a}, 1 + len(ops_a))
        self._record(a, ta, put_accs)
        if ctype == "memory":
            self._rel_mem(a, ta)
        else:
            self._rel_port(a, pid, ta)
        snap = (list(self.vc[a]), list(self.xvc[a]))
        # lane b's pipeline
        self._join(b, *snap)
        assert not self._needs(b, use_accs)
        ops_b = [{"name": "wait", "channel_ids": [self._lid(b, ctype, pid)], "channel_type": ctype}, use_op]
        tb = self._emit(b, {"name": "pipeline", "iter_context": ctx, "ops": ops_b}, 1 + len(ops_b))
        self._record(b, tb, use_accs)

    def step_tbg(self):
        """A thread-block group: one op split tbg_size ways over lanes of one rank."""
        rng = self.rng
        r = rng.randrange(self.n)
        gsize = rng.randint(2, 4)
        s = self._size()
        if s * self.units < gsize:
            raise _Skip
        kinds = ["copy", "put", "get", "re", "res", "rre", "rres"]
        if self.ll:
            kinds += ["cpkt", "upkt"]
        kind = rng.choice(kinds)
        regions = []
        if kind == "copy":
            aop = self._a_copy(r, s)
        elif kind == "put":
            aop = self._a_put(r, s, ctype="memory")
        elif kind == "get":
            aop = self._a_get(r, s)
        elif kind == "cpkt":
            i = self._free_pkt(r, s)
            aop = _AOp("cpkt", [self._local(r, s, "r")], [_ARef("s", i, s, "pw", packet=True)])
            regions = [(r, i, s)]
        elif kind == "upkt":
            i0, _ = self._written_pkt(r, s)
            aop = _AOp("upkt", [_ARef("s", i0, s, "pr", packet=True)], [self._local(r, s, "w")])
        else:
            aop = self._a_reduce(r, kind, s)
        _, full, _ = self._materialise(self.by_rank[r][0], aop)
        if not self._aop_ok(aop, full):
            raise _Skip  # then no slice of it overlaps another partly either
        slices = list(range(gsize))
        if kind != "cpkt" and rng.random() < 0.2:
            slices = rng.sample(slices, rng.randint(1, gsize))  # a partial group
        if regions:
            self._pkt_post(regions)(None, None, None)
        for t in slices:
            g = rng.choice(self.by_rank[r])
            self._place(g, aop, tbg=(t, gsize))

    # -- the end ---------------------------------------------------------------------------

    def finish(self):
        """Order every access of a peer's input or output before some lane of that peer."""
        rng = self.rng
        if not REMOTE_SCRATCH_WITHOUT_CHANNEL:
            for r in range(self.n):
                for owner, buf, _ in self.rbufs[r]:
                    linked = any(q == owner for k in ("memory", "port") for q, _ in self.rank_chans[(r, k)])
                    if buf == "s" and not linked:
                        self._pair("memory", rng.choice(self.by_rank[r]), rng.choice(self.by_rank[owner]))
        todo = {}  # source lane -> {rank: full?}
        for (owner, space), recs in self.recs.items():
            if space == "s":
                continue
            mine = self.by_rank[owner]
            for rec in recs:
                src = self.lanes[rec.lane]
                if src.rank == owner:
                    continue
                if rec.kind in ("r", "pr"):
                    ok = rec.rel is not None and any(self.xvc[a][rec.lane] >= rec.rel for a in mine)
                else:
                    ok = rec.rel is not None and any(self.vc[a][rec.lane] >= rec.rel for a in mine)
                if not ok:
                    d = todo.setdefault(rec.lane, {})
                    d[owner] = d.get(owner, False) or rec.kind not in ("r", "pr")
        for g in sorted(todo):
            for owner, full in todo[g].items():
                w = rng.choice(self.by_rank[owner])
                self._edges([(g, full)], w)
        # verify
        for (owner, space), recs in self.recs.items():
            if space == "s":
                continue
            for rec in recs:
                if self.lanes[rec.lane].rank == owner:
                    continue
                clocks = self.xvc if rec.kind in ("r", "pr") else self.vc
                assert rec.rel is not None and any(clocks[a][rec.lane] >= rec.rel for a in self.by_rank[owner])

    def assemble(self, name):
        rng = self.rng
        n = self.n
        gpus = []
        for r in range(n):
            # rank-level channel lists: any interleaving that keeps each peer's order
            index = {}
            entries = []
            kinds = ["memory", "port"]
            rng.shuffle(kinds)
            for kind in kinds:
                per_peer = {}
                for q, pid in self.rank_chans[(r, kind)]:
                    per_peer.setdefault(q, []).append(pid)
                order = []
                while any(per_peer.values()):
                    q = rng.choice([q for q, v in per_peer.items() if v])
                    order.append((q, per_peer[q].pop(0)))
                for i, (q, pid) in enumerate(order):
                    index[(kind, pid)] = i
                if order:
                    cut = rng.randint(1, len(order)) if rng.random() < 0.3 else len(order)
                    for part in (order[:cut], order[cut:]):
                        if part:
                            entries.append({"channel_type": kind, "connected_to": [q for q, _ in part]})
            # remote buffers, shuffled
            rbs = self.rbufs[r]
            perm = list(range(len(rbs)))
            rng.shuffle(perm)  # new position of old id i is perm[i]
            remote = [None] * len(rbs)
            for old, new in enumerate(perm):
                owner, buf, acc = rbs[old]
                acc = sorted(acc)
                rng.shuffle(acc)
                remote[new] = {"rank": owner, "type": buf, "access_channel_types": acc}
            tbs = []
            for g in self.by_rank[r]:
                lane = self.lanes[g]
                chans = []
                for kind in ("memory", "port"):
                    ids = [index[(kind, pid)] for pid in lane.chans[kind]]
                    if ids:
                        cut = rng.randint(1, len(ids)) if rng.random() < 0.25 else len(ids)
                        for part in (ids[:cut], ids[cut:]):
                            if part:
                                chans.append({"channel_type": kind, "channel_ids": part})
                refs = []
                for kind in ("memory", "port"):
                    ids = [perm[b] for b in lane.bufs[kind]]
                    if ids:
                        refs.append({"access_channel_type": kind, "remote_buffer_ids": ids})
                rng.shuffle(refs)
                tb = {"id": lane.lane, "ops": lane.ops, "channels": chans}
                if refs or rng.random() < 0.5:
                    tb["remote_buffer_refs"] = refs
                tbs.append(tb)
            gpu = {"id": r, "input_chunks": self.ic, "output_chunks": self.oc, "scratch_chunks": self.sc[r],
                   "channels": entries, "remote_buffers": remote, "threadblocks": tbs}
            if self.sems[r] or rng.random() < 0.5:
                gpu["semaphores"] = [{"init_value": v} for v in self.sems[r]]
            gpus.append(gpu)
        plan = {"name": name, "collective": self.collective, "protocol": "LL" if self.ll else "Simple",
                "inplace": self.mode != "oop", "reuse_resources": False, "gpus": gpus,
                "num_threads_per_block": rng.choice([1024, 512, 256]),
                "use_double_scratch_buffer": self.double, "buffer_alignment": self.align}
        size = self.out_bytes if self.collective == "allgather" else self.in_bytes
        if rng.random() < 0.3:
            plan["min_message_size"] = rng.choice([0, size])
            # not below the input size: 0.9 sizes scratch from min(input, max_message_size)
            top = max(size, self.in_bytes)
            plan["max_message_size"] = rng.choice([top, 2 * top, 2**64 - 1])
        return plan


STEP_KINDS = {
    "copy": 3, "put": 4, "pws": 1.5, "get": 2, "re": 2, "res": 2, "rre": 2, "rres": 3,
    "signal": 1.5, "barrier": 1, "sem": 1, "noise": 1, "pipe_local": 1.5, "pipe_pair": 1.5, "tbg": 2,
}
PACKET_KINDS = {"cpkt": 2, "ppkt": 3, "rppkt": 2, "upkt": 3, "repkt": 1, "respkt": 1.5, "recpkt": 1, "recspkt": 1.5}


def generate(seed, nranks=None, steps=None):
    """A random valid plan for `nranks` ranks (2 to 5 when None), from `seed`.

    The same arguments give the same plan. `steps` bounds the steps (default 16
    to 48); the plan may stop earlier when a lane nears 64 ops.
    """
    gen = _Gen(seed, nranks)
    rng = gen.rng
    kinds = dict(STEP_KINDS)
    if gen.ll:
        kinds.update(PACKET_KINDS)
    names, weights = list(kinds), list(kinds.values())
    target = rng.randint(16, 48)
    if steps is not None:
        target = steps  # the same seed with fewer steps: a prefix of the same program
    tries = 0
    while gen.steps < target and tries < 20 * target:
        tries += 1
        if max(lane.weight for lane in gen.lanes) >= BUDGET:
            break
        kind = rng.choices(names, weights)[0]
        # Draws happen before anything is emitted: a _Skip leaves the plan as it was.
        try:
            if kind == "signal":
                gen.step_signal()
            elif kind == "barrier":
                gen.step_barrier()
            elif kind == "sem":
                gen.step_sem()
            elif kind == "noise":
                gen.step_noise()
            elif kind == "pipe_local":
                gen.step_pipe_local()
            elif kind == "pipe_pair":
                gen.step_pipe_pair()
            elif kind == "tbg":
                gen.step_tbg()
            else:
                gen.step_op(kind)
        except _Skip:
            continue
        gen.steps += 1
    gen.finish()
    for lane in gen.lanes:
        assert lane.weight <= MAX_OPS, (seed, lane.rank, lane.lane, lane.weight)
    plan = gen.assemble(f"random.{seed}.n{gen.n}")
    return RandomPlan(plan=plan, seed=seed, nranks=gen.n, mode=gen.mode, in_bytes=gen.in_bytes,
                      out_bytes=gen.out_bytes, dtype=gen.dtype, op=gen.op, steps=gen.steps)


def count_ops(plan):
    """{op name: count} over every lane of every rank, pipelines' inner ops counted
    once each (and the pipeline op too)."""
    counts = {}
    for gpu in plan["gpus"]:
        for tb in gpu["threadblocks"]:
            for op in tb["ops"]:
                counts[op["name"]] = counts.get(op["name"], 0) + 1
                for inner in op.get("ops", []):
                    counts[inner["name"]] = counts.get(inner["name"], 0) + 1
    return counts


# -- buffers and the reference answer ------------------------------------------------------------


def _values(rp, rank, nbytes, salt):
    """Deterministic values of the call's type as bytes: exact in float32 under sums,
    and bounded under products."""
    rng = np.random.default_rng([rp.seed, rank, salt])
    count = nbytes // 4
    if rp.dtype == "int32":
        if rp.op == "prod":
            v = rng.choice(np.array([-2, -1, 1, 2], np.int32), count)
        else:
            v = rng.integers(-100, 100, count, dtype=np.int32)
    else:
        if rp.op == "prod":
            v = rng.choice(np.array([-2, -1, -0.5, 0.5, 1, 2], np.float32), count)
        else:
            v = (rng.integers(-32, 32, count) / 4).astype(np.float32)
    return np.frombuffer(v.tobytes(), np.uint8).copy()


def make_buffers(rp, rank):
    """(send, recv): uint8 arrays for one rank's call, aliasing as the plan's in-place
    convention says. The receive buffer starts with values of the type too."""
    ib, ob = rp.in_bytes, rp.out_bytes
    if rp.mode == "oop":
        return _values(rp, rank, ib, 0), _values(rp, rank, ob, 1)
    if rp.mode == "one":
        buf = _values(rp, rank, ib, 0)
        return buf, buf
    if rp.mode == "allgather":
        recv = _values(rp, rank, ob, 1)
        return recv[rank * ib:(rank + 1) * ib], recv
    send = _values(rp, rank, ib, 0)
    return send, send[rank * ob:(rank + 1) * ob]


def reference(rp, schedule="round_robin", seed=0, delay_remote_writes=True):
    """Every rank's (send, recv) bytes after the call, by the interpreter."""
    bufs = [make_buffers(rp, r) for r in range(rp.nranks)]
    with np.errstate(over="ignore"):  # float32 products may reach inf, in the executor too
        res = run_plan(rp.plan, [s for s, _ in bufs], [o for _, o in bufs], np.dtype(rp.dtype), rp.interp_op,
                       schedule=schedule, seed=seed, delay_remote_writes=delay_remote_writes)
    assert res.leftover_signals == {}, res.leftover_signals
    return [(s.copy(), o.copy()) for s, o in bufs]
