"""The shapes of the suite (GrCUDA's benchmarks B1, B5, B6, B7, B8, B9, own kernels),
each one program over the Program interface of backends.py, with its inputs and its
float64 numpy reference.

    inst = SHAPES["vec"](cfg, rng)   # a ShapeInstance
    A = backend.alloc(inst.arrays, inst.state)
    inst.build(backend, A)           # one repetition (launches, and for the hand-written
                                     # backends marks/waits between lanes)
    inst.check({name: output})       # against inst.reference(), raising BenchError

Like GrCUDA's suite, every bulk kernel runs a fixed grid (cfg.blocks x 256 threads,
grid-stride loops), so one kernel does not fill an H100 by itself and independent
kernels can share it; scalar kernels run one block.
"""

import math
import types

import numpy as np

from backends import BenchError
from emulate import black_scholes, sobel2d, spmv
from kernels import NCLASS, REDUCE_OPS, THREADS

SUM, MAX, MIN = REDUCE_OPS["sum"], REDUCE_OPS["max"], REDUCE_OPS["min"]
T = THREADS


class ShapeInstance:
    """arrays: name -> host array (inputs; outputs poisoned with NaN); state: names the
    program reads before writing, restored before every repetition; outputs: name ->
    tolerance spec; lanes: streams of the hand-written version; build(p, A)."""

    def __init__(self, name, arrays, state, outputs, lanes, build, reference, sizes, dag_shape):
        self.name, self.arrays, self.state, self.outputs = name, arrays, list(state), outputs
        self.lanes, self.build, self._reference, self.sizes = lanes, build, reference, sizes
        self.dag_shape = dag_shape
        self._ref = None
        for k in self.state:
            if k not in arrays:
                raise AssertionError(f"{name}: state {k} is not an array")
        for k in outputs:
            if k not in arrays:
                raise AssertionError(f"{name}: output {k} is not an array")
        for k, v in arrays.items():
            if v.dtype not in (np.float32, np.int32) or v.ndim != 1:
                raise AssertionError(f"{name}: array {k} is {v.dtype} {v.shape}; 1-D float32/int32 only")
            if v.size >= 2 ** 30:
                raise AssertionError(f"{name}: array {k} has {v.size} elements; kernels index with int")

    def reference(self):
        if self._ref is None:
            self._ref = self._reference()
        return self._ref

    def nbytes(self):
        return sum(v.nbytes for v in self.arrays.values())

    def check(self, got, label):
        """Compare outputs with the reference; returns {name: error}. Raises BenchError."""
        ref = self.reference()
        errors = {}
        for name, (kind, tol) in self.outputs.items():
            g = np.asarray(got[name])
            r = np.asarray(ref[name])
            if g.shape != r.shape:
                raise BenchError(f"{self.name}/{label}: output {name} has shape {g.shape}, expected {r.shape}")
            if not np.all(np.isfinite(g)):
                bad = int(np.count_nonzero(~np.isfinite(g)))
                raise BenchError(f"{self.name}/{label}: output {name} has {bad} non-finite elements "
                                 f"(unwritten NaN poison or an overflow), first at {int(np.argmin(np.isfinite(g)))}")
            if kind == "relnorm":
                err = float(np.linalg.norm(g.astype(np.float64) - r) / max(np.linalg.norm(r), 1e-300))
                if not err <= tol:
                    raise BenchError(f"{self.name}/{label}: output {name}: |out - ref| / |ref| = {err:.3g} > {tol:g}")
            elif kind == "argmax":
                gap = ref[name + "__gap"]
                wrong = g != r
                err = float(np.count_nonzero(wrong)) / g.size
                if np.any(wrong & (gap > tol)):
                    i = int(np.argmax(wrong & (gap > tol)))
                    raise BenchError(f"{self.name}/{label}: output {name}[{i}] = {g[i]}, reference {r[i]} "
                                     f"(the reference's top-2 gap {gap[i]:.3g} > {tol:g}: not a tie)")
            else:
                raise AssertionError(kind)
            errors[name] = err
        return errors


def _poison(n):
    return np.full(n, np.nan, np.float32)


def _f32(a):
    return np.ascontiguousarray(a, dtype=np.float32)


