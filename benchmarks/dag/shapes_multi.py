"""Partitioned versions of the suite's shapes, for the multi-GPU mode (multigpu.py).

GrCUDA's multi-GPU benchmarks (necst/grcuda, projects/resources/python/benchmark/bench/
multi_gpu/bench_1.py, bench_5.py, bench_6.py, bench_9.py, bench_11.py: B1M, B5M, B6M,
B9M, B11M) split the data into P chunks so that each chunk's kernels can run on a GPU
of their own, and exchange only what the algorithm needs (B1M: one partial sum per
chunk; B9M: the row-partitioned matrix-vector product reads the whole vector). These
are the same computations as shapes.py's (the same inputs, from the same generator,
and the same float64 reference), written once against the Program interface with P
partitions:

    inst = make_partitioned("cg", cfg, rng, parts=2)   # a PartitionedInstance
    inst.build(p, A)      # launches on lanes of their partition, marks/waits, and
                          # p.copy(dst, src, lane=k) for every exchange

Every array is one array of the program (one ctx.array for the DAG, one device array
for the one-GPU backends), with a layout saying where each partition's data is:

    Split(starts, lengths)  piece q = elements [starts[q], starts[q] + lengths[q]) is
                            partition q's (small per-partition pieces are padded apart
                            by PAD elements, so that two partitions never share a page
                            of the DAG's managed memory)
    Home(q)                 the whole array is partition q's
    Replicated()            read-only input every partition reads

A kernel on a lane of partition q touches only partition q's pieces, Home(q) arrays
and Replicated inputs; data moves between partitions only through p.copy. cupy-multi
(multigpu.py) holds piece q in device memory of partition q's GPU, a copy of each
Replicated input on every GPU, and makes each copy a cudaMemcpyPeerAsync; it refuses a
launch that reaches another partition's data (the dry run checks every program so).

hits (B7) and img (B8) are not partitioned here (see NOT_PARTITIONED).
"""

import numpy as np

from kernels import NCLASS, REDUCE_OPS, THREADS
from shapes import SHAPES, ShapeInstance

SUM = REDUCE_OPS["sum"]
T = THREADS
PAD = 1 << 19  # elements (2 MiB of float32): the stride of small per-partition pieces

NOT_PARTITIONED = {
    "hits": "one-GPU structure: both chains read every vertex's score each iteration (a row-partitioned HITS "
            "needs an allgather of both vectors and two global sums per iteration: not written yet)",
    "img": "one-GPU structure: stencils over the whole image (a partitioned pipeline needs halo rows per "
           "partition and global min/max: not written yet)",
}


class Split:
    """Partition q owns elements [starts[q], starts[q] + lengths[q])."""

    kind = "split"

    def __init__(self, starts, lengths):
        self.starts, self.lengths = [int(s) for s in starts], [int(n) for n in lengths]

    def __repr__(self):
        return f"Split({self.starts}, {self.lengths})"


class Home:
    """The whole array is partition q's."""

    kind = "home"

    def __init__(self, q):
        self.q = int(q)

    def __repr__(self):
        return f"Home({self.q})"


class Replicated:
    """A read-only input every partition reads."""

    kind = "replicated"

    def __repr__(self):
        return "Replicated()"


