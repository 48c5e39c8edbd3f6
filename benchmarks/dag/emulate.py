"""--dry: what can be checked without CUDA.

* ``Emulator``: numpy versions of every kernel in kernels.py, run in program order
  over float32 host arrays, so a shape's program (argument order, slices, sizes) is
  checked against its float64 numpy reference exactly as the GPU run checks it.
* The same backend tracks the hand-written lane structure with vector clocks: every
  pair of launches that touch overlapping bytes of one array, one of them writing,
  must be ordered by lane order or a mark/wait chain; otherwise the cupy-streams
  and cuda-graph backends would race. ``races`` lists the unordered pairs.
* ``DagDry``: an ``ExecutionContext(transfers=False, gpus=[])`` with the shape's
  arrays wrapped as CUDA arrays over host memory; each launch goes through
  ucxx_go's own ``pack_arguments`` (the checks build_kernel's launches make), and
  nothing runs.
"""

import types

import numpy as np

from backends import Program, check_launch, convert_scalars, params_of
from kernels import KERNELS, NCLASS, REDUCE_OPS

_FMAX = np.float32(3.402823466e38)


def _block_of(n, grid, block):
    return (np.arange(n) // block) % grid


def _identity(op):
    return {0: np.float32(0), 1: -_FMAX, 2: _FMAX}[op]


def _fold(vals, op):
    if vals.size == 0:
        return _identity(op)
    return {0: vals.sum(dtype=np.float64), 1: vals.max(), 2: vals.min()}[op]


def _clip(i, hi):
    return np.clip(i, 0, hi - 1)


def k_square(g, b, y, x, n):
    y[:n] = x[:n] * x[:n]


def k_reduce_partial(g, b, part, x, n, op):
    ids = _block_of(n, g, b)
    for blk in range(g):
        part[blk] = _fold(x[:n][ids == blk], op)


def k_dot_partial(g, b, part, a, bb, n):
    prod = a[:n].astype(np.float64) * bb[:n]
    ids = _block_of(n, g, b)
    for blk in range(g):
        part[blk] = prod[ids == blk].sum()


def k_diff_sum_partial(g, b, part, a, bb, n):
    d = a[:n].astype(np.float64) - bb[:n]
    ids = _block_of(n, g, b)
    for blk in range(g):
        part[blk] = d[ids == blk].sum()


def k_reduce_final(g, b, out, part, nparts, op):
    out[0] = _fold(part[:nparts], op)


def k_divide(g, b, y, x, s, n):
    y[:n] = x[:n] / s[0]


def cnd(d):
    """A&S 26.2.17, as the kernel (float64 here)."""
    a1, a2, a3, a4, a5 = 0.31938153, -0.356563782, 1.781477937, -1.821255978, 1.330274429
    k = 1.0 / (1.0 + 0.2316419 * np.abs(d))
    c = 0.39894228040143267794 * np.exp(-0.5 * d * d) * (k * (a1 + k * (a2 + k * (a3 + k * (a4 + k * a5)))))
    return np.where(d > 0, 1.0 - c, c)


def black_scholes(spot, strike, rate, vol, t):
    s = spot.astype(np.float64)
    sqrt_t = np.sqrt(t)
    d1 = (np.log(s / strike) + (rate + 0.5 * vol * vol) * t) / (vol * sqrt_t)
    d2 = d1 - vol * sqrt_t
    c1, c2 = cnd(d1), cnd(d2)
    disc = np.exp(-rate * t)
    return s * c1 - strike * disc * c2, strike * disc * (1.0 - c2) - s * (1.0 - c1)


def k_black_scholes(g, b, call, put, spot, n, strike, rate, vol, t):
    c, p = black_scholes(spot[:n], strike, rate, vol, t)
    call[:n], put[:n] = c, p


def k_standardize(g, b, z, x, mu, inv_sd, rows, nfeat):
    X = x[:rows * nfeat].reshape(nfeat, rows)
    z[:rows * nfeat] = ((X - mu[:nfeat, None]) * inv_sd[:nfeat, None]).ravel()


def k_linear_scores(g, b, scores, x, w, bias, rows, nfeat):
    X = x[:rows * nfeat].reshape(nfeat, rows).astype(np.float64)
    W = w[:nfeat * NCLASS].reshape(nfeat, NCLASS).astype(np.float64)
    scores[:rows * NCLASS] = (W.T @ X + bias[:NCLASS, None]).ravel()


def k_row_logsumexp(g, b, lse, scores, rows):
    S = scores[:rows * NCLASS].reshape(NCLASS, rows).astype(np.float64)
    m = S.max(axis=0)
    lse[:rows] = m + np.log(np.exp(S - m).sum(axis=0))


def k_softmax_apply(g, b, scores, lse, rows):
    S = scores[:rows * NCLASS].reshape(NCLASS, rows).astype(np.float64)
    scores[:rows * NCLASS] = np.exp(S - lse[None, :rows]).ravel()


def k_argmax_sum(g, b, out, pa, pb, rows):
    s = pa[:rows * NCLASS].reshape(NCLASS, rows) + pb[:rows * NCLASS].reshape(NCLASS, rows)
    out[:rows] = np.argmax(s, axis=0)


def spmv(rowptr, col, val, x, n):
    counts = np.diff(rowptr[:n + 1].astype(np.int64))
    rows = np.repeat(np.arange(n), counts)
    nnz = int(rowptr[n])
    return np.bincount(rows, weights=val[:nnz].astype(np.float64) * x[col[:nnz]], minlength=n)


def k_spmv_csr(g, b, y, rowptr, col, val, x, n):
    y[:n] = spmv(rowptr, col, val, x, n)


def k_spmv_csr_rows(g, b, y, rowptr, col, val, x, n, ncols):
    nnz = int(rowptr[n]) - int(rowptr[0])
    rp = rowptr[:n + 1].astype(np.int64) - int(rowptr[0])
    y[:n] = spmv(rp, col[:nnz], val[:nnz], x[:ncols], n)


def k_cg_alpha(g, b, alpha, rr, pap):
    alpha[0] = rr[0] / pap[0]


def k_cg_beta(g, b, beta, rr, rr_new):
    beta[0] = rr_new[0] / rr[0]
    rr[0] = rr_new[0]


def k_axpy(g, b, y, x, alpha, sign, n):
    y[:n] += np.float32(sign) * alpha[0] * x[:n]


def k_xpby(g, b, p, r, beta, n):
    p[:n] = r[:n] + beta[0] * p[:n]


def blur2d(img, h, w, radius, sigma):
    """The kernel's 2-D sum, direct (float64)."""
    I = img[:h * w].reshape(h, w).astype(np.float64)
    ys, xs = np.arange(h), np.arange(w)
    acc = np.zeros((h, w))
    wsum = 0.0
    for dy in range(-radius, radius + 1):
        rows = I[_clip(ys + dy, h)]
        for dx in range(-radius, radius + 1):
            wt = np.exp(-(dx * dx + dy * dy) / (2.0 * sigma * sigma))
            acc += wt * rows[:, _clip(xs + dx, w)]
            wsum += wt
    return (acc / wsum).ravel()


def k_blur(g, b, out, img, h, w, radius, sigma):
    out[:h * w] = blur2d(img, h, w, radius, sigma)


def sobel2d(img, h, w):
    I = img[:h * w].reshape(h, w).astype(np.float64)
    ym, yp = _clip(np.arange(h) - 1, h), _clip(np.arange(h) + 1, h)
    xm, xp = _clip(np.arange(w) - 1, w), _clip(np.arange(w) + 1, w)
    y = np.arange(h)
    x = np.arange(w)
    gx = (I[ym][:, xp] + 2 * I[y][:, xp] + I[yp][:, xp]) - (I[ym][:, xm] + 2 * I[y][:, xm] + I[yp][:, xm])
    gy = (I[yp][:, xm] + 2 * I[yp][:, x] + I[yp][:, xp]) - (I[ym][:, xm] + 2 * I[ym][:, x] + I[ym][:, xp])
    return np.sqrt(gx * gx + gy * gy).ravel()


def k_sobel(g, b, out, img, h, w):
    out[:h * w] = sobel2d(img, h, w)


def k_extend(g, b, mask, mn, mx, n):
    mask[:n] = (mask[:n] - mn[0]) / (mx[0] - mn[0])


def k_unsharpen(g, b, out, img, blurred, amount, n):
    out[:n] = img[:n] * (1.0 + amount) - blurred[:n] * amount


def k_combine(g, b, out, a, bb, mask, n):
    m = np.clip(mask[:n], 0.0, 1.0)
    out[:n] = a[:n] * m + bb[:n] * (1.0 - m)


def k_touch(g, b, a, n):
    a[:n] += 1.0


def _loop(v, work, a, b):
    if a == 1.0 and b == 0.0:
        return v
    v = v.astype(np.float32)
    for _ in range(work):
        v = v * np.float32(a) + np.float32(b)
    return v


def produced(base, n):
    return ((base + np.arange(n, dtype=np.int64)) % 1000003).astype(np.float32) * np.float32(0.5)


def k_produce(g, b, out, base, n, work, a, bb):
    out[:n] = _loop(produced(base, n), work, a, bb)


def k_consume(g, b, out, x, n, work, a, bb):
    out[:n] = _loop(x[:n], work, a, bb) + np.float32(1.0)


def k_stencil3(g, b, out, x, n_out, w0, w1, w2):
    xx = x[:n_out + 2].astype(np.float64)
    out[:n_out] = w0 * xx[:n_out] + w1 * xx[1:n_out + 1] + w2 * xx[2:n_out + 2]


EMULATED = {name[2:]: fn for name, fn in globals().items() if name.startswith("k_")}
missing = set(KERNELS) - set(EMULATED)
if missing:
    raise ImportError(f"emulate.py: no numpy version of {sorted(missing)}")


# -- the lane structure's ordering ----------------------------------------------------------


def _root_range(a):
    """(id of the root buffer, first byte, end byte) of a numpy view."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    start = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return id(root), start, start + a.nbytes


class Emulator(Program):
    """Runs a program with numpy, and checks its lane structure (see the module doc)."""

    name = "emulate"
    checking = True

    def __init__(self, lanes):
        self.lanes = max(1, lanes)
        self.clock = [np.zeros(self.lanes, np.int64) for _ in range(self.lanes)]
        self.history = []  # (index, lane, stamp, [(root, lo, hi, write)], name)
        self.races = []
        self.arrays = None

    def alloc(self, host_arrays, state):
        self.host = {k: v.copy() for k, v in host_arrays.items()}
        self.arrays = types.SimpleNamespace(**self.host)
        return self.arrays

    def read(self, name):
        return self.host[name]

    def begin(self):
        for lane in range(1, self.lanes):
            self.clock[lane] = np.maximum(self.clock[lane], self.clock[0])

    def mark(self, lane):
        self._lane(lane)
        return self.clock[lane].copy()

    def wait(self, lane, token):
        self._lane(lane)
        if token is None:
            raise AssertionError(f"wait on lane {lane} for no mark")
        self.clock[lane] = np.maximum(self.clock[lane], token)

    def _lane(self, lane):
        if not 0 <= lane < self.lanes:
            raise AssertionError(f"lane {lane}: the shape declared {self.lanes} lanes")

    def launch(self, name, grid, block, *args, lane=0):
        self._lane(lane)
        check_launch(name, grid, block, args, len, lambda a: a.dtype)
        params = params_of(name)
        accesses = []
        for p, a in zip(params, args):
            if p.pointer:
                root, lo, hi = _root_range(a)
                accesses.append((root, lo, hi, p.access == "write"))
        self._order(lane, accesses, name)
        EMULATED[name](grid, block, *convert_scalars(name, args, False))

    def copy(self, dst, src, lane=0):
        """dst[:] = src on `lane` (an exchange between partitions): ordered and
        race-checked as a launch that reads src and writes dst."""
        self._lane(lane)
        if dst.dtype != src.dtype or dst.shape != src.shape:
            raise AssertionError(f"copy of {src.dtype} {src.shape} into {dst.dtype} {dst.shape}")
        self._order(lane, [(*_root_range(src), False), (*_root_range(dst), True)], "copy")
        dst[...] = src

    def _order(self, lane, accesses, name):
        """Stamp one operation of `lane` touching `accesses` [(root, lo, hi, write)] and
        record a race for each earlier operation of another lane that touches
        overlapping bytes (one of the two writing) without being ordered before it."""
        self.clock[lane][lane] += 1
        stamp = self.clock[lane].copy()
        me = len(self.history)
        for (j, other_lane, other_stamp, other_acc, other_name) in self.history:
            if other_lane == lane or other_stamp[other_lane] <= stamp[other_lane]:
                continue  # ordered before this launch
            for (r1, lo1, hi1, w1) in other_acc:
                hit = next(((lo2, hi2, w2) for (r2, lo2, hi2, w2) in accesses
                            if r2 == r1 and lo1 < hi2 and lo2 < hi1 and (w1 or w2)), None)
                if hit is not None:
                    self.races.append(f"launch {j} ({other_name}, lane {other_lane}) and launch {me} ({name}, lane {lane}) "
                                      f"touch bytes [{max(lo1, hit[0])}, {min(hi1, hit[1])}) of one array, unordered")
                    break
        self.history.append((me, lane, stamp, accesses, name))

    def end(self):
        pass


class FakeCuda:
    """__cuda_array_interface__ over a numpy array (as tests/test_execution.py does):
    ucxx_go wraps it as a device array; nothing ever reaches a GPU."""

    def __init__(self, a):
        self._a = a
        self.__cuda_array_interface__ = {"shape": a.shape, "typestr": a.dtype.str,
                                         "data": (a.ctypes.data, False), "version": 3}


class DagDry(Program):
    """Each launch through ucxx_go's pack_arguments over an ExecutionContext without
    GPUs; nothing runs."""

    name = "dag-dry"
    checking = True

    def __init__(self):
        import ucxx_go

        self.ctx = ucxx_go.ExecutionContext(policy="async", transfers=False, gpus=[])
        self.launches = self.copies = 0

    def alloc(self, host_arrays, state):
        self._keep = [FakeCuda(v.copy()) for v in host_arrays.values()]
        return types.SimpleNamespace(**{k: self.ctx.wrap(f) for k, f in zip(host_arrays, self._keep)})

    def launch(self, name, grid, block, *args, lane=0):
        from ucxx_go._execution import pack_arguments

        check_launch(name, grid, block, args, len, lambda a: a.dtype)
        pack_arguments(self.ctx, params_of(name), convert_scalars(name, args, False), name)
        self.launches += 1

    def copy(self, dst, src, lane=0):
        """The checks ExecutionContext.copy makes before scheduling (equal byte sizes,
        arrays of this context); nothing is scheduled."""
        from ucxx_go._execution import DeviceArray

        if not (isinstance(dst, DeviceArray) and isinstance(src, DeviceArray)):
            raise AssertionError(f"copy between {type(dst).__name__} and {type(src).__name__}: not context arrays")
        if dst.nbytes != src.nbytes or dst.dtype != src.dtype:
            raise AssertionError(f"copy of {src.nbytes} bytes ({src.dtype}) into {dst.nbytes} ({dst.dtype})")
        self.copies += 1

    def close(self):
        self.ctx.close()


def dry_reduce_ops():
    return dict(REDUCE_OPS)


class FakeMultiRT:
    """What cupy-multi asks of CUDA (multigpu.CupyRT), without CUDA, for --dry. Streams
    and events carry their device, and the rules of a multi-GPU program are asserted:
    a kernel launched and an event recorded with the stream's device current, an event
    recorded only on a stream of its own device, a wait only for an event recorded in
    this repetition (waiting may cross devices). Launches run on the numpy Emulator,
    one emulator lane per stream; events carry its vector clocks, so the race check
    covers the cross-device structure exactly as the one-GPU one."""

    def __init__(self, emu, devs):
        self.emu, self.devs = emu, list(devs)
        self.streams, self.events = [], []
        self.launches = self.cross_waits = self.records = self.copies = self.peer_copies = self.uploads = 0
        self.prefetches = 0
        self.per_device = {d: 0 for d in self.devs}

    def _dev(self, d):
        if d not in self.devs:
            raise AssertionError(f"device {d} is not one of {self.devs}")

    def stream(self, d):
        self._dev(d)
        s = types.SimpleNamespace(dev=d, lane=len(self.streams), ptr=0)
        if s.lane >= self.emu.lanes:
            raise AssertionError(f"stream {s.lane}: the emulator has {self.emu.lanes} lanes")
        self.streams.append(s)
        return s

    def event(self, d):
        self._dev(d)
        ev = types.SimpleNamespace(dev=d, clock=None)
        self.events.append(ev)
        return ev

    def record(self, ev, s, d):
        if not (d == s.dev == ev.dev):
            raise AssertionError(f"event of GPU {ev.dev} recorded on a stream of GPU {s.dev} with GPU {d} current")
        ev.clock = self.emu.mark(s.lane)
        self.records += 1

    def wait(self, s, ev, d):
        if d != s.dev:
            raise AssertionError(f"wait on a stream of GPU {s.dev} with GPU {d} current")
        if ev.clock is None:
            raise AssertionError("wait for an event not recorded in this repetition")
        if ev.dev != s.dev:
            self.cross_waits += 1
        self.emu.wait(s.lane, ev.clock)

    def launch(self, name, grid, block, args, s, d):
        if d != s.dev:
            raise AssertionError(f"{name} launched on a stream of GPU {s.dev} with GPU {d} current")
        self.launches += 1
        self.per_device[d] += 1
        self.emu.launch(name, grid, block, *args, lane=s.lane)

    def synchronize(self, streams, devs):
        self.end_repetition()

    def end_repetition(self):
        """Every stream and device synchronized: all lanes after everything; the events
        of this repetition are spent."""
        m = np.maximum.reduce(self.emu.clock)
        for lane in range(self.emu.lanes):
            self.emu.clock[lane] = m.copy()
        for ev in self.events:
            ev.clock = None

    def copy_async(self, dst, dst_dev, src, src_dev, s, d):
        """An exchange on stream s (cudaMemcpyPeerAsync): issued with the stream's
        device current; across devices when dst_dev != src_dev."""
        if d != s.dev:
            raise AssertionError(f"copy issued on a stream of GPU {s.dev} with GPU {d} current")
        self._dev(dst_dev)
        self._dev(src_dev)
        if s.dev not in (dst_dev, src_dev):
            raise AssertionError(f"copy GPU {src_dev} -> GPU {dst_dev} issued on a stream of GPU {s.dev}")
        self.copies += 1
        self.peer_copies += dst_dev != src_dev
        self.emu.copy(dst, src, lane=s.lane)

    def upload_async(self, dst, src, s, d):
        """Host memory into device memory of GPU d on stream s (cudaMemcpyAsync),
        issued with the stream's device current: race-checked as a copy on its lane."""
        if d != s.dev:
            raise AssertionError(f"upload issued on a stream of GPU {s.dev} with GPU {d} current")
        self.uploads += 1
        self.emu.copy(dst, src, lane=s.lane)

    def empty(self, d, n, dtype):
        """Device memory of GPU d (here a host array, poisoned)."""
        self._dev(d)
        return np.full(n, np.nan, dtype) if np.dtype(dtype).kind == "f" else np.full(n, -1, dtype)

    def empty_managed(self, n, dtype):
        """Managed memory (here a host array, poisoned)."""
        return self.empty(self.devs[0], n, dtype)

    def copy_default(self, dst, src):
        """A synchronous copy of managed or device memory (setup, reading results)."""
        dst[...] = src

    def prefetch_async(self, x, d, s):
        """A prefetch of managed x to GPU d on stream s, issued with the stream's device
        current: race-checked as a rewrite of x on its lane (the lanes that read x must
        wait for it, as for an upload)."""
        if d != s.dev:
            raise AssertionError(f"prefetch issued on a stream of GPU {s.dev} with GPU {d} current")
        self.prefetches += 1
        self.emu.copy(x, x.copy(), lane=s.lane)

    def prefetch_sync(self, x, d):
        self._dev(d)

    def host_write(self, x, src):
        """A write through the host (a reset, the fake GPUs idle)."""
        x[...] = src

    def copy_sync(self, dst, dst_dev, src, src_dev):
        """A synchronous copy outside the timed program (setup, resets, reading results)."""
        self._dev(dst_dev)
        self._dev(src_dev)
        dst[...] = src
