"""Random valid DSL programs (ucxx_go.language), seeded: generated chunks, channels
and lanes, for checking the compiler and the checker against the reference
interpreter (plan_reference.py) and the Go executor.

    from random_dsl import generate

    rd = generate(seed=7)            # or generate(7, nranks=3)
    rd.program                       # the CollectiveProgram, recorded, not compiled
    plan, prov = rd.compile()        # the compiler, then the checker (raises if it objects)
    rp = rd.random_plan(plan)        # random_plans.RandomPlan: make_buffers, reference()

What a program has: 2 to 4 ranks (TestCollective: no specification of the result,
so the checker looks for races, deadlocks and imbalance, and the interpreter gives
the answer), 1 to 6 input and output chunks and 0 to 4 scratch chunks per rank (in
one to four scratch buffers), chunks of 1 to 3 alignment units of 16 bytes, a memory
channel each way between every two ranks, for some pairs a second one, for some a
port channel each way. Channel ends are pinned to a lane (tb=) or left to the
compiler, each at random; data ops are pinned, left free, or spread over a
thread-block group. Reductions name sum, min or max, or none; when the call gives
an operator (which then wins over any reduction's own), none names one.

Shape (correct by construction):

* a start-of-call handshake on every channel (every end signals, relaxed or not,
  then every end waits): no rank touches a peer before the peer entered the call;
* rounds (1 or 2). A round is a data phase, then two exchanges: every channel end
  signals, then every end waits; twice. In a data phase each rank makes random
  copies, reductions, puts (memory and port), gets and remote reductions,
  sometimes put_with_signal(_and_flush) as its signal on a port channel, barriers
  and semaphore release/acquire pairs between its lanes; a phase may be a pipeline
  (Loop.iteration) whose ops all cover its num_chunks.

Why it is right. Within a rank the compiler orders what conflicts (its job). Across
ranks, within a data phase no two ranks touch one byte range when one of them
writes it (a rank's own chunks are touched by it and by peers through channels),
and a rank that port-puts a range neither overwrites its source nor touches its
destination again in that phase (a port put lands asynchronously until a signal or
flush of its channel). Between phases, the exchanges order everything: a rank's
access to a peer's range comes before its signal on a channel that carries that
range (the compiler orders a signal after what its channel pair carries), the
owner's wait comes before its own signal to any other peer that reaches the range
in the second exchange, and that peer's wait comes before its next access. The
owner's own accesses are ordered the same way. Deadlock freedom: every signal
(release, barrier arrival) is made before its wait (acquire) in the program's
order, which is the order of one run in which nothing blocks. Lanes stay within 64
ops: a program that would exceed them is drawn again, smaller.

What these programs found (fixed in the compiler, and kept as tests in
test_language_random.py): a signal was not ordered after the rank's reads of the
peer through its channel ("done reading" could overtake a get on another lane); a
lane read back (or port-put over) its own store into a peer before releasing it;
``rank.reduce(..., op=None)`` gave a sum rather than the call's operator; ops of one
pipeline that touch the same bytes at different offsets run out of program order
(now refused at the line that writes the second one). And the executor lets the
call's operator win over a reduction's own, where the interpreter does the reverse:
the generator names no reduce_op when the call gives one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from random_plans import RandomPlan
from ucxx_go.language import (
    CollectiveProgram,
    Loop,
    MemoryChannel,
    PortChannel,
    Rank,
    Semaphore,
    TestCollective,
    ThreadBlockGroup,
)

ALIGN = 16  # the plans' buffer_alignment: bytes per alignment unit
MAX_TB = 3  # pinned ops go to lanes 0..MAX_TB-1

__all__ = ["RandomDSL", "generate", "sync_ops"]


@dataclass
class RandomDSL:
    program: CollectiveProgram
    seed: int
    nranks: int
    chunk_bytes: int
    ic: int
    oc: int
    dtype: str
    op: str | None  # the call's operator (None: every reduction names its own)
    stats: dict

    def compile(self):
        return self.program.compile()

    def random_plan(self, plan):
        """The plan as random_plans.RandomPlan, for make_buffers, reference and the oracle."""
        return RandomPlan(plan=plan, seed=self.seed, nranks=self.nranks, mode="oop",
                          in_bytes=self.ic * self.chunk_bytes, out_bytes=self.oc * self.chunk_bytes, dtype=self.dtype,
                          op=self.op, steps=0)


def sync_ops(program):
    """The program's recorded signals and waits (plain and relaxed; pws counts as a
    put), for mutations."""
    return [op for op in program.ops if op.kind in ("signal", "wait")]


def _partial(a, b):
    """Whether chunks a and b overlap without being the same range."""
    return (a.rank == b.rank and a.buffer == b.buffer and a != b and a.index < b.index + b.size
            and b.index < a.index + a.size)


class _Gen:
    def __init__(self, seed, nranks, shrink=0):
        rng = self.rng = random.Random(seed if not shrink else f"{seed}.{shrink}")
        self.seed = seed
        self.shrink = shrink
        n = self.n = nranks or rng.randint(2, 4)
        self.units = rng.randint(1, 3)
        self.C = ALIGN * self.units
        self.ic, self.oc = rng.randint(1, 6), rng.randint(1, 6)
        self.dtype = rng.choice(["float32", "int32"])
        self.op = rng.choice([None, None, "sum", "min", "max"])
        self.stats = {}
        self.prog = CollectiveProgram(f"random_dsl.{seed}.n{n}", TestCollective(n, self.ic, self.oc), n,
                                      max_lanes=rng.choice([2, 4, 8]))

    def count(self, what):
        self.stats[what] = self.stats.get(what, 0) + 1

    # -- set-up -------------------------------------------------------------------------

    def setup(self):
        rng, n = self.rng, self.n
        self.bufs = []  # per rank: [(BaseBuffer, type)]
        for r in range(n):
            rank = Rank(r)
            bs = [(rank.get_input_buffer(), "i"), (rank.get_output_buffer(), "o")]
            total = rng.choice([0, 0, 1, 2, 3, 4])
            while total > 0:  # scratch in one or more buffers
                k = rng.randint(1, total)
                bs.append((rank.Buffer(k), "s"))
                total -= k
            self.bufs.append(bs)
        # channel ends: (rank, peer) -> [(channel, tb or None)]; both ends of a pair are
        # made in the same order, so the k-th of each pairs up
        self.ends = {}
        self.order = []  # every end, in a fixed order (the order of the exchanges)
        for r in range(n):
            for p in range(r + 1, n):
                kinds = [MemoryChannel]
                if rng.random() < 0.15:
                    kinds.append(MemoryChannel)
                if rng.random() < 0.4:
                    kinds.append(PortChannel)
                for kind in kinds:
                    for a, b in ((r, p), (p, r)):
                        ch = kind(b, a)
                        tb = rng.randrange(MAX_TB) if rng.random() < 0.3 else None
                        self.ends.setdefault((a, b), []).append((ch, tb))
                        self.order.append((ch, tb))
        rng.shuffle(self.order)

    # -- chunks ------------------------------------------------------------------------------

    def chunk(self, r, size, kinds="ios"):
        """A random chunk of `size` chunks of one of rank r's buffers of these kinds, or None."""
        fits = [(b, t) for b, t in self.bufs[r] if t in kinds and len(b) >= size]
        if not fits:
            return None
        b, _ = self.rng.choice(fits)
        i = self.rng.randint(0, len(b) - size)
        return b[i:i + size]

    def size(self):
        return self.loop_chunks or self.rng.choice([1, 1, 1, 2, 2, 3])

    # -- phase bookkeeping ---------------------------------------------------------------------

    def ok(self, actor, accs):
        """Whether accesses [(chunk, kind)] by `actor` keep the phase free of cross-rank
        conflicts and of touching a pending port put's ranges."""
        for i, (c, kind) in enumerate(accs):
            for (c2, kind2, actor2) in self.phase + [(c2, k2, actor) for c2, k2 in accs[:i]]:
                if c.rank != c2.rank or c.buffer != c2.buffer:
                    continue
                if c.index < c2.index + c2.size and c2.index < c.index + c.size and "w" in (kind, kind2):
                    if actor2 != actor:
                        return False
                    if self.loop_chunks and c.index != c2.index:  # windows out of program order
                        return False
            for (a2, c2, role) in self.pending:
                if a2 != actor or c.rank != c2.rank or c.buffer != c2.buffer:
                    continue
                if c.index < c2.index + c2.size and c2.index < c.index + c.size:
                    if role == "dst" or kind == "w":
                        return False
        return True

    def record(self, actor, accs):
        for c, kind in accs:
            self.phase.append((c, kind, actor))

    def tb(self, size, allow_group=True):
        """tb and tb_group arguments: None, a pinned lane, or (sometimes) a group."""
        rng = self.rng
        x = rng.random()
        if x < 0.55:
            return {}
        if x < 0.85 or not allow_group or self.loop_chunks or size * self.units < 2:
            return {"tb": rng.randrange(MAX_TB)}
        return {"tb_group": ThreadBlockGroup(rng.sample(range(MAX_TB), 2))}

    def reduce_op(self):
        if self.op is not None:
            return None  # the call's (given to execute, it wins over any op's own: none is named)
        return self.rng.choice([None, "sum", "min", "max"])

    # -- data ops ------------------------------------------------------------------------------

    def op_copy(self, r):
        s = self.size()
        src, dst = self.chunk(r, s), self.chunk(r, s)
        if src is None or dst is None or src == dst or _partial(src, dst):
            return False
        accs = [(src, "r"), (dst, "w")]
        if not self.ok(r, accs):
            return False
        Rank(r).copy(dst, src, **self.tb(s))
        self.record(r, accs)
        return True

    def op_reduce(self, r):
        s = self.size()
        k = self.rng.randint(1, 3)
        srcs = [self.chunk(r, s) for _ in range(k + 1)]
        if None in srcs:
            return False
        dst = srcs[0] if self.rng.random() < 0.5 else self.chunk(r, s)
        if dst is None or any(_partial(dst, c) for c in srcs):
            return False
        accs = [(c, "r") for c in srcs] + [(dst, "w")]
        if not self.ok(r, accs):
            return False
        args = self.tb(s)
        rop = self.reduce_op()
        if self.rng.random() < 0.5:
            Rank(r).reduce(srcs[0], srcs[1:], dst_chunk=dst, reduce_op=rop, **args)
        elif dst == srcs[0] and k == 1:
            Rank(r).reduce(dst, srcs[1], op=rop, **args)  # the seed's form: dst ⊕= src
        else:
            Rank(r).reduce(srcs[0], srcs[1:], dst_chunk=dst, op=rop, **args)
        self.record(r, accs)
        return True

    def _end(self, r, port=None):
        """A random channel end of rank r (of a port channel or not, when given)."""
        cands = [(p, ch, tb) for (a, p), lst in self.ends.items() if a == r for ch, tb in lst
                 if port is None or isinstance(ch, PortChannel) == port]
        return self.rng.choice(cands) if cands else None

    def op_put(self, r, port=False):
        e = self._end(r, port)
        if e is None:
            return False
        p, ch, _ = e
        s = self.size()
        src, dst = self.chunk(r, s), self.chunk(p, s)
        if src is None or dst is None:
            return False
        accs = [(src, "r"), (dst, "w")]
        if not self.ok(r, accs):
            return False
        ch.put(dst, src, **self.tb(s, allow_group=not port))
        self.record(r, accs)
        if port:
            self.pending += [(r, src, "src"), (r, dst, "dst")]
        return True

    def op_get(self, r):
        e = self._end(r, False)
        if e is None:
            return False
        p, ch, _ = e
        s = self.size()
        src, dst = self.chunk(p, s), self.chunk(r, s)
        if src is None or dst is None:
            return False
        accs = [(src, "r"), (dst, "w")]
        if not self.ok(r, accs):
            return False
        ch.get(dst, src, **self.tb(s))
        self.record(r, accs)
        return True

    def op_remote_reduce(self, r):
        e = self._end(r, False)
        if e is None:
            return False
        p, ch, _ = e
        s = self.size()
        local = self.chunk(r, s)
        remote = [self.chunk(p, s) for _ in range(self.rng.randint(1, 2))]
        dst = local if self.rng.random() < 0.5 else self.chunk(r, s)
        if local is None or None in remote or dst is None or _partial(local, dst):
            return False
        accs = [(local, "r")] + [(c, "r") for c in remote] + [(dst, "w")]
        if not self.ok(r, accs):
            return False
        ch.reduce(local, remote, local_dst_chunk=dst, reduce_op=self.reduce_op(), **self.tb(s))
        self.record(r, accs)
        return True

    def op_reduce_send(self, r, remote):
        """A reduction, then puts of its result into peers over memory channels: the
        compiler fuses them when they land on one lane (res, rres)."""
        e = self._end(r, False)
        if e is None:
            return False
        p, ch, _ = e
        s = self.size()
        local = self.chunk(r, s)
        others = [self.chunk(p if remote else r, s) for _ in range(self.rng.randint(1, 2))]
        dst = self.chunk(r, s)
        outs = [(self._end(r, False), None) for _ in range(self.rng.randint(1, 2))]
        outs = [(q, c, self.chunk(q, s)) for (q, c, _), _ in outs]
        if local is None or None in others or dst is None or any(x is None for _, _, x in outs) \
                or _partial(local, dst) or any(_partial(dst, c) for c in others):
            return False
        accs = [(local, "r")] + [(c, "r") for c in others] + [(dst, "w")] + [(x, "w") for _, _, x in outs]
        if len({(x.rank, x.buffer, x.index) for _, _, x in outs}) < len(outs) or not self.ok(r, accs):
            return False
        tb = {"tb": self.rng.randrange(MAX_TB)} if self.rng.random() < 0.4 else {}
        if remote:
            ch.reduce(local, others, local_dst_chunk=dst, reduce_op=self.reduce_op(), **tb)
        else:
            Rank(r).reduce(local, others, dst_chunk=dst, reduce_op=self.reduce_op(), **tb)
        for _, c, x in outs:
            c.put(x, dst, **tb)
        self.record(r, accs)
        return True

    def op_barrier(self, r):
        if self.rng.random() < 0.5:
            Rank(r).barrier()
        else:
            Rank(r).barrier(tb_list=self.rng.sample(range(MAX_TB), self.rng.randint(1, MAX_TB)))
        return True

    def op_semaphore(self, r):
        rng = self.rng
        sem = Semaphore(r, initial_value=0) if rng.random() < 0.5 else Rank.Semaphore(rank=r, size=1)
        sem.release(tb=rng.randrange(MAX_TB))
        sem.acquire(tb=rng.randrange(MAX_TB))
        return True

    OPS = {"copy": 3, "reduce": 2, "put": 4, "port put": 2, "get": 2, "remote reduce": 1.5, "reduce+put": 1,
           "remote reduce+put": 1, "barrier": 0.5, "semaphore": 0.5}

    def data_phase(self):
        rng = self.rng
        self.phase, self.pending = [], []
        names, weights = list(self.OPS), list(self.OPS.values())
        if self.loop_chunks:  # a pipeline: windowed data ops only
            names, weights = names[:8], weights[:8]
        done, tries = 0, 0
        target = rng.randint(2, max(2, (4 * self.n) >> self.shrink))
        while done < target and tries < 6 * target:
            tries += 1
            kind = rng.choices(names, weights)[0]
            r = rng.randrange(self.n)
            fn = {"copy": self.op_copy, "reduce": self.op_reduce, "put": self.op_put,
                  "port put": lambda r: self.op_put(r, port=True), "get": self.op_get,
                  "remote reduce": self.op_remote_reduce, "reduce+put": lambda r: self.op_reduce_send(r, False),
                  "remote reduce+put": lambda r: self.op_reduce_send(r, True), "barrier": self.op_barrier,
                  "semaphore": self.op_semaphore}[kind]
            if fn(r):
                done += 1
                self.count(kind)

    # -- synchronisation -------------------------------------------------------------------------

    def handshake(self):
        relaxed = self.rng.random() < 0.7
        for ch, tb in self.order:
            if relaxed:
                ch.relaxedSignal(tb=tb, sync=None) if self.rng.random() < 0.5 else ch.signal(tb=tb, relaxed=True)
            else:
                ch.signal(tb=tb)
        for ch, tb in self.order:
            if relaxed:
                ch.relaxedWait(tb=tb) if self.rng.random() < 0.5 else ch.wait(tb=tb, relaxed=True, sync="after")
            else:
                ch.wait(tb=tb)

    def exchange(self, first):
        """Every end signals, then every end waits. In the first exchange after a data
        phase a port end may signal with a put_with_signal(_and_flush) of its own, and
        may flush first."""
        rng = self.rng
        for ch, tb in self.order:
            if isinstance(ch, PortChannel):
                if first and rng.random() < 0.3 and self._put_with_signal(ch, tb):
                    continue
                if rng.random() < 0.2:
                    ch.flush(tb=tb)
                    self.count("flush")
            ch.signal(tb=tb)
        for ch, tb in self.order:
            ch.wait(tb=tb)

    def _put_with_signal(self, ch, tb):
        r, p = ch.src_rank, ch.dst_rank
        s = self.rng.choice([1, 2])
        src, dst = self.chunk(r, s), self.chunk(p, s)
        if src is None or dst is None:
            return False
        accs = [(src, "r"), (dst, "w")]
        if not self.ok(r, accs):
            return False
        if self.rng.random() < 0.5:
            ch.put_with_signal(dst, src, tb=tb)
            self.count("put_with_signal")
        else:
            ch.put_with_signal_and_flush(dst, src, tb=tb)
            self.count("put_with_signal_and_flush")
        self.record(r, accs)
        self.pending += [(r, src, "src"), (r, dst, "dst")]
        return True

    def run(self):
        rng = self.rng
        with self.prog:
            self.setup()
            self.loop_chunks = None
            self.handshake()
            for _ in range(rng.randint(1, 2 if self.shrink < 2 else 1)):
                counts = [len(b) for bs in self.bufs for b, _ in bs]
                if rng.random() < 0.25:
                    self.loop_chunks = rng.choice([c for c in (1, 2) if c <= max(counts)])
                    unit = ALIGN * max(1, self.units * self.loop_chunks // 2)
                    with Loop.iteration(unit=unit, num_chunks=self.loop_chunks):
                        self.data_phase()
                    self.count("pipeline")
                    self.loop_chunks = None
                else:
                    self.data_phase()
                self.exchange(True)
                self.exchange(False)
        return RandomDSL(self.prog, self.seed, self.n, self.C, self.ic, self.oc, self.dtype, self.op, self.stats)


MAX_OPS = 64  # per lane, pipelines' inner ops counted (the checker refuses more)


def _fits(program):
    """Whether every lane stays within MAX_OPS, compiled without the checker (so without
    pruning: an upper bound)."""
    program.check = False
    try:
        plan, _ = program.compile()
    except ValueError:  # a lane of more than 64 ops
        return False
    finally:
        program.check = True
    return all(sum(1 + len(op.get("ops", ())) for op in tb["ops"]) <= MAX_OPS
               for g in plan["gpus"] for tb in g["threadblocks"])


def generate(seed, nranks=None):
    """A random valid DSL program for `nranks` ranks (2 to 4 when None), recorded and
    not compiled. The same arguments give the same program. A program whose lanes
    would exceed 64 ops is drawn again, smaller."""
    for shrink in range(6):
        rd = _Gen(seed, nranks, shrink).run()
        if _fits(rd.program):
            return rd
    raise AssertionError(f"seed {seed}: no program within {MAX_OPS} ops per lane")