def even(n, parts):
    """Split n elements into `parts` contiguous pieces of n // parts (+1 for the first
    n % parts): (starts, lengths)."""
    lengths = [n // parts + (1 if q < n % parts else 0) for q in range(parts)]
    return list(np.cumsum([0] + lengths[:-1])), lengths


def padded(length, parts):
    """`parts` pieces of `length` elements each, PAD apart (small per-partition data)."""
    stride = -(-length // PAD) * PAD
    return Split([q * stride for q in range(parts)], [length] * parts), stride * (parts - 1) + length


class PartitionedInstance(ShapeInstance):
    """A ShapeInstance whose program has `parts` partitions: layout (array name ->
    Split | Home | Replicated), lane_part (lane -> partition), and piece(A, name, q),
    the handle slice of partition q's data. notes: what the partitions exchange."""

    def __init__(self, base, parts, arrays, state, layout, lane_part, build, reference, notes, host_reset=None):
        super().__init__(base.name, arrays, state, base.outputs, len(lane_part), build, reference,
                         dict(base.sizes, partitions=parts), f"{parts} partitions of: {base.dag_shape}")
        self.parts, self.layout, self.lane_part, self.notes = parts, layout, list(lane_part), notes
        # The arrays every repetition starts from host memory (GrCUDA's reset_result
        # rewrites them on the CPU): the state arrays and the inputs GrCUDA's
        # counterpart rewrites too. Default: the state arrays.
        self.host_reset = list(state) if host_reset is None else list(host_reset)
        if not set(state) <= set(self.host_reset) or not set(self.host_reset) <= set(arrays):
            raise AssertionError(f"{self.name}: host_reset {self.host_reset} must hold the state {list(state)} "
                                 "and only arrays of the shape")
        for k, v in arrays.items():
            lay = layout.get(k)
            if lay is None:
                raise AssertionError(f"{self.name}: array {k} has no layout")
            if lay.kind == "split":
                if len(lay.starts) != parts:
                    raise AssertionError(f"{self.name}: {k} has {len(lay.starts)} pieces for {parts} partitions")
                ends = [s + n for s, n in zip(lay.starts, lay.lengths)]
                if any(e > s2 for e, s2 in zip(ends, lay.starts[1:])) or ends[-1] > v.size:
                    raise AssertionError(f"{self.name}: the pieces of {k} overlap or overrun it ({lay})")
                if k in self.outputs and (lay.starts[0] != 0 or ends[-1] != v.size or ends[:-1] != lay.starts[1:]):
                    raise AssertionError(f"{self.name}: output {k} must be split without gaps ({lay})")
            elif lay.kind == "home" and not 0 <= lay.q < parts:
                raise AssertionError(f"{self.name}: {k} homed on partition {lay.q} of {parts}")
        if any(not 0 <= q < parts for q in self.lane_part):
            raise AssertionError(f"{self.name}: lane partitions {self.lane_part}")

    def piece(self, A, name, q):
        """Partition q's part of array `name` in the handles A: its slice (Split), or
        the whole array (Home, Replicated)."""
        lay = self.layout[name]
        a = getattr(A, name)
        if lay.kind != "split":
            return a
        s = lay.starts[q]
        return a[s:s + lay.lengths[q]]

    def partition_of(self, name, lo, hi):
        """The partition whose data elements [lo, hi) of `name` are (None: a
        Replicated input); raises AssertionError when they are no one partition's."""
        lay = self.layout[name]
        if lay.kind == "replicated":
            return None
        if lay.kind == "home":
            return lay.q
        for q, (s, n) in enumerate(zip(lay.starts, lay.lengths)):
            if s <= lo and hi <= s + n:
                return q
        raise AssertionError(f"{self.name}: elements [{lo}, {hi}) of {name} are no one partition's ({lay})")


def _relayout(a, blocks):
    """The concatenation of blocks [(lo, hi)] of a (a copy)."""
    return np.concatenate([a[lo:hi] for lo, hi in blocks])


# -- B1M VEC --------------------------------------------------------------------------------


def make_vec(cfg, rng, parts):
    """bench_1.py (B1M): each partition squares its chunk of x and y and sums x² - y²
    into one partial sum; the partial sums go to partition 0, which adds them.
    Exchanged: 4 bytes per partition. Lanes 2q (x) and 2q + 1 (y)."""
    base = SHAPES["vec"](cfg, rng)
    n, G, P = cfg.vec_n, cfg.blocks, parts
    rows = Split(*even(n, P))
    part_lay, part_n = padded(G, P)
    psum_lay, psum_n = padded(1, P)
    arrays = dict(base.arrays)
    arrays.update(part=np.full(part_n, np.nan, np.float32), psum=np.full(psum_n, np.nan, np.float32),
                  sums=np.full(P, np.nan, np.float32))
    layout = {"x": rows, "y": rows, "x2": rows, "y2": rows, "part": part_lay, "psum": psum_lay,
              "sums": Home(0), "res": Home(0)}

    def build(p, A):
        for q in range(P):
            nq = rows.lengths[q]
            x, y, x2, y2 = (inst.piece(A, k, q) for k in ("x", "y", "x2", "y2"))
            psum = inst.piece(A, "psum", q)
            p.launch("square", G, T, x2, x, nq, lane=2 * q)
            p.launch("square", G, T, y2, y, nq, lane=2 * q + 1)
            p.wait(2 * q, p.mark(2 * q + 1))
            p.launch("diff_sum_partial", G, T, inst.piece(A, "part", q), x2, y2, nq, lane=2 * q)
            p.launch("reduce_final", 1, T, psum, inst.piece(A, "part", q), G, SUM, lane=2 * q)
            p.copy(A.sums[q:q + 1], psum, lane=2 * q)
            if q:
                p.wait(0, p.mark(2 * q))
        p.launch("reduce_final", 1, T, A.res, A.sums, P, SUM, lane=0)

    inst = PartitionedInstance(base, P, arrays, [], layout, [l // 2 for l in range(2 * P)], build, base.reference,
                               f"exchanges {P} partial sums (4 B each) per repetition",
                               host_reset=["x", "y"])  # bench_1.py reset_result rewrites x and y
    return inst


# -- B5M Black-Scholes ------------------------------------------------------------------------


def make_bs(cfg, rng, parts):
    """bench_5.py (B5M): K independent option batches; batch k is partition k % P's
    (spot, call and put arrays whole). Nothing is exchanged. Lane k: batch k."""
    base = SHAPES["bs"](cfg, rng)
    K, P = cfg.bs_batches, parts
    layout = {}
    for k in range(K):
        for a in ("spot", "call", "put"):
            layout[f"{a}{k}"] = Home(k % P)
    note = "nothing exchanged" + (f"; {K} batches over {P} partitions: unbalanced ({-(-K // P)} vs {K // P})"
                                  if K % P else "")
    return PartitionedInstance(base, P, base.arrays, [], layout, [k % P for k in range(K)], base.build,
                               base.reference, note,
                               host_reset=[f"spot{k}" for k in range(K)])  # bench_5.py reset_result rewrites x[i]


# -- B6M ML ensemble -------------------------------------------------------------------------


def make_ml(cfg, rng, parts):
    """bench_6.py (B6M): the rows split into P partitions, each running both branches
    and the argmax on its rows; the small weights and statistics are read by all.
    Partition q's X (and Z) is its rows' feature-major block, its scores the rows'
    class-major block. Nothing is exchanged. Lanes 2q (NB) and 2q + 1 (ridge)."""
    base = SHAPES["ml"](cfg, rng)
    rows, F, C, G, P = cfg.ml_rows, cfg.ml_features, NCLASS, cfg.blocks, parts
    r0, rn = even(rows, P)
    row_lay = Split(r0, rn)

    def blocked(width):  # (starts, lengths) and the source blocks of a width-major (width, rows) array
        starts = [width * s for s in r0]
        return Split(starts, [width * m for m in rn]), [(f, s, s + m) for s, m in zip(r0, rn) for f in range(width)]

    x_lay, x_blocks = blocked(F)
    s_lay, s_blocks = blocked(C)

    def to_parts(a, blocks):
        return _relayout(a, [(f * rows + lo, f * rows + hi) for f, lo, hi in blocks]) if P > 1 else a

    arrays = dict(base.arrays)
    arrays["X"] = to_parts(base.arrays["X"], x_blocks)
    layout = {"X": x_lay, "Z": x_lay, "za": s_lay, "zb": s_lay, "la": row_lay, "lb": row_lay, "out": row_lay}
    for k in ("Wa", "ba", "Wb", "bb", "mu", "isd"):
        layout[k] = Replicated()

    def build(p, A):
        W = {k: getattr(A, k) for k in ("Wa", "ba", "Wb", "bb", "mu", "isd")}
        for q in range(P):
            m = rn[q]
            X, Z, za, zb, la, lb, out = (inst.piece(A, k, q) for k in ("X", "Z", "za", "zb", "la", "lb", "out"))
            p.launch("linear_scores", G, T, za, X, W["Wa"], W["ba"], m, F, lane=2 * q)
            p.launch("row_logsumexp", G, T, la, za, m, lane=2 * q)
            p.launch("softmax_apply", G, T, za, la, m, lane=2 * q)
            p.launch("standardize", G, T, Z, X, W["mu"], W["isd"], m, F, lane=2 * q + 1)
            p.launch("linear_scores", G, T, zb, Z, W["Wb"], W["bb"], m, F, lane=2 * q + 1)
            p.launch("row_logsumexp", G, T, lb, zb, m, lane=2 * q + 1)
            p.launch("softmax_apply", G, T, zb, lb, m, lane=2 * q + 1)
            p.wait(2 * q, p.mark(2 * q + 1))
            p.launch("argmax_sum", G, T, out, za, zb, m, lane=2 * q)

    def reference():
        ref = dict(base.reference())
        for k in ("za", "zb"):
            ref[k] = to_parts(ref[k], s_blocks)
        return ref

    # host_reset: none. bench_6.py reset_result rewrites only its accumulators (r1, r2,
    # mean, std); these outputs are written whole, and X and the weights, like its x,
    # are set once (init) and stay where the first repetition put them.
    inst = PartitionedInstance(base, P, arrays, [], layout, [l // 2 for l in range(2 * P)], build, reference,
                               "nothing exchanged (the weights are read by every partition)")
    return inst


# -- B9M conjugate gradient ----------------------------------------------------------------------


def make_cg(cfg, rng, parts):
    """bench_9.py (B9M): the rows of A (and of x, r, Ap) split into P partitions; the
    product needs the whole search direction p, so every partition keeps a replica of
    p (array pg, replica q = partition q's piece) and, after updating its rows of p,
    copies them into every other replica (an allgather: (P - 1) / P of p per partition
    per iteration). The dot products are per-partition partial sums exchanged all to
    all (4 B each), so every partition computes the same alpha and beta (the same sum
    in the same order). Lanes 2q (the iteration) and 2q + 1 (x += alpha p)."""
    base = SHAPES["cg"](cfg, rng)
    n, G, P, iters = cfg.cg_n, cfg.blocks, parts, cfg.cg_iters
    rowptr, col, val = base.arrays["rowptr"], base.arrays["col"], base.arrays["val"]
    r0, rn = even(n, P)
    rows = Split(r0, rn)
    nz0 = [int(rowptr[s]) for s in r0]
    nzn = [int(rowptr[s + m]) - int(rowptr[s]) for s, m in zip(r0, rn)]
    # Partition q's rowptr, rebased to its first nonzero, at offset r0[q] + q.
    rp_parts = np.concatenate([rowptr[s:s + m + 1] - rowptr[s] for s, m in zip(r0, rn)]).astype(np.int32)
    rp_lay = Split([s + q for q, s in enumerate(r0)], [m + 1 for m in rn])
    nz_lay = Split(nz0, nzn)
    rep_lay = Split([q * n for q in range(P)], [n] * P)
    scal_lay, scal_n = padded(1, P)
    gath_lay, gath_n = padded(P, P)
    part_lay, part_n = padded(G, P)
    b = base.arrays["p"]  # p0 = r0 = b

    def poison(m):
        return np.full(m, np.nan, np.float32)

    def per_part(v):
        a = poison(scal_n)
        a[scal_lay.starts] = v
        return a

    arrays = {"rowptr": rp_parts, "col": col, "val": val, "x": base.arrays["x"], "r": base.arrays["r"],
              "pg": np.tile(b, P), "rr": per_part(base.arrays["rr"][0]), "Ap": poison(n),
              "part1": poison(part_n), "part2": poison(part_n), "gath1": poison(gath_n), "gath2": poison(gath_n),
              "pAp": poison(scal_n), "rr_new": poison(scal_n), "alpha": poison(scal_n), "beta": poison(scal_n)}
    layout = {"rowptr": rp_lay, "col": nz_lay, "val": nz_lay, "x": rows, "r": rows, "Ap": rows, "pg": rep_lay,
              "rr": scal_lay, "pAp": scal_lay, "rr_new": scal_lay, "alpha": scal_lay, "beta": scal_lay,
              "part1": part_lay, "part2": part_lay, "gath1": gath_lay, "gath2": gath_lay}

    def own_p(A, q, replica):
        """Partition q's rows of replica `replica` of p."""
        s = replica * n + r0[q]
        return A.pg[s:s + rn[q]]

    def slot(A, name, owner, q):
        """Element q (partition q's partial sum) of partition owner's gather buffer."""
        s = gath_lay.starts[owner] + q
        return getattr(A, name)[s:s + 1]

    def send_partial(p, A, name, q):
        """Partition q's partial sum (in its own slot of its gather buffer) into its
        slot of every other partition's gather buffer, on lane 2q."""
        for o in range(P):
            if o != q:
                p.copy(slot(A, name, o, q), slot(A, name, q, q), lane=2 * q)

    def build(p, A):
        pc = {k: [inst.piece(A, k, q) for q in range(P)]
              for k in ("rowptr", "col", "val", "x", "r", "Ap", "rr", "pAp", "rr_new", "alpha", "beta",
                        "part1", "part2", "gath1", "gath2")}
        sent = [None] * P  # partition q's last mark after sending its rows of p
        for it in range(iters):
            if it:  # every replica of p is whole again
                for q in range(P):
                    for o in range(P):
                        if o != q:
                            p.wait(2 * q, sent[o])
            for q in range(P):
                L = 2 * q
                p.launch("spmv_csr_rows", G, T, pc["Ap"][q], pc["rowptr"][q], pc["col"][q], pc["val"][q],
                         A.pg[q * n:(q + 1) * n], rn[q], n, lane=L)
                p.launch("dot_partial", G, T, pc["part1"][q], own_p(A, q, q), pc["Ap"][q], rn[q], lane=L)
                p.launch("reduce_final", 1, T, slot(A, "gath1", q, q), pc["part1"][q], G, SUM, lane=L)
                send_partial(p, A, "gath1", q)
            m1 = [p.mark(2 * q) for q in range(P)]
            for q in range(P):
                L = 2 * q
                for o in range(P):
                    if o != q:
                        p.wait(L, m1[o])
                p.launch("reduce_final", 1, T, pc["pAp"][q], pc["gath1"][q], P, SUM, lane=L)
                p.launch("cg_alpha", 1, 32, pc["alpha"][q], pc["rr"][q], pc["pAp"][q], lane=L)
                p.wait(L + 1, p.mark(L))
                p.launch("axpy", G, T, pc["x"][q], own_p(A, q, q), pc["alpha"][q], 1.0, rn[q], lane=L + 1)
                p.launch("axpy", G, T, pc["r"][q], pc["Ap"][q], pc["alpha"][q], -1.0, rn[q], lane=L)
                p.launch("dot_partial", G, T, pc["part2"][q], pc["r"][q], pc["r"][q], rn[q], lane=L)
                p.launch("reduce_final", 1, T, slot(A, "gath2", q, q), pc["part2"][q], G, SUM, lane=L)
                send_partial(p, A, "gath2", q)
            m2 = [p.mark(2 * q) for q in range(P)]
            for q in range(P):
                L = 2 * q
                for o in range(P):
                    if o != q:
                        p.wait(L, m2[o])
                p.launch("reduce_final", 1, T, pc["rr_new"][q], pc["gath2"][q], P, SUM, lane=L)
                p.launch("cg_beta", 1, 32, pc["beta"][q], pc["rr"][q], pc["rr_new"][q], lane=L)
                p.wait(L, p.mark(L + 1))  # p is overwritten: the x update must have read it
                p.launch("xpby", G, T, own_p(A, q, q), pc["r"][q], pc["beta"][q], rn[q], lane=L)
                for o in range(P):
                    if o != q:
                        p.copy(own_p(A, q, o), own_p(A, q, q), lane=L)
                sent[q] = p.mark(L)

    # host_reset: the state. bench_9.py reset_result rewrites x and the norms t1, t2
    # (its r and p are recomputed from b in the timed run; here they start as b), not
    # the matrix or b, which stay where the first repetition put them.
    inst = PartitionedInstance(base, P, arrays, ["x", "r", "pg", "rr"], layout, [l // 2 for l in range(2 * P)],
                               build, base.reference,
                               f"exchanges per iteration: each partition's rows of p to the {P - 1} other replicas "
                               f"({(P - 1) * 4 * n / 2**20:.1f} MiB in all) and 2 x {P * (P - 1)} partial sums")
    return inst


PARTITIONED = {"vec": make_vec, "bs": make_bs, "ml": make_ml, "cg": make_cg}


def make_partitioned(name, cfg, rng, parts):
    """The partitioned instance of shape `name` (KeyError with the reason for the
    shapes in NOT_PARTITIONED)."""
    if name not in PARTITIONED:
        raise KeyError(f"{name}: {NOT_PARTITIONED.get(name, 'no such shape')}")
    if parts < 1:
        raise ValueError(f"parts {parts} < 1")
    return PARTITIONED[name](cfg, rng, parts)