def _tile_of(cfg, n):
    """The tile count of a scaled configuration (cfg.tile, default 1): inputs of n
    elements are then the first n // tile generated and repeated, so that building
    a large instance costs the host little (the multi-GPU mode's --scale). 1 where n
    is not a multiple."""
    t = int(getattr(cfg, "tile", 1) or 1)
    return t if t > 1 and n % t == 0 else 1


def _gen(cfg, n, gen):
    """gen(m) for m = n (no tiling: the values the suite always had) or n // tile,
    repeated tile times."""
    t = _tile_of(cfg, n)
    return gen(n) if t == 1 else np.tile(_f32(gen(n // t)), t)


def tile_csr(csr, t):
    """t copies of a square CSR matrix on the diagonal (block-diagonal)."""
    rowptr, col, val = csr
    n, nnz = rowptr.size - 1, int(rowptr[-1])
    rp = (rowptr[:-1].astype(np.int64)[None, :] + nnz * np.arange(t)[:, None]).ravel()
    rp = np.concatenate([rp, [nnz * t]]).astype(np.int32)
    cl = (col[:nnz].astype(np.int64)[None, :] + n * np.arange(t)[:, None]).ravel().astype(np.int32)
    return rp, cl, np.tile(val[:nnz], t)


def reduce_into(p, out, part, x, n, op, G, lane):
    """out[0] = op(x[:n]): per-block partials (exactly G of them), then one block."""
    p.launch("reduce_partial", G, T, part, x, n, op, lane=lane)
    p.launch("reduce_final", 1, T, out, part, G, op, lane=lane)


# -- B1 VEC ---------------------------------------------------------------------------------


def make_vec(cfg, rng):
    n, G = cfg.vec_n, cfg.blocks
    arrays = {"x": _f32(_gen(cfg, n, lambda m: rng.uniform(1.0, 2.0, m))),
              "y": _f32(_gen(cfg, n, lambda m: rng.uniform(0.0, 1.0, m))),
              "x2": _poison(n), "y2": _poison(n), "part": _poison(G), "res": _poison(1)}

    def build(p, A):
        p.launch("square", G, T, A.x2, A.x, n, lane=0)
        p.launch("square", G, T, A.y2, A.y, n, lane=1)
        p.wait(0, p.mark(1))
        p.launch("diff_sum_partial", G, T, A.part, A.x2, A.y2, n, lane=0)
        p.launch("reduce_final", 1, T, A.res, A.part, G, SUM, lane=0)

    def reference():
        x, y = arrays["x"].astype(np.float64), arrays["y"].astype(np.float64)
        return {"x2": x * x, "y2": y * y, "res": np.array([np.sum(x * x - y * y)])}

    return ShapeInstance("vec", arrays, [], {"x2": ("relnorm", 1e-6), "y2": ("relnorm", 1e-6), "res": ("relnorm", 1e-4)},
                         2, build, reference, {"n": n},
                         "square(x) || square(y) -> sum(x2 - y2) (partials, final)")


# -- B5 Black-Scholes ----------------------------------------------------------------------

BS_STRIKE, BS_RATE, BS_VOL, BS_T = 50.0, 0.02, 0.3, 1.0


def make_bs(cfg, rng):
    n, K, G = cfg.bs_n, cfg.bs_batches, cfg.blocks
    arrays = {}
    for k in range(K):
        arrays[f"spot{k}"] = _f32(_gen(cfg, n, lambda m: rng.uniform(30.0, 70.0, m)))
        arrays[f"call{k}"] = _poison(n)
        arrays[f"put{k}"] = _poison(n)

    def build(p, A):
        for k in range(K):
            p.launch("black_scholes", G, T, getattr(A, f"call{k}"), getattr(A, f"put{k}"), getattr(A, f"spot{k}"), n,
                     BS_STRIKE, BS_RATE, BS_VOL, BS_T, lane=k)

    def reference():
        out = {}
        for k in range(K):
            out[f"call{k}"], out[f"put{k}"] = black_scholes(arrays[f"spot{k}"], BS_STRIKE, BS_RATE, BS_VOL, BS_T)
        return out

    outputs = {}
    for k in range(K):
        outputs[f"call{k}"] = ("relnorm", 1e-4)
        outputs[f"put{k}"] = ("relnorm", 1e-4)
    return ShapeInstance("bs", arrays, [], outputs, K, build, reference, {"n": n, "batches": K},
                         f"{K} independent Black-Scholes kernels (one per option batch)")


# -- B6 ML ensemble --------------------------------------------------------------------------


def make_ml(cfg, rng):
    rows, F, C, G = cfg.ml_rows, cfg.ml_features, NCLASS, cfg.blocks
    arrays = {
        "X": _f32(np.tile(_f32(rng.standard_normal((F, rows // _tile_of(cfg, rows)))), (1, _tile_of(cfg, rows))).ravel()
                  if _tile_of(cfg, rows) > 1 else rng.standard_normal(F * rows)),  # feature-major
        "Wa": _f32(rng.standard_normal(F * C) / math.sqrt(F)), "ba": _f32(rng.standard_normal(C) * 0.1),
        "Wb": _f32(rng.standard_normal(F * C) / math.sqrt(F)), "bb": _f32(rng.standard_normal(C) * 0.1),
        "mu": _f32(rng.standard_normal(F) * 0.1), "isd": _f32(rng.uniform(0.5, 1.5, F)),
        "Z": _poison(F * rows), "za": _poison(C * rows), "zb": _poison(C * rows),
        "la": _poison(rows), "lb": _poison(rows), "out": _poison(rows),
    }

    def build(p, A):
        # NB-like branch (lane 0): scores, log-sum-exp, softmax.
        p.launch("linear_scores", G, T, A.za, A.X, A.Wa, A.ba, rows, F, lane=0)
        p.launch("row_logsumexp", G, T, A.la, A.za, rows, lane=0)
        p.launch("softmax_apply", G, T, A.za, A.la, rows, lane=0)
        # Ridge-like branch (lane 1): standardize X, scores, log-sum-exp, softmax.
        p.launch("standardize", G, T, A.Z, A.X, A.mu, A.isd, rows, F, lane=1)
        p.launch("linear_scores", G, T, A.zb, A.Z, A.Wb, A.bb, rows, F, lane=1)
        p.launch("row_logsumexp", G, T, A.lb, A.zb, rows, lane=1)
        p.launch("softmax_apply", G, T, A.zb, A.lb, rows, lane=1)
        # Join: argmax of the summed probabilities.
        p.wait(0, p.mark(1))
        p.launch("argmax_sum", G, T, A.out, A.za, A.zb, rows, lane=0)

    def reference():
        X = arrays["X"].astype(np.float64).reshape(F, rows)

        def softmax_scores(Xm, W, b):
            S = W.astype(np.float64).reshape(F, C).T @ Xm + b.astype(np.float64)[:, None]
            S = S - S.max(axis=0)
            E = np.exp(S)
            return E / E.sum(axis=0)

        pa = softmax_scores(X, arrays["Wa"], arrays["ba"])
        Z = (X - arrays["mu"].astype(np.float64)[:, None]) * arrays["isd"].astype(np.float64)[:, None]
        pb = softmax_scores(Z, arrays["Wb"], arrays["bb"])
        s = pa + pb
        top2 = np.sort(s, axis=0)[-2:]
        return {"za": pa.ravel(), "zb": pb.ravel(), "out": np.argmax(s, axis=0).astype(np.float64),
                "out__gap": top2[1] - top2[0]}

    return ShapeInstance("ml", arrays, [], {"za": ("relnorm", 1e-5), "zb": ("relnorm", 1e-5), "out": ("argmax", 1e-4)},
                         2, build, reference, {"rows": rows, "features": F, "classes": C},
                         "NB: scores->lse->softmax || RR: standardize->scores->lse->softmax, then argmax")


# -- B7 HITS -------------------------------------------------------------------------------------


def random_csr(rng, n, deg):
    """A: every row `deg` random columns, values in [0.5, 1.5]; and A^T, both CSR (int32)."""
    rowptr = np.arange(0, n * deg + 1, deg, dtype=np.int32)
    col = rng.integers(0, n, n * deg).astype(np.int32)
    val = _f32(rng.uniform(0.5, 1.5, n * deg))
    rows = np.repeat(np.arange(n, dtype=np.int32), deg)
    order = np.argsort(col, kind="stable")
    t_rowptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(col, minlength=n), out=t_rowptr[1:])
    return (rowptr, col, val), (t_rowptr.astype(np.int32), rows[order].astype(np.int32), val[order].copy())


def make_hits(cfg, rng):
    n, deg, iters, G = cfg.hits_n, cfg.hits_degree, cfg.hits_iters, cfg.blocks
    t = _tile_of(cfg, n)
    (rp, cl, vl), (trp, tcl, tvl) = random_csr(rng, n // t, deg)
    if t > 1:  # t disjoint copies of the graph
        (rp, cl, vl), (trp, tcl, tvl) = tile_csr((rp, cl, vl), t), tile_csr((trp, tcl, tvl), t)
    arrays = {"A_rowptr": rp, "A_col": cl, "A_val": vl, "AT_rowptr": trp, "AT_col": tcl, "AT_val": tvl,
              "auth1": np.ones(n, np.float32), "hub1": np.ones(n, np.float32),
              "auth2": _poison(n), "hub2": _poison(n), "pa": _poison(G), "ph": _poison(G),
              "na": _poison(1), "nh": _poison(1)}

    def build(p, A):
        da = dh = None
        for it in range(iters):
            if it:
                p.wait(0, dh)  # auth2 = A^T hub1 needs the last hub1
                p.wait(1, da)  # hub2 = A auth1 needs the last auth1
            p.launch("spmv_csr", G, T, A.auth2, A.AT_rowptr, A.AT_col, A.AT_val, A.hub1, n, lane=0)
            ea = p.mark(0)
            p.launch("spmv_csr", G, T, A.hub2, A.A_rowptr, A.A_col, A.A_val, A.auth1, n, lane=1)
            eh = p.mark(1)
            reduce_into(p, A.na, A.pa, A.auth2, n, SUM, G, lane=0)
            p.wait(0, eh)  # auth1 is overwritten: hub2's spmv must have read it
            p.launch("divide", G, T, A.auth1, A.auth2, A.na, n, lane=0)
            da = p.mark(0)
            reduce_into(p, A.nh, A.ph, A.hub2, n, SUM, G, lane=1)
            p.wait(1, ea)  # hub1 is overwritten: auth2's spmv must have read it
            p.launch("divide", G, T, A.hub1, A.hub2, A.nh, n, lane=1)
            dh = p.mark(1)

    def reference():
        auth, hub = np.ones(n), np.ones(n)
        for _ in range(iters):
            a2 = spmv(trp, tcl, tvl, hub, n)
            h2 = spmv(rp, cl, vl, auth, n)
            auth, hub = a2 / a2.sum(), h2 / h2.sum()
        return {"auth1": auth, "hub1": hub}

    return ShapeInstance("hits", arrays, ["auth1", "hub1"], {"auth1": ("relnorm", 1e-4), "hub1": ("relnorm", 1e-4)},
                         2, build, reference, {"n": n, "degree": deg, "iterations": iters},
                         f"{iters} x (spmv A^T -> sum -> divide || spmv A -> sum -> divide), chains crossing")


# -- B8 image pipeline ----------------------------------------------------------------------

IMG_SMALL, IMG_LARGE, IMG_UNSHARP = (2, 1.0), (6, 3.0), (3, 1.5)  # (radius, sigma)
IMG_AMOUNT = 0.5


def make_img(cfg, rng):
    h = w = cfg.img_side
    n, G = h * w, cfg.blocks
    arrays = {"img": _f32(rng.uniform(0.0, 1.0, n))}
    for k in ("bs", "bl", "bu", "ms", "ml", "iu", "i2", "i3"):
        arrays[k] = _poison(n)
    for k in ("pmax", "pmin"):
        arrays[k] = _poison(G)
    for k in ("mx", "mn"):
        arrays[k] = _poison(1)

    def build(p, A):
        # lane 0: small blur -> sobel
        p.launch("blur", G, T, A.bs, A.img, h, w, *IMG_SMALL, lane=0)
        p.launch("sobel", G, T, A.ms, A.bs, h, w, lane=0)
        e_ms = p.mark(0)
        # lane 1: large blur -> sobel -> max; lane 2: min of the same mask
        p.launch("blur", G, T, A.bl, A.img, h, w, *IMG_LARGE, lane=1)
        p.launch("sobel", G, T, A.ml, A.bl, h, w, lane=1)
        e_ml = p.mark(1)
        reduce_into(p, A.mx, A.pmax, A.ml, n, MAX, G, lane=1)
        p.wait(2, e_ml)
        reduce_into(p, A.mn, A.pmin, A.ml, n, MIN, G, lane=2)
        e_min = p.mark(2)
        # lane 3: unsharp mask of the image
        p.launch("blur", G, T, A.bu, A.img, h, w, *IMG_UNSHARP, lane=3)
        p.launch("unsharpen", G, T, A.iu, A.img, A.bu, IMG_AMOUNT, n, lane=3)
        e_u = p.mark(3)
        # lane 1: extend the large mask, combine twice
        p.wait(1, e_min)
        p.launch("extend", G, T, A.ml, A.mn, A.mx, n, lane=1)
        p.wait(1, e_u)
        p.launch("combine", G, T, A.i2, A.iu, A.bl, A.ml, n, lane=1)
        p.wait(1, e_ms)
        p.launch("combine", G, T, A.i3, A.i2, A.bs, A.ms, n, lane=1)

    def reference():
        img = arrays["img"]
        bs = separable_blur(img, h, w, *IMG_SMALL)
        bl = separable_blur(img, h, w, *IMG_LARGE)
        bu = separable_blur(img, h, w, *IMG_UNSHARP)
        ms, ml = sobel2d(bs, h, w), sobel2d(bl, h, w)
        ml = (ml - ml.min()) / (ml.max() - ml.min())
        iu = img.astype(np.float64) * (1.0 + IMG_AMOUNT) - bu * IMG_AMOUNT

        def comb(a, b, m):
            m = np.clip(m, 0.0, 1.0)
            return a * m + b * (1.0 - m)

        i2 = comb(iu, bl, ml)
        return {"ml": ml, "i2": i2, "i3": comb(i2, bs, ms)}

    return ShapeInstance("img", arrays, [], {"ml": ("relnorm", 1e-4), "i2": ("relnorm", 1e-4), "i3": ("relnorm", 1e-4)},
                         4, build, reference, {"height": h, "width": w},
                         "blur_s->sobel || blur_l->sobel->(max || min)->extend || blur_u->unsharpen; combine x2")


def separable_blur(img, h, w, radius, sigma):
    """The kernel's normalized 2-D Gaussian with clamped borders, as two 1-D passes
    (the weights and the clamping factor per axis; float64)."""
    I = img[:h * w].reshape(h, w).astype(np.float64)
    d = np.arange(-radius, radius + 1)
    g = np.exp(-(d * d) / (2.0 * sigma * sigma))
    g /= g.sum()
    rows = np.zeros_like(I)
    for k, wt in zip(d, g):
        rows += wt * I[:, np.clip(np.arange(w) + k, 0, w - 1)]
    out = np.zeros_like(I)
    for k, wt in zip(d, g):
        out += wt * rows[np.clip(np.arange(h) + k, 0, h - 1), :]
    return out.ravel()


# -- B9 conjugate gradient ------------------------------------------------------------------


def spd_csr(rng, n, k):
    """A symmetric, strictly diagonally dominant (so positive definite) sparse matrix:
    each row links to k random other rows (both directions), off-diagonals in
    [-1, -0.1], diagonal = sum of |off-diagonals| + 1. CSR, columns sorted."""
    i = np.repeat(np.arange(n, dtype=np.int64), k)
    j = (i + rng.integers(1, n, i.size)) % n  # never i
    v = -rng.uniform(0.1, 1.0, i.size)
    rows = np.concatenate([i, j, np.arange(n)])
    cols = np.concatenate([j, i, np.arange(n)])
    off = np.concatenate([v, v])
    diag = np.bincount(rows[:off.size], weights=-off, minlength=n) + 1.0
    vals = np.concatenate([off, diag])
    order = np.lexsort((cols, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    rowptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=rowptr[1:])
    return rowptr.astype(np.int32), cols.astype(np.int32), _f32(vals)


def make_cg(cfg, rng):
    n, k, iters, G = cfg.cg_n, cfg.cg_neighbors, cfg.cg_iters, cfg.blocks
    t = _tile_of(cfg, n)
    rowptr, col, val = spd_csr(rng, n // t, k)
    if t > 1:  # block-diagonal: still symmetric and diagonally dominant
        rowptr, col, val = tile_csr((rowptr, col, val), t)
    b = _f32(_gen(cfg, n, lambda m: rng.uniform(-1.0, 1.0, m)))
    rr0 = np.float32(np.dot(b.astype(np.float64), b.astype(np.float64)))
    arrays = {"rowptr": rowptr, "col": col, "val": val,
              "x": np.zeros(n, np.float32), "r": b.copy(), "p": b.copy(), "rr": np.array([rr0], np.float32),
              "Ap": _poison(n), "part1": _poison(G), "part2": _poison(G),
              "pAp": _poison(1), "rr_new": _poison(1), "alpha": _poison(1), "beta": _poison(1)}

    def build(p, A):
        for _ in range(iters):
            p.launch("spmv_csr", G, T, A.Ap, A.rowptr, A.col, A.val, A.p, n, lane=0)
            p.launch("dot_partial", G, T, A.part1, A.p, A.Ap, n, lane=0)
            p.launch("reduce_final", 1, T, A.pAp, A.part1, G, SUM, lane=0)
            p.launch("cg_alpha", 1, 32, A.alpha, A.rr, A.pAp, lane=0)
            ea = p.mark(0)
            p.wait(1, ea)
            p.launch("axpy", G, T, A.x, A.p, A.alpha, 1.0, n, lane=1)  # x += alpha p (lane 1)
            ex = p.mark(1)
            p.launch("axpy", G, T, A.r, A.Ap, A.alpha, -1.0, n, lane=0)  # r -= alpha Ap
            p.launch("dot_partial", G, T, A.part2, A.r, A.r, n, lane=0)
            p.launch("reduce_final", 1, T, A.rr_new, A.part2, G, SUM, lane=0)
            p.launch("cg_beta", 1, 32, A.beta, A.rr, A.rr_new, lane=0)
            p.wait(0, ex)  # p is overwritten: the x update must have read it
            p.launch("xpby", G, T, A.p, A.r, A.beta, n, lane=0)

    def reference():
        bb = b.astype(np.float64)
        x, r, pp = np.zeros(n), bb.copy(), bb.copy()
        rr = float(np.dot(bb, bb))
        for _ in range(iters):
            Ap = spmv(rowptr, col, val, pp, n)
            alpha = rr / float(np.dot(pp, Ap))
            x += alpha * pp
            r -= alpha * Ap
            rr_new = float(np.dot(r, r))
            pp = r + (rr_new / rr) * pp
            rr = rr_new
        return {"x": x}

    return ShapeInstance("cg", arrays, ["x", "r", "p", "rr"], {"x": ("relnorm", 1e-4)}, 2, build, reference,
                         {"n": n, "nnz": int(rowptr[-1]), "iterations": iters},
                         f"{iters} x (spmv -> dot -> alpha -> (x += alpha p || r -= alpha Ap -> dot -> beta) -> p)")


SHAPES = {"vec": make_vec, "bs": make_bs, "ml": make_ml, "hits": make_hits, "img": make_img, "cg": make_cg}

# Sizes. full: kernels of ~0.1-10 ms at the default grid on an H100; quick: a smoke test.
QUICK = dict(vec_n=1 << 16, bs_n=1 << 14, bs_batches=10, ml_rows=1 << 12, ml_features=32,
             hits_n=1 << 12, hits_degree=8, hits_iters=2, img_side=128, cg_n=1 << 12, cg_neighbors=4, cg_iters=3)
FULL = dict(vec_n=1 << 24, bs_n=1 << 22, bs_batches=10, ml_rows=1 << 19, ml_features=64,
            hits_n=1 << 20, hits_degree=16, hits_iters=5, img_side=2048, cg_n=1 << 20, cg_neighbors=4, cg_iters=20)
# --dry: small enough for the numpy emulation of every kernel.
DRY = dict(vec_n=5000, bs_n=3000, bs_batches=10, ml_rows=700, ml_features=16,
           hits_n=900, hits_degree=5, hits_iters=3, img_side=48, cg_n=800, cg_neighbors=4, cg_iters=6)


def config(mode, blocks=64, **over):
    """The sizes of a mode; `over` replaces some (tile: see _tile_of)."""
    base = {"quick": QUICK, "full": FULL, "dry": DRY}[mode]
    cfg = dict(base, blocks=blocks, tile=1)
    for k, v in over.items():
        if k not in cfg:
            raise KeyError(f"unknown size {k}")
        cfg[k] = v
    return types.SimpleNamespace(**cfg)
