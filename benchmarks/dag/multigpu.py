#!/usr/bin/env python3
"""The DAG on several GPUs (issue 27 item 3): GrCUDA's shapes, scaled up and split
into P partitions (shapes_multi.py, after GrCUDA's multi-GPU benchmarks B1M, B5M, B6M,
B9M), on ``ExecutionContext(device_policy=P, gpus=[0..G-1])`` for each of the five
device selection policies, against the same partitioned program on one GPU and
against hand-optimized multi-GPU CuPy code (GrCUDA reports 80-90% of hand-optimized
code; goal: the best policy >= 0.95x hand-optimized, GrCUDA's kind (cupy-managed) and
the stronger device-memory kind (cupy-multi)). See README.md beside this file.

    python benchmarks/dag/run.py --multi-gpu                 # default: every GPU
    python benchmarks/dag/run.py --multi-gpu --quick         # smoke test, small sizes
    python benchmarks/dag/run.py --multi-gpu --dry           # no CUDA: the checks of this mode

Every backend runs the same partitioned program (launches on lanes of their
partition, marks/waits, copies for the data the partitions exchange):
  dag-1gpu     ExecutionContext(policy="async", gpus=[first]), device memory: the
               program on one GPU (copies are ctx.copy vertices)
  cupy-1gpu    the lanes as streams on one GPU, copies cudaMemcpyAsync
  dag-<P>      ExecutionContext(policy="async", device_policy=P, gpus=[0..G-1]); each
               array one ctx.array (managed memory), partitions as byte ranges; the
               policy places every vertex, the DAG moves the data
  cupy-multi   hand-optimized: partition q on GPU q % G, its pieces in that GPU's
               device memory (Replicated inputs copied to every GPU), its lanes
               streams there, events across GPUs, each exchange a cudaMemcpyPeerAsync
               (peer access enabled where possible)
  cupy-managed hand-optimized as GrCUDA's own multi-GPU programs are (b1.cu, b5, b6,
               b9, b11 in necst/grcuda): cupy-multi with every piece managed memory,
               reset through the host, prefetched to its GPU where cupy-multi uploads

Every repetition starts from host memory, as GrCUDA's multi-GPU benchmarks: each
shape's host_reset arrays (shapes_multi.py) are put back on the host untimed (dag-<P>:
a host vertex prefetching their managed pages to the CPU and rewriting the state;
the others keep pinned host copies), and every backend's timed region includes
bringing them to the GPUs (dag-<P>: the DAG's prefetches; cupy-managed: its own
prefetches; the others: copies from the pinned host copies first). See README.md,
"Reset and timing".

Exit status as run.py's: 0 all ran and agreed; 1 a failure; 2 preflight; 3 watchdog.
"""

import argparse
import ctypes
import math
import os
import platform
import sys
import time
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

from backends import (BenchError, CupyStreams, Dag, DagContext, Program, check_launch,  # noqa: E402
                      convert_scalars, params_of)
from kernels import KERNELS  # noqa: E402
import run  # noqa: E402  (its results, log, watchdog and preflight helpers; it imports this module only in main)
from run import log  # noqa: E402

POLICIES = ("round-robin", "stream-aware", "min-transfer-size", "minmin-transfer-time", "minmax-transfer-time")
BACKENDS = ("dag-1gpu", "cupy-1gpu") + tuple(f"dag-{p}" for p in POLICIES) + ("cupy-multi", "cupy-managed")
GOAL = 0.95  # best policy >= 0.95x hand-optimized: cupy-managed (GrCUDA's kind) and cupy-multi (geometric means)

# Default size multipliers over the one-GPU suite's full sizes (shapes.FULL), chosen for
# one repetition of about 2-5 ms (vec, bs, ml: memory-bound, capped by memory and the
# host's time to build the inputs) to 10-40 ms (hits, img, cg) on an H100 with the
# default grid; see README.md.
DEFAULT_SCALE = {"vec": 16, "bs": 16, "ml": 16, "hits": 8, "img": 8, "cg": 8}
BASE_DIV = 4  # the inputs are tiles of a base 1/4 of the suite's full size (host time)


# -- sizes -----------------------------------------------------------------------------------


def parse_scale(text):
    """'8' (every shape) or 'vec=16,cg=4' (the others keep their defaults)."""
    out = dict(DEFAULT_SCALE)
    if text is None:
        return out
    text = text.strip()
    if "=" not in text:
        v = int(text)
        return {k: v for k in out}
    for part in text.split(","):
        k, v = part.split("=")
        if k.strip() not in out:
            raise ValueError(f"--scale: unknown shape {k!r}")
        out[k.strip()] = int(v)
    return out


def scaled_config(name, mode, scale, blocks, tile=None):
    """The sizes of shape `name`: the suite's full sizes times scale (mode "full"), or
    the quick/dry sizes times scale. tile: None = BASE_DIV x scale (the inputs are that
    many copies of a base), 1 = every element generated."""
    from shapes import config

    base = config(mode, blocks=blocks)
    s = int(scale)
    if s < 1:
        raise ValueError(f"scale {s} < 1")
    over = {}
    if name == "vec":
        over["vec_n"] = base.vec_n * s
    elif name == "bs":
        over["bs_n"] = base.bs_n * s
    elif name == "ml":
        over["ml_rows"] = base.ml_rows * s
    elif name == "hits":
        over["hits_n"] = base.hits_n * s
    elif name == "img":
        over["img_side"] = max(16, int(round(base.img_side * math.sqrt(s) / 16.0)) * 16)
    elif name == "cg":
        over["cg_n"] = base.cg_n * s
    t = (BASE_DIV * s if mode == "full" else 1) if tile is None else int(tile)
    return config(mode, blocks=blocks, tile=max(1, t), **over)


def size_limits(name, cfg):
    """(largest array in elements, note) of a configuration without building it (the
    kernels index with int: < 2^30 elements; tiled sizes divisible by the tile)."""
    t = cfg.tile
    big = {"vec": cfg.vec_n, "bs": cfg.bs_n, "ml": cfg.ml_rows * cfg.ml_features,
           "hits": cfg.hits_n * cfg.hits_degree, "img": cfg.img_side * cfg.img_side,
           "cg": cfg.cg_n * (2 * cfg.cg_neighbors + 1)}[name]
    n = {"vec": cfg.vec_n, "bs": cfg.bs_n, "ml": cfg.ml_rows, "hits": cfg.hits_n, "img": None, "cg": cfg.cg_n}[name]
    tiled = n is not None and t > 1 and n % t == 0
    return big, (f"{t} tiles of {n // t}" if tiled else "not tiled")


# -- what a program does -----------------------------------------------------------------------


class _Tag:
    """A stand-in for an array (or a slice of one) while recording a program."""

    def __init__(self, name, lo, hi):
        self.name, self.lo, self.hi = name, lo, hi

    def __getitem__(self, s):
        lo, hi, step = s.indices(self.hi - self.lo)
        if step != 1:
            raise AssertionError(f"{self.name}: slices with a step")
        return _Tag(self.name, self.lo + lo, self.lo + max(lo, hi))


def record(inst):
    """One repetition of a partitioned program, recorded: kernels (names, in order),
    launches, copies, peer_copies (between partitions) and peer_bytes; every launch's
    arrays checked to be its lane's partition's (or Replicated inputs, read only)."""
    from shapes_multi import PartitionedInstance

    if not isinstance(inst, PartitionedInstance):
        raise AssertionError(f"{inst.name}: not a partitioned instance")
    out = types.SimpleNamespace(kernels=[], launches=0, copies=0, peer_copies=0, peer_bytes=0)

    class Rec(Program):
        def launch(self, kname, grid, block, *args, lane=0):
            if kname not in out.kernels:
                out.kernels.append(kname)
            out.launches += 1
            for p, a in zip(params_of(kname), args):
                if p.pointer:
                    q = inst.partition_of(a.name, a.lo, a.hi)
                    if q is None and p.access == "write":
                        raise AssertionError(f"{inst.name}: {kname} writes the Replicated input {a.name}")
                    if q is not None and q != inst.lane_part[lane]:
                        raise AssertionError(f"{inst.name}: {kname} on lane {lane} (partition {inst.lane_part[lane]}) "
                                             f"touches partition {q}'s elements [{a.lo}, {a.hi}) of {a.name}")

        def copy(self, dst, src, lane=0):
            out.copies += 1
            qd, qs = inst.partition_of(dst.name, dst.lo, dst.hi), inst.partition_of(src.name, src.lo, src.hi)
            if qd is None:
                raise AssertionError(f"{inst.name}: a copy into the Replicated input {dst.name}")
            if inst.lane_part[lane] not in (qd, qs):
                raise AssertionError(f"{inst.name}: a copy between partitions {qs} and {qd} on lane {lane}")
            if qd != qs:
                out.peer_copies += 1
                out.peer_bytes += 4 * (dst.hi - dst.lo)

        def mark(self, lane):
            return object()

    inst.build(Rec(), types.SimpleNamespace(**{k: _Tag(k, 0, v.size) for k, v in inst.arrays.items()}))
    return out


def lane_devices(inst, devs):
    """Lane k -> the GPU of its partition: partition q on devs[q % G]."""
    return [devs[q % len(devs)] for q in inst.lane_part]


def part_device(q, devs):
    return devs[q % len(devs)]


# -- CUDA runtime (real, and faked by the dry run: emulate.FakeMultiRT) --------------------------


class CupyRT:
    """What cupy-multi asks of CUDA, each call made with its device current."""

    def __init__(self, modules):
        import cupy as cp

        self.cp = cp
        self.modules = modules

    def dev(self, d):
        return self.cp.cuda.Device(d)

    def stream(self, d):
        with self.dev(d):
            return self.cp.cuda.Stream(non_blocking=True)

    def event(self, d):
        with self.dev(d):
            return self.cp.cuda.Event(disable_timing=True)

    def record(self, ev, stream, d):
        with self.dev(d):
            ev.record(stream)

    def wait(self, stream, ev, d):
        with self.dev(d):
            stream.wait_event(ev)

    def launch(self, name, grid, block, args, stream, d):
        with self.dev(d):
            self.modules.get(name)((grid,), (block,), args, stream=stream)

    def copy_async(self, dst, dst_dev, src, src_dev, stream, d):
        """cudaMemcpyPeerAsync on `stream` (of GPU d): direct over NVLink/PCIe where peer
        access is enabled, else staged by the driver."""
        with self.dev(d):
            self.cp.cuda.runtime.memcpyPeerAsync(dst.data.ptr, dst_dev, src.data.ptr, src_dev, src.nbytes, stream.ptr)

    def upload_async(self, dst, src, stream, d):
        """cudaMemcpyAsync from host memory src (pinned: host_copy) into dst, device
        memory of GPU d, on `stream` (of GPU d)."""
        if dst.nbytes != src.nbytes:
            raise BenchError(f"upload of {src.nbytes} bytes into {dst.nbytes}")
        with self.dev(d):
            self.cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.ctypes.data, src.nbytes,
                                             self.cp.cuda.runtime.memcpyHostToDevice, stream.ptr)

    def empty(self, d, n, dtype):
        with self.dev(d):
            return self.cp.empty(n, dtype)

    def empty_managed(self, n, dtype):
        """n elements of managed memory (cudaMallocManaged), as a CuPy array."""
        dtype = np.dtype(dtype)
        return self.cp.ndarray(n, dtype, memptr=self.cp.cuda.malloc_managed(max(n * dtype.itemsize, 1)))

    def copy_default(self, dst, src):
        """A synchronous cudaMemcpy of the kind the addresses say (managed memory too)."""
        if dst.nbytes != src.nbytes:
            raise BenchError(f"copy of {src.nbytes} bytes into {dst.nbytes}")
        if src.nbytes:
            self.cp.cuda.runtime.memcpy(dst.data.ptr, src.data.ptr, src.nbytes, self.cp.cuda.runtime.memcpyDefault)

    def prefetch_async(self, x, d, stream):
        """cudaMemPrefetchAsync of managed x to GPU d on `stream` (of GPU d)."""
        with self.dev(d):
            self.cp.cuda.runtime.memPrefetchAsync(x.data.ptr, x.nbytes, d, stream.ptr)

    def prefetch_sync(self, x, d):
        """Managed x to GPU d now (setup)."""
        with self.dev(d):
            self.cp.cuda.runtime.memPrefetchAsync(x.data.ptr, x.nbytes, d, 0)
            self.dev(d).synchronize()

    def host_write(self, x, src):
        """src into managed x through its host address (the GPUs idle): its pages move to
        host memory, as GrCUDA's reset() writes its arrays."""
        if x.nbytes:
            view = np.ctypeslib.as_array((ctypes.c_ubyte * x.nbytes).from_address(x.data.ptr))
            view[...] = np.ascontiguousarray(src).reshape(-1).view(np.uint8)

    def copy_sync(self, dst, dst_dev, src, src_dev):
        if dst.nbytes != src.nbytes:
            raise BenchError(f"copy of {src.nbytes} bytes into {dst.nbytes}")
        if src.nbytes:
            self.cp.cuda.runtime.memcpyPeer(dst.data.ptr, dst_dev, src.data.ptr, src_dev, src.nbytes)

    def synchronize(self, streams, devs):
        for s in streams:
            s.synchronize()
        for d in devs:
            self.dev(d).synchronize()


def enable_peer_access(devs):
    """cudaDeviceEnablePeerAccess between every pair of devs that can; returns
    "a->b: enabled | already enabled | not possible | <error>" for each ordered pair."""
    import cupy as cp

    out = []
    for a in devs:
        for b in devs:
            if a == b:
                continue
            if not cp.cuda.runtime.deviceCanAccessPeer(a, b):
                out.append(f"{a}->{b}: not possible")
                continue
            try:
                with cp.cuda.Device(a):
                    cp.cuda.runtime.deviceEnablePeerAccess(b)
                out.append(f"{a}->{b}: enabled")
            except cp.cuda.runtime.CUDARuntimeError as e:
                out.append(f"{a}->{b}: " + ("already enabled" if "AlreadyEnabled" in str(e) else str(e)))
    return out


# -- backends ------------------------------------------------------------------------------------


class MultiCupy(Program):
    """cupy-multi: a partitioned program by hand on several GPUs. Partition q on GPU
    devs[q % G]: its lanes are non-blocking streams created there, its pieces device
    memory there (PlacedArrays); each mark an event of the lane's GPU recorded on its
    stream, each wait a wait of the waiting lane's stream (for any GPU's event), each
    copy a cudaMemcpyPeerAsync on the lane's stream. A launch may touch only its own
    GPU's memory (PlacedView.resolve refuses the rest)."""

    name = "cupy-multi"

    def __init__(self, rt, inst, devs, name="cupy-multi"):
        self.name = name
        self.rt = rt
        self.devs = list(devs)
        self.lane_dev = lane_devices(inst, self.devs)
        self.streams = [rt.stream(d) for d in self.lane_dev]
        self.pool = {d: [] for d in self.devs}
        self.used = {d: 0 for d in self.devs}
        self.arrays = None

    def _lane(self, lane):
        if not 0 <= lane < len(self.streams):
            raise BenchError(f"cupy-multi: lane {lane}, the shape declared {len(self.streams)}")
        return self.streams[lane], self.lane_dev[lane]

    def _event(self, d):
        pool = self.pool[d]
        if self.used[d] == len(pool):
            pool.append(self.rt.event(d))
        ev = pool[self.used[d]]
        self.used[d] += 1
        return ev

    def launch(self, name, grid, block, *args, lane=0):
        s, d = self._lane(lane)
        local = []
        for p, a in zip(params_of(name), args):
            if isinstance(a, PlacedArray):
                a = a[:]
            if isinstance(a, PlacedView):
                arr, home = a.resolve(d, write=p.pointer and p.access == "write")
                if home != d:
                    raise BenchError(f"cupy-multi: {name} on GPU {d} (lane {lane}) reaches {a} on GPU {home}: "
                                     "partitions exchange data only by copy")
                a = arr
            local.append(a)
        if self.checking:
            check_launch(name, grid, block, local, len, lambda a: a.dtype)
        self.rt.launch(name, grid, block, tuple(convert_scalars(name, local, True)), s, d)

    def copy(self, dst, src, lane=0):
        s, d = self._lane(lane)
        dst_arr, dst_dev = (dst[:] if isinstance(dst, PlacedArray) else dst).resolve(d, write=True)
        src_arr, src_dev = (src[:] if isinstance(src, PlacedArray) else src).resolve(d)
        if dst_arr.dtype != src_arr.dtype or len(dst_arr) != len(src_arr):
            raise BenchError(f"cupy-multi: copy of {src} into {dst}: sizes or types differ")
        self.rt.copy_async(dst_arr, dst_dev, src_arr, src_dev, s, d)

    def upload(self, lane, dst, src):
        """Host memory src into dst (device memory of the lane's GPU) on the lane's stream."""
        s, d = self._lane(lane)
        self.rt.upload_async(dst, src, s, d)

    def prefetch(self, lane, x):
        """Managed x to the lane's GPU on the lane's stream (cupy-managed's upload)."""
        s, d = self._lane(lane)
        self.rt.prefetch_async(x, d, s)

    def mark(self, lane):
        s, d = self._lane(lane)
        ev = self._event(d)
        self.rt.record(ev, s, d)
        return ev

    def wait(self, lane, token):
        if token is None:
            raise BenchError(f"cupy-multi: wait on lane {lane} for no mark")
        s, d = self._lane(lane)
        self.rt.wait(s, token, d)

    def begin(self):
        """Events are reused from the previous repetition (which ended synchronized)."""
        self.used = {d: 0 for d in self.devs}

    def run(self, build):
        self.begin()
        build(self, self.arrays.handles)
        submitted = time.perf_counter()
        self.rt.synchronize(self.streams, self.devs)
        return submitted

    def close(self):
        self.arrays = None


class PlacedArray:
    """cupy-multi's handle of one array of a partitioned program: its pieces, each
    (lo, hi, device, device array of hi - lo elements). A Replicated input has one
    whole piece per device. Slicing gives a PlacedView."""

    def __init__(self, name, size, dtype, pieces, replicated):
        self.name, self.size, self.dtype, self.pieces, self.replicated = name, size, dtype, pieces, replicated

    def __getitem__(self, s):
        if not isinstance(s, slice):
            raise BenchError(f"cupy-multi: {self.name}[{s!r}]: only slices")
        return PlacedView(self, 0, self.size)[s]

    def __len__(self):
        return self.size


class PlacedView:
    """Elements [lo, hi) of a PlacedArray; resolve(dev) finds the device array."""

    def __init__(self, arr, lo, hi):
        self.arr, self.lo, self.hi = arr, lo, hi

    def __getitem__(self, s):
        lo, hi, step = s.indices(self.hi - self.lo)
        if step != 1:
            raise BenchError(f"cupy-multi: {self}: slices with a step")
        return PlacedView(self.arr, self.lo + lo, self.lo + max(lo, hi))

    def __len__(self):
        return self.hi - self.lo

    def __repr__(self):
        return f"{self.arr.name}[{self.lo}:{self.hi}]"

    def resolve(self, dev, write=False):
        """(device array of these elements, its device): the piece holding them (of a
        Replicated input: dev's copy, read only). BenchError when no one piece does."""
        a = self.arr
        if a.replicated:
            if write:
                raise BenchError(f"cupy-multi: a write to the Replicated input {self}")
            hits = [p for p in a.pieces if p[2] == dev]
        else:
            hits = [p for p in a.pieces if p[0] <= self.lo and self.hi <= p[1]]
        if len(hits) != 1:
            raise BenchError(f"cupy-multi: {self} is in {len(hits)} pieces of {a.name} "
                             f"({[(p[0], p[1], p[2]) for p in a.pieces]})")
        lo, _hi, d, x = hits[0]
        return x[self.lo - lo:self.hi - lo], d


class PlacedArrays:
    """cupy-multi's arrays: each Split piece in device memory of its partition's GPU,
    each Home(q) array on q's GPU, each Replicated input copied to every GPU, filled
    from the pristine arrays (on pristine_dev). The padding between Split pieces is
    never allocated. host: the host copies of inst.host_reset, which upload (the
    start of every timed repetition) copies into their pieces. rt: CupyRT, or
    emulate.FakeMultiRT for --dry."""

    def __init__(self, rt, inst, pristine, pristine_dev, devs, host):
        self.rt, self.devs, self.pristine_dev, self.host = rt, list(devs), pristine_dev, dict(host)
        self.arrays = {}
        for k, src in pristine.items():
            lay = inst.layout[k]
            if lay.kind == "split":
                spans = [(s, s + n, part_device(q, devs)) for q, (s, n) in enumerate(zip(lay.starts, lay.lengths))]
            elif lay.kind == "home":
                spans = [(0, src.size, part_device(lay.q, devs))]
            else:
                spans = [(0, src.size, d) for d in self.devs]
            pieces = []
            for lo, hi, d in spans:
                pieces.append((lo, hi, d, self._piece(d, src[lo:hi], pristine_dev)))
            self.arrays[k] = PlacedArray(k, src.size, src.dtype, pieces, lay.kind == "replicated")
        rt.synchronize([], self.devs)
        self.handles = types.SimpleNamespace(**self.arrays)
        # Each piece is uploaded on the first lane of its partition (a Replicated
        # input's copy on GPU d: the first lane on d); every lane waits for the uploads
        # made on its GPU.
        lane_dev = lane_devices(inst, self.devs)
        first_of_part = {}
        first_on_dev = {}
        for lane, q in enumerate(inst.lane_part):
            first_of_part.setdefault(q, lane)
            first_on_dev.setdefault(lane_dev[lane], lane)
        self.uploads = []  # (lane, piece's device array, host slice)
        for k in self.host:
            lay = inst.layout[k]
            for i, (lo, hi, d, x) in enumerate(self.arrays[k].pieces):
                lane = (first_of_part[i] if lay.kind == "split" else first_of_part[lay.q] if lay.kind == "home"
                        else first_on_dev[d])
                self.uploads.append((lane, x, self.host[k][lo:hi]))
        up_lanes = sorted({u[0] for u in self.uploads})
        self.waits = [(lane, up) for up in up_lanes for lane in range(len(lane_dev))
                      if lane != up and lane_dev[lane] == lane_dev[up]]

    def _piece(self, d, src, src_dev):
        """A piece on GPU d holding src (of GPU src_dev): device memory."""
        x = self.rt.empty(d, len(src), src.dtype)
        self.rt.copy_sync(x, d, src, src_dev)
        return x

    def _copy_out(self, dst, dst_dev, x, d):
        self.rt.copy_sync(dst, dst_dev, x, d)

    def reset(self):
        """Nothing on the GPUs: upload brings the host's copies back."""
        self.rt.synchronize([], self.devs)

    def _bring(self, p, lane, x, src):
        """A host_reset piece to its GPU, on lane of the MultiCupy p (timed)."""
        p.upload(lane, x, src)

    def upload(self, p):
        """Every host_reset piece from host memory, on the MultiCupy p (timed)."""
        for lane, x, src in self.uploads:
            self._bring(p, lane, x, src)
        marks = {up: p.mark(up) for up in sorted({u[0] for u in self.uploads})}
        for lane, up in self.waits:
            p.wait(lane, marks[up])

    def read(self, k):
        """The whole array, gathered on pristine_dev (a Replicated input: the first
        device's copy; the padding between pieces, never an output's: unset)."""
        a = self.arrays[k]
        out = self.rt.empty(self.pristine_dev, a.size, a.dtype)
        for lo, hi, d, x in (a.pieces[:1] if a.replicated else a.pieces):
            self._copy_out(out[lo:hi], self.pristine_dev, x, d)
        self.rt.synchronize([], self.devs)
        return out


class ManagedPlacedArrays(PlacedArrays):
    """cupy-managed's arrays, as GrCUDA's hand-optimized multi-GPU programs keep theirs
    (necst/grcuda, projects/resources/cuda/multi_gpu/b1.cu and b5, b6, b9, b11): every
    piece managed memory (cudaMallocManaged) placed as cupy-multi's, prefetched to its
    GPU at setup; a reset writes the host_reset pieces through their host addresses
    (their pages go to host memory, as GrCUDA's reset()), and each timed repetition
    starts with cudaMemPrefetchAsync of those pieces to their GPUs on the lanes
    cupy-multi uploads on (GrCUDA's execute_async), the GPU's other lanes waiting."""

    def _piece(self, d, src, src_dev):
        x = self.rt.empty_managed(len(src), src.dtype)
        self.rt.copy_default(x, src)
        self.rt.prefetch_sync(x, d)
        return x

    def _copy_out(self, dst, dst_dev, x, d):
        self.rt.copy_default(dst, x)

    def reset(self):
        self.rt.synchronize([], self.devs)
        for _lane, x, src in self.uploads:
            self.rt.host_write(x, src)

    def _bring(self, p, lane, x, src):
        p.prefetch(lane, x)


class PolicyContext(DagContext):
    """An ExecutionContext with a device policy and GPUs; kernels bound from PTX compiled
    once for every context (the same code: outputs comparable bit for bit)."""

    def __init__(self, label, gpus, device_policy, ptx, parent_stream=None, max_streams=0):
        super().__init__("async", ())
        self.label, self.gpus, self.device_policy, self.ptx = label, list(gpus), device_policy, ptx
        self.parent_stream = parent_stream  # None: the context's default
        self.max_streams = max_streams  # 0: the context's default

    def get(self):
        if self.ctx is None:
            import ucxx_go

            probe = os.environ.get("DAG_PROBE_TIMINGS") == "1"  # vertex_timings' record (a probe)
            self.ctx = ucxx_go.ExecutionContext(policy="async", device_policy=self.device_policy, gpus=self.gpus,
                                                parent_stream=self.parent_stream, max_streams=self.max_streams,
                                                timings=probe, export_dot=probe, transfers=False)
            if list(self.ctx.gpus) != self.gpus:
                raise BenchError(f"{self.label}: ExecutionContext.gpus = {self.ctx.gpus}, asked {self.gpus}")
            self.kernels = {}
        return self.ctx

    def kernel(self, name):
        k = self.kernels.get(name)
        if k is None:
            ptx, lowered = self.ptx.get(name)
            t = time.perf_counter()
            k = self.kernels[name] = self.get().bind_kernel(ptx, lowered, KERNELS[name].signature)
            self.compile_s += time.perf_counter() - t
        return k


class Ptx:
    """Each kernel compiled once (NVRTC, build_kernel's compile path)."""

    def __init__(self, options):
        self.options = tuple(options)
        self.code = {}
        self.compile_s = 0.0

    def get(self, name):
        c = self.code.get(name)
        if c is None:
            from ucxx_go import _kernels

            t = time.perf_counter()
            c = self.code[name] = _kernels.compile_kernel(KERNELS[name].source, name, self.options)
            self.compile_s += time.perf_counter() - t
        return c


class MultiDag(Dag):
    """dag-<policy>: Dag over a several-GPU context; the repetition ends when the DAG
    is synchronized and every GPU is idle."""

    def __init__(self, dagctx, devs):
        super().__init__(dagctx)
        self.name = dagctx.label
        self.devs = devs

    def run(self, build):
        self.vertices = []
        build(self, self.arrays.handles)
        submitted = time.perf_counter()
        self.dagctx.ctx.synchronize_sync()
        sync_all(self.devs)
        return submitted


def vertex_timings(be):
    """A probe, not the DAG's behaviour (DAG_PROBE_TIMINGS=1: the contexts record
    timings and DOT): the last repetition's vertices grouped by kernel name (or copy)
    and stream device, each group's count and GPU time (its work alone: not the
    prefetches or waits queued before it on its stream), and the repetition's span from
    the first vertex handed to a lane to the last end; "vertices": each one's [id, name,
    stream, start and stop (µs from the span's start), GPU µs]. Vertices the context no
    longer tracks (swept mid-repetition) read 0 and are counted as "untimed". The whole
    DOT goes to $OUT/dag_dot_<label>.dot where $OUT is set."""
    import re

    dot = be.dagctx.ctx.dot()
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], f"dag_dot_{be.name}.dot"), "w") as f:
            f.write(dot)
    place = {int(m.group(1)): m.group(2) for m in re.finditer(r'v(\d+) \[label="\d+ [^"]*?\\n(\S+)', dot)}
    groups, rows, untimed = {}, [], 0
    for v in be.checked:
        start, stop, gpu = v.times()
        if start == 0:
            untimed += 1
            continue
        rows.append([v.id, v.name or "copy", place.get(v.id, "?"), start, stop, gpu])
        g = groups.setdefault(f"{v.name or 'copy'}@{place.get(v.id, '?').split('/')[0]}", [0, 0])
        g[0] += 1
        g[1] += gpu
    t0 = min((r[3] for r in rows), default=0)
    return {"span_ms": (max(r[4] for r in rows) - t0) / 1e6 if rows else None, "untimed": untimed,
            "groups": {k: {"n": n, "gpu_ms": t / 1e6} for k, (n, t) in sorted(groups.items())},
            "vertices": [[i, nm, st, (a - t0) // 1000, (b - t0) // 1000, g // 1000] for i, nm, st, a, b, g in rows]}


def sync_all(devs):
    import cupy as cp

    for d in devs:
        cp.cuda.Device(d).synchronize()


class OneGpuArrays:
    """Device memory on one GPU, copied from the shape's pristine arrays. host: the
    host copies of inst.host_reset, which upload (the start of every timed
    repetition) copies in: cudaMemcpyAsync on lane 0's stream, the other lanes
    waiting (cupy-1gpu), or ctx.copy vertices from the wrapped host copies (dag-1gpu:
    wrap is the DAG's, the kernels wait by their data)."""

    def __init__(self, pristine, host, dev, wrap=None):
        import cupy as cp

        self.cp, self.d, self.host = cp, dev, dict(host)
        with cp.cuda.Device(dev):
            self.dev = {k: v.copy() for k, v in pristine.items()}
        cp.cuda.Device(dev).synchronize()
        self.handles = types.SimpleNamespace(**{k: (wrap(v) if wrap else v) for k, v in self.dev.items()})
        self.wrapped = {k: wrap(v) for k, v in self.host.items()} if wrap else None

    def reset(self):
        """Nothing on the GPU: upload brings the host's copies back."""
        self.cp.cuda.Device(self.d).synchronize()

    def upload(self, p):
        if self.wrapped is not None:
            for k, src in self.wrapped.items():
                p.copy(getattr(self.handles, k), src)
            return
        if not self.host:
            return
        s = p.streams[0]
        with self.cp.cuda.Device(self.d):
            for k, src in self.host.items():
                self.cp.cuda.runtime.memcpyAsync(self.dev[k].data.ptr, src.ctypes.data, src.nbytes,
                                                 self.cp.cuda.runtime.memcpyHostToDevice, s.ptr)
        token = p.mark(0)
        for lane in range(1, len(p.streams)):
            p.wait(lane, token)

    def read(self, k):
        return self.dev[k]


class DagManagedArrays:
    """dag-<policy>: every array from ctx.array (managed memory with several GPUs),
    filled from the pristine arrays and then handed to the host: a host vertex
    writing every array moves its pages to host memory, so the DAG finds each range
    on the host, as GrCUDA's arrays after init. reset (untimed, GrCUDA's
    reset_result) does the same for inst.host_reset, rewriting the state arrays
    from their host copies; the kernels' reads then bring the bytes to the GPUs the
    policy picks (the DAG's prefetches, timed). upload: nothing."""

    def __init__(self, ctx, pristine, host, state, devs):
        import cupy as cp

        self.cp, self.ctx, self.host, self.state, self.devs = cp, ctx, dict(host), list(state), devs
        self.arr, self.view = {}, {}
        for k, p in pristine.items():
            a = ctx.array(p.size, p.dtype)
            self.arr[k] = a
            self.view[k] = v = cp.asarray(a)  # before any vertex: no wait
            with cp.cuda.Device(devs[0]):
                v[...] = p
        sync_all(devs)
        self.handles = types.SimpleNamespace(**self.arr)
        self.prefetch_note = None
        self._to_host(list(pristine), [])

    def advise_read_mostly(self, keys):
        """A probe, not the DAG's behaviour (DAG_PROBE_READ_MOSTLY=1): advise the
        Replicated inputs `keys` read-mostly, so that each GPU reading them gets a copy
        (the location model's assumption) instead of the pages moving between GPUs.
        GrCUDA has the option (mem-advise-policy) and leaves it off."""
        cp = self.cp
        with cp.cuda.Device(self.devs[0]):
            for k in keys:
                v = self.view[k]
                if v.nbytes:
                    cp.cuda.runtime.memAdvise(v.data.ptr, v.nbytes, 1, self.devs[0])  # 1: cudaMemAdviseSetReadMostly
        self.read_mostly = list(keys)

    def _host_view(self, k):
        v = self.view[k]
        return np.frombuffer((ctypes.c_byte * v.nbytes).from_address(v.data.ptr), dtype=v.dtype)

    def _to_host(self, keys, rewrite):
        """One host vertex writing arrays `keys`: their pages prefetched to host memory
        (else touched by the CPU), the arrays `rewrite` copied from their host copies."""
        keys = [k for k in keys if self.view[k].nbytes]
        if not keys:
            return
        cp = self.cp

        def to_host():
            try:
                with cp.cuda.Device(self.devs[0]):
                    for k in keys:
                        v = self.view[k]
                        cp.cuda.runtime.memPrefetchAsync(v.data.ptr, v.nbytes, -1, 0)  # -1: cudaCpuDeviceId
                    cp.cuda.runtime.streamSynchronize(0)
            except Exception as e:  # noqa: BLE001 (a runtime without it: the CPU's faults move the pages)
                self.prefetch_note = f"prefetch to the host failed ({type(e).__name__}: {e}); pages moved by CPU faults"
                for k in keys:
                    if k not in rewrite:
                        h = self._host_view(k)
                        for lo in range(0, h.size, 1 << 22):
                            h[lo:lo + (1 << 22)] = h[lo:lo + (1 << 22)].copy()
            for k in rewrite:
                np.copyto(self._host_view(k), self.host[k])

        v = self.ctx.host(to_host, writes=[self.arr[k] for k in keys])
        self.ctx.synchronize_sync()
        v.wait(timeout=120)

    def reset(self):
        self._to_host(list(self.host), self.state)

    def upload(self, p):
        pass

    def read(self, k):
        return self.view[k]


# -- one shape -------------------------------------------------------------------------------------


def _family(bname):
    return "dag" if bname.startswith("dag-") else "cupy"


def _compare(inst, name, bname, outs, refs, d0):
    """Every output finite; bit for bit equal to the first backend of its family (the
    one-GPU run: dag-1gpu for the DAG, cupy-1gpu for CuPy); within the shape's
    tolerance of dag-1gpu for the other family. Returns {output: error vs dag-1gpu}."""
    import cupy as cp

    errs = {}
    fam = _family(bname)
    with cp.cuda.Device(d0):
        for k, o in outs.items():
            if not bool(cp.isfinite(o).all()):
                bad = int(cp.count_nonzero(~cp.isfinite(o)))
                raise BenchError(f"{name}/{bname}: output {k} has {bad} non-finite elements (unwritten NaN poison?)")
        if fam in refs:
            other, ref = refs[fam]
            for k, o in outs.items():
                if not bool(cp.array_equal(o, ref[k])):
                    diff = int(cp.count_nonzero(o != ref[k]))
                    raise BenchError(f"{name}/{bname}: output {k} differs from {other}'s in {diff} elements: the same "
                                     "code in the same dependency order must agree bit for bit (a race?)")
        if "dag" in refs and fam != "dag":
            other, ref = refs["dag"]
            for k, o in outs.items():
                kind, tol = inst.outputs[k]
                if kind == "argmax":
                    err = float(cp.count_nonzero(o != ref[k])) / max(1, o.size)
                    tol = 1e-3  # ties differ between compilations: a fraction, not a gap (no reference here)
                else:
                    r = ref[k].astype(cp.float64)
                    err = float(cp.linalg.norm(o.astype(cp.float64) - r) / max(float(cp.linalg.norm(r)), 1e-300))
                if not err <= tol:
                    raise BenchError(f"{name}/{bname}: output {k} differs from {other}'s by {err:.3g} > {tol:g}")
                errs[k] = err
    return errs


def host_copies(inst):
    """Pinned host copies of inst.host_reset (plain numpy without CUDA): the host
    memory every repetition starts from."""
    try:
        import cupyx
    except ImportError:
        cupyx = None
    out = {}
    for k in inst.host_reset:
        v = inst.arrays[k]
        h = cupyx.empty_pinned(v.shape, v.dtype) if cupyx is not None else np.empty_like(v)
        h[...] = v
        out[k] = h
    return out


def from_host(arrays, inst):
    """One repetition as every backend times it: the upload of inst.host_reset from
    host memory (arrays.upload: copies for cupy-1gpu, cupy-multi and dag-1gpu; for
    dag-<P> nothing, the DAG moves what the kernels read), then the program."""

    def build(p, A):
        arrays.upload(p)
        inst.build(p, A)

    return build


def run_shape(name, args, env):
    import cupy as cp

    from shapes import SHAPES
    from shapes_multi import make_partitioned

    d0, devs = env.devs[0], env.devs
    cfg = scaled_config(name, args.size_mode, args.scale[name], args.blocks, args.tile)
    rng = np.random.default_rng(args.seed + sorted(SHAPES).index(name))
    t = time.perf_counter()
    inst = make_partitioned(name, cfg, rng, args.parts)
    make_s = time.perf_counter() - t
    ref_s = None
    if args.reference:
        t = time.perf_counter()
        inst.reference()
        ref_s = time.perf_counter() - t
    rec = record(inst)
    t = time.perf_counter()
    with cp.cuda.Device(d0):
        pristine = {k: cp.asarray(v) for k, v in inst.arrays.items()}
    cp.cuda.Device(d0).synchronize()
    upload_s = time.perf_counter() - t
    t = time.perf_counter()
    host = host_copies(inst)
    pin_s = time.perf_counter() - t
    inst.arrays = {k: None for k in inst.arrays}  # the other host copies are no longer needed (memory)
    for kname in rec.kernels:
        env.ptx.get(kname)
    lane_dev = lane_devices(inst, devs)
    r = {"shape": name, "dag_shape": inst.dag_shape, "sizes": inst.sizes, "scale": args.scale[name], "tile": cfg.tile,
         "partitions": inst.parts, "lanes": inst.lanes, "lane_device": lane_dev, "notes": inst.notes,
         "layout": {k: repr(v) for k, v in inst.layout.items()}, "kernels": rec.kernels,
         "launches_per_rep": rec.launches, "copies_per_rep": rec.copies, "peer_copies_per_rep": rec.peer_copies,
         "peer_bytes_per_rep": rec.peer_bytes, "bytes": int(sum(v.nbytes for v in pristine.values())),
         "host_reset": list(host), "host_reset_bytes": int(sum(v.nbytes for v in host.values())),
         "setup_s": {"inputs": make_s, "reference": ref_s, "upload": upload_s, "pinned_host_copies": pin_s},
         "backends": {}, "ok": False}
    log(f"{name}: {inst.dag_shape}; sizes {inst.sizes} (scale {args.scale[name]}, {cfg.tile} tiles); "
        f"{r['bytes'] / 2**30:.2f} GiB of arrays; inputs {make_s:.1f} s, upload {upload_s:.1f} s; "
        f"{rec.launches} launches and {rec.copies} copies per repetition ({rec.peer_copies} between partitions, "
        f"{rec.peer_bytes / 2**20:.2f} MiB); cupy-multi lanes -> GPUs {lane_dev}; from the host every repetition: "
        f"{', '.join(host) or 'nothing'} ({r['host_reset_bytes'] / 2**20:.0f} MiB)")
    refs = {}
    ok = True
    for bname in args.backends:
        b = {}
        r["backends"][bname] = b
        be = None
        try:
            t = time.perf_counter()
            if bname == "dag-1gpu" or bname.startswith("dag-"):
                dagctx = env.ctx(bname)
                for kname in rec.kernels:
                    dagctx.kernel(kname)
                if bname == "dag-1gpu":
                    be = Dag(dagctx)
                    be.name = "dag-1gpu"
                    be.arrays = OneGpuArrays(pristine, host, d0, wrap=dagctx.get().wrap)
                else:
                    be = MultiDag(dagctx, devs)
                    be.arrays = DagManagedArrays(dagctx.get(), pristine, host, inst.state, devs)
                    if os.environ.get("DAG_PROBE_READ_MOSTLY") == "1":
                        be.arrays.advise_read_mostly([k for k, lay in inst.layout.items() if lay.kind == "replicated"])
            elif bname == "cupy-1gpu":
                for kname in rec.kernels:
                    env.modules.get(kname)
                with cp.cuda.Device(d0):
                    be = CupyStreams(env.modules, inst.lanes)
                be.name = "cupy-1gpu"
                be.arrays = OneGpuArrays(pristine, host, d0)
            elif bname in ("cupy-multi", "cupy-managed"):
                for kname in rec.kernels:
                    env.modules.get(kname)
                be = MultiCupy(env.rt, inst, devs, name=bname)
                placed = PlacedArrays if bname == "cupy-multi" else ManagedPlacedArrays
                be.arrays = placed(env.rt, inst, pristine, d0, devs, host)
            else:
                raise BenchError(f"unknown backend {bname}")
            b["setup_s"] = time.perf_counter() - t
            be.checking = True
            build = from_host(be.arrays, inst)
            be.arrays.reset()
            be.run(build)
            if isinstance(be, Dag):
                b["vertices"] = be.check_vertices()
            be.checking = False
            with cp.cuda.Device(d0):
                outs = {k: cp.array(be.arrays.read(k), copy=True) for k in inst.outputs}
            if args.reference:
                b["errors_vs_numpy"] = inst.check({k: cp.asnumpy(v) for k, v in outs.items()}, bname)
            b["errors_vs_dag_1gpu"] = _compare(inst, name, bname, outs, refs, d0)
            refs.setdefault(_family(bname), (bname, outs))
            b.update(run.timed_repetitions(be, build, args.warmup, args.reps))
            if getattr(be.arrays, "prefetch_note", None):
                b["note"] = be.arrays.prefetch_note
            with cp.cuda.Device(d0):
                for k in inst.outputs:
                    if not bool(cp.array_equal(be.arrays.read(k), outs[k])):
                        raise BenchError(f"{name}/{bname}: output {k} of the last repetition differs from the first's "
                                         "(a race?)")
            if isinstance(be, Dag):
                b["resources"] = be.dagctx.ctx.resources()
                if os.environ.get("DAG_PROBE_TIMINGS") == "1":
                    b["vertex_timings"] = vertex_timings(be)
            log(f"  {bname:26s} {b['median_ms']:9.3f} ms (min {b['min_ms']:.3f}, max {b['max_ms']:.3f}; submit "
                f"{b['submit_median_ms']:.3f} ms)")
        except Exception as e:  # noqa: BLE001 (recorded; the other backends still run)
            ok = False
            b["error"] = f"{type(e).__name__}: {e}"
            log(f"  {bname}: FAILED: {b['error']}")
            traceback.print_exc()
            if bname.startswith("dag-"):
                env.drop(bname)
        finally:
            if be is not None:
                try:
                    if isinstance(be, Dag) and be.dagctx.ctx is not None:
                        be.dagctx.ctx.synchronize_sync()
                    be.arrays = None
                    be.close()
                except Exception:  # noqa: BLE001
                    traceback.print_exc()
            be = None
            sync_all(devs)
            for d in devs:
                with cp.cuda.Device(d):
                    cp.get_default_memory_pool().free_all_blocks()
    r["ok"] = ok
    del refs, pristine
    for d in devs:
        with cp.cuda.Device(d):
            cp.get_default_memory_pool().free_all_blocks()
    return r


# -- results -----------------------------------------------------------------------------------


def _geo(vals):
    vals = [v for v in vals if v]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


class Results(run.Results):
    """run.py's results (written after every item, failures recorded under a lock) with
    this mode's shapes, summary and table."""

    def __init__(self, json_path, md_path, meta):
        super().__init__(json_path, md_path, meta)
        self.data = {"meta": meta, "shapes": {}, "failures": [], "skipped": [], "summary": {}}

    @staticmethod
    def _ratios(shapes, ref, key):
        """t(ref) / t(dag-P) for every shape that ran whole and policy P that ran, kept in
        each shape's r[key]; returns {P: {shape: ratio}}."""
        per_policy = {p: {} for p in POLICIES}
        for name, r in shapes.items():
            b = r.get("backends", {})
            hand = b.get(ref, {}).get("median_ms")
            r[key] = {}
            if r.get("ok") and hand:
                for p in POLICIES:
                    t = b.get(f"dag-{p}", {}).get("median_ms")
                    if t:
                        r[key][p] = per_policy[p][name] = hand / t
        return per_policy

    @staticmethod
    def _goal(per_policy, requested):
        """(best single policy by geometric mean, that mean, the goal's verdict)."""
        g = {p: v for p, v in ((p, _geo(list(x.values()))) for p, x in per_policy.items()) if v}
        best = max(g, key=g.get) if g else None
        v = g.get(best) if g else None
        full = best is not None and requested <= set(per_policy[best])
        verdict = ("not measured" if v is None else ("met" if v >= GOAL else "NOT met")
                   + ("" if full else " (partial suite)"))
        return best, v, verdict

    def summarize(self):
        d = self.data
        per_policy = self._ratios(d["shapes"], "cupy-multi", "hand_over_dag")
        grcuda = self._ratios(d["shapes"], "cupy-managed", "managed_over_dag")  # GrCUDA's own kind of hand code
        best = {}
        for name, r in d["shapes"].items():
            b = r.get("backends", {})
            if r["hand_over_dag"]:
                bp = max(r["hand_over_dag"], key=r["hand_over_dag"].get)
                r["best_policy"], r["best_ratio"] = bp, r["hand_over_dag"][bp]
                best[name] = r["best_ratio"]
            one = b.get("dag-1gpu", {}).get("median_ms")
            if one and r.get("best_policy"):
                r["best_dag_speedup_vs_1gpu"] = one / b[f"dag-{r['best_policy']}"]["median_ms"]
            c1, hand = b.get("cupy-1gpu", {}).get("median_ms"), b.get("cupy-multi", {}).get("median_ms")
            if c1 and hand:
                r["cupy_multi_speedup_vs_1gpu"] = c1 / hand
        s = {"geomean_hand_over_dag": {p: _geo(list(v.values())) for p, v in per_policy.items()},
             "geomean_managed_over_dag": {p: _geo(list(v.values())) for p, v in grcuda.items()},
             "shapes_per_policy": {p: sorted(v) for p, v in per_policy.items()},
             "geomean_best_per_shape": _geo(list(best.values()))}
        requested = set(d["meta"]["shapes_requested"])
        s["best_policy"], s["best_policy_geomean"], s["goal"] = self._goal(per_policy, requested)
        s["best_policy_managed"], s["best_policy_managed_geomean"], s["goal_managed"] = self._goal(grcuda, requested)
        d["summary"] = s
        return s

    def markdown(self):
        d, s, m = self.data, self.data["summary"], self.data["meta"]
        cols = m["backends"]
        lines = [f"# DAG on several GPUs ({m['mode']})", "",
                 f"{len(m.get('gpus', []))} GPUs: {m.get('gpu_names', '?')}; {m.get('topology', '')}; "
                 f"{m.get('versions', '')}; parent_stream {m.get('parent_stream', 'default')}; "
                 f"grid {m['blocks']} x 256 threads per bulk kernel; medians of {m['reps']} "
                 f"repetitions after {m['warmup']} warm-up (wall clock, first launch to every GPU synchronized). "
                 f"{m['started']}.", "",
                 "| shape | sizes | " + " | ".join(f"{c} ms" for c in cols) + " | "
                 + " | ".join(f"hand/{p}" for p in POLICIES) + " | best policy | multi/1gpu dag, cupy | spread |",
                 "|---|---|" + "---:|" * len(cols) + "---:|" * len(POLICIES) + "---|---:|---:|"]
        for name in m["shapes_requested"]:
            r = d["shapes"].get(name)
            if r is None:
                lines.append(f"| {name} | (not run) |" + " |" * (len(cols) + len(POLICIES) + 3))
                continue
            b = r.get("backends", {})
            cells = []
            for c in cols:
                v = b.get(c, {})
                cells.append(f"{v['median_ms']:.2f}" if "median_ms" in v else ("FAIL" if v.get("error") else "-"))
            ratios = [f"{r['hand_over_dag'][p]:.2f}x" if p in r.get("hand_over_dag", {}) else "-" for p in POLICIES]
            spread = max((v.get("spread", 0) for v in b.values() if "spread" in v), default=None)
            sp = (f"{r['best_dag_speedup_vs_1gpu']:.2f}x" if r.get("best_dag_speedup_vs_1gpu") else "-") + ", " + \
                 (f"{r['cupy_multi_speedup_vs_1gpu']:.2f}x" if r.get("cupy_multi_speedup_vs_1gpu") else "-")
            sizes = ", ".join(f"{k} {v}" for k, v in r.get("sizes", {}).items())
            lines.append(f"| {name}{'' if r.get('ok') else ' **FAILED**'} | {sizes} (x{r.get('scale')}) | "
                         + " | ".join(cells) + " | " + " | ".join(ratios) + " | "
                         + (f"{r['best_policy']} ({r['best_ratio']:.2f}x)" if r.get("best_policy") else "-") + f" | {sp} | "
                         + (f"{spread * 100:.0f}%" if spread is not None else "-") + " |")
        gm = s.get("geomean_hand_over_dag", {})
        lines.append("| **geomean** | | " + " |" * len(cols) + " "
                     + " | ".join(f"**{gm[p]:.2f}x**" if gm.get(p) else "-" for p in POLICIES) + " | "
                     + (f"{s['best_policy']}" if s.get("best_policy") else "-") + " | | |")
        lines += ["", "hand/P = t(cupy-multi) / t(dag-P): above 1 the DAG with policy P is faster than the hand-partitioned "
                  "CuPy code. best policy = the highest hand/P of the row. multi/1gpu = t(dag-1gpu) / t(best dag-P) and "
                  "t(cupy-1gpu) / t(cupy-multi): what the second GPU buys. spread = the row's largest (max - min) / median.",
                  ""]
        if s.get("geomean_best_per_shape"):
            lines.append(f"- geometric mean of the best policy per shape (oracle choice): {s['geomean_best_per_shape']:.2f}x")
        lines.append(f"- partitions: {m.get('parts', '?')} per shape, partition q on GPU q % {len(m.get('gpus', [])) or '?'} "
                     f"for cupy-multi (its pieces in that GPU's device memory, exchanges by cudaMemcpyPeerAsync; peer "
                     f"access: {m.get('peer_access', '?')}); the DAG policies choose the GPUs themselves")
        for name in m["shapes_requested"]:
            r = d["shapes"].get(name)
            if r is not None:
                lines.append(f"- {name}: {r.get('notes', '')}; {r.get('launches_per_rep', '?')} launches, "
                             f"{r.get('copies_per_rep', '?')} copies per repetition")
        for name, why in m.get("excluded", {}).items():
            lines.append(f"- {name}: not measured here ({why})")
        gmm = s.get("geomean_managed_over_dag", {})
        if any(gmm.values()):
            lines.append("- against cupy-managed (GrCUDA's kind of hand-optimized code: managed memory prefetched to each "
                         "partition's GPU), geometric mean of t(cupy-managed) / t(dag-P): "
                         + ", ".join(f"{p} {gmm[p]:.2f}x" for p in POLICIES if gmm.get(p)))
        lines += ["", "Goal:", "",
                  f"- best policy >= {GOAL}x cupy-managed, GrCUDA's hand-optimized kind (geometric mean over the shapes, "
                  "best single policy"
                  + (f": {s['best_policy_managed']} {s['best_policy_managed_geomean']:.2f}x"
                     if s.get("best_policy_managed_geomean") else "")
                  + f"): **{s.get('goal_managed', 'not measured')}**",
                  f"- best policy >= {GOAL}x cupy-multi, the stronger device-memory line (geometric mean over the shapes, "
                  "best single policy"
                  + (f": {s['best_policy']} {s['best_policy_geomean']:.2f}x" if s.get("best_policy_geomean") else "")
                  + f"): **{s.get('goal', 'not measured')}**"]
        lines += run.failure_lines(d)
        return "\n".join(lines) + "\n"


# -- preflight and main ----------------------------------------------------------------------------


class Env:
    """What the shapes share: the GPUs, the compiled PTX, CuPy's modules, the contexts."""

    def __init__(self, devs, arch_options, parent_stream=None, max_streams=0):
        from backends import CupyModules

        self.devs, self.parent_stream, self.max_streams = devs, parent_stream, max_streams
        self.ptx = Ptx(arch_options)
        self.modules = CupyModules()
        self.rt = CupyRT(self.modules)
        self.ctxs = {}

    def ctx(self, bname):
        c = self.ctxs.get(bname)
        if c is None:
            if bname == "dag-1gpu":
                c = PolicyContext(bname, self.devs[:1], "round-robin", self.ptx)
            else:
                c = PolicyContext(bname, self.devs, bname[4:], self.ptx, self.parent_stream, self.max_streams)
            self.ctxs[bname] = c
        return c

    def drop(self, bname):
        c = self.ctxs.pop(bname, None)
        if c is not None:
            try:
                c.close()
            except Exception:  # noqa: BLE001
                traceback.print_exc()

    def close(self):
        errs = []
        for b in list(self.ctxs):
            c = self.ctxs.pop(b)
            try:
                c.close()
            except Exception as e:  # noqa: BLE001
                errs.append(f"{b}: {type(e).__name__}: {e}")
        return errs


def preflight(args, meta):
    import cupy as cp

    ucxx_go = run._import_ucxx_go()
    count = cp.cuda.runtime.getDeviceCount()
    devs = args.gpus if args.gpus is not None else list(range(count))
    if any(d >= count for d in devs):
        raise RuntimeError(f"--gpus {devs}: only {count} GPUs are visible")
    if len(devs) < 2 and not args.allow_one_gpu:
        raise RuntimeError(f"{count} GPU(s) visible ({devs}): the multi-GPU mode needs 2 or more "
                           "(--allow-one-gpu runs it on one, as a test of the harness)")
    names, ccs = [], []
    for d in devs:
        p = cp.cuda.runtime.getDeviceProperties(d)
        nm = p["name"].decode() if isinstance(p["name"], bytes) else p["name"]
        names.append(f"{d}: {nm} ({p['multiProcessorCount']} SMs, {p['totalGlobalMem'] / 2**30:.0f} GiB)")
        ccs.append(cp.cuda.Device(d).compute_capability)
    meta["gpus"], meta["gpu_names"] = devs, "; ".join(names)
    if len(set(ccs)) != 1:
        meta["note_cc"] = f"compute capabilities differ: {ccs} (PTX for the lowest)"
    cc = min(ccs)
    args.arch_options = ("--std=c++17", f"--gpu-architecture=compute_{cc}")
    topo = []
    for a in devs:
        for b in devs:
            if a < b:
                topo.append(f"peer {a}<->{b}: {'yes' if cp.cuda.runtime.deviceCanAccessPeer(a, b) else 'no'}")
    try:
        cma = [cp.cuda.runtime.deviceGetAttribute(89, d) for d in devs]  # cudaDevAttrConcurrentManagedAccess
        topo.append(f"concurrent managed access {cma}")
    except Exception as e:  # noqa: BLE001
        topo.append(f"concurrent managed access: ? ({type(e).__name__})")
    meta["topology"] = ", ".join(topo)
    meta["versions"] = (f"cupy {cp.__version__}, CUDA runtime {cp.cuda.runtime.runtimeGetVersion()}, driver "
                        f"{cp.cuda.runtime.driverGetVersion()}, ucxx_go {getattr(ucxx_go, '__version__', '?')} "
                        f"{getattr(ucxx_go, '__git_commit__', '')[:12]}, python {platform.python_version()}")
    # One kernel after another on the GPUs, managed memory (tests/gpu's check, short).
    spec = KERNELS["square"]
    n = 1 << 16
    with ucxx_go.ExecutionContext(policy="async", device_policy="round-robin", gpus=devs, transfers=False) as ctx:
        if list(ctx.gpus) != devs:
            raise RuntimeError(f"ExecutionContext(gpus={devs}).gpus = {ctx.gpus}")
        k = ctx.build_kernel(spec.source, "square", spec.signature, options=args.arch_options)
        x = ctx.array(n, "float32")
        x[:] = np.full(n, 1.0001, np.float32)
        ys = [ctx.array(n, "float32") for _ in range(max(4, len(devs)))]
        src = x
        for y in ys:  # round robin: each square on the next GPU
            k(64, 256)(y, src, n)
            src = y
        got = np.asarray(ys[-1])
        want = np.full(n, np.float32(1.0001), np.float64) ** (2 ** len(ys))
        if not np.allclose(got, want, rtol=1e-3):
            raise RuntimeError(f"preflight: a chain of squares across GPUs computed {got[:3]}, expected {want[:3]}")
        ctx.synchronize_sync()
    return devs


def parse_args(argv=None):
    from shapes_multi import NOT_PARTITIONED, PARTITIONED

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--multi-gpu", action="store_true", help=argparse.SUPPRESS)  # run.py's switch, passed on
    p.add_argument("--quick", action="store_true", help="the suite's quick sizes (scale 1): a smoke test (< 60 s)")
    p.add_argument("--dry", action="store_true", help="no CUDA: the checks of this mode (see dry_checks)")
    p.add_argument("--out", help="results JSON (default: $OUT/dag_multigpu_<mode>.json, else benchmarks/dag/results/)")
    p.add_argument("--md", help="Markdown table (default: beside --out, .md)")
    p.add_argument("--gpus", help="comma-separated CUDA ordinals (default: every visible GPU)")
    p.add_argument("--allow-one-gpu", action="store_true", help="run with one GPU (a harness test, not a measurement)")
    p.add_argument("--parent-stream", help="the dag-<P> contexts' parent_stream (default: ExecutionContext's, "
                                           "multigpu-early-disjoint on several GPUs)")
    p.add_argument("--max-streams", type=int, default=0, help="the dag-<P> contexts' streams per GPU at most (default "
                                                              "0: ExecutionContext's)")
    p.add_argument("--shapes", default=",".join(PARTITIONED),
                   help=f"comma-separated subset of {','.join(PARTITIONED)} (the partitioned shapes; "
                        f"{','.join(NOT_PARTITIONED)} are reported as excluded)")
    p.add_argument("--parts", type=int, help="partitions per shape (default: the number of GPUs; GrCUDA's multi-GPU "
                                             "benchmarks use a multiple, 16)")
    p.add_argument("--backends", default=",".join(BACKENDS), help=f"comma-separated subset of {','.join(BACKENDS)}")
    p.add_argument("--scale", help="size multiplier over the suite's full sizes: N (every shape) or shape=N,... "
                                   f"(default {','.join(f'{k}={v}' for k, v in DEFAULT_SCALE.items())}; --quick 1)")
    p.add_argument("--tile", type=int, help=f"inputs as copies of a base this many times smaller (default {BASE_DIV} "
                                            "x scale: cheap on the host; 1: every element generated)")
    p.add_argument("--blocks", type=int, help="grid of every bulk kernel (x 256 threads); default 1024 (one kernel "
                                              "fills an H100), --quick 64")
    p.add_argument("--reps", type=int, help="timed repetitions (default 5; --quick 2)")
    p.add_argument("--warmup", type=int, help="untimed repetitions first (default 1)")
    p.add_argument("--budget-s", type=float, help="start no new shape after this many seconds (default 110: the whole "
                                                  "mode ~150 s; --quick 45)")
    p.add_argument("--item-timeout", type=float, help="watchdog per shape, seconds (default 90; --quick 60)")
    p.add_argument("--reference", action="store_true", help="also check every backend against the float64 numpy "
                                                            "reference (host time: minutes at the default scale)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--go-trace", metavar="PREFIX", help="record the Go runtime's execution trace of each shape into "
                   "PREFIX.<shape> (ucxx_go.debug.go_trace; `go tool trace -pprof=syscall` shows the time the "
                   "DAG's goroutines spent in driver calls)")
    p.add_argument("--go-cpu-profile", metavar="PREFIX", help="record the Go runtime's CPU profile of each shape into "
                   "PREFIX.<shape> (ucxx_go.debug.go_cpu_profile; read with `go tool pprof`)")
    p.add_argument("--go-cpu-profile-hz", type=int, default=0, metavar="HZ",
                   help="--go-cpu-profile's samples a second (default 0: Go's 100)")
    a = p.parse_args(argv)
    a.mode = "dry" if a.dry else ("quick" if a.quick else "full")
    a.size_mode = "quick" if a.mode == "quick" else "full"
    a.shapes = [s for s in a.shapes.split(",") if s]
    a.backends = [s for s in a.backends.split(",") if s]
    a.excluded = {s: NOT_PARTITIONED[s] for s in a.shapes if s in NOT_PARTITIONED}
    a.shapes = [s for s in a.shapes if s not in NOT_PARTITIONED]
    if a.parts is not None and a.parts < 1:
        p.error("--parts >= 1")
    bad = [s for s in a.shapes if s not in PARTITIONED] + [b for b in a.backends if b not in BACKENDS]
    if bad:
        p.error(f"unknown shapes/backends {bad}")
    if "dag-1gpu" not in a.backends or a.backends[0] != "dag-1gpu":
        a.backends = ["dag-1gpu"] + [b for b in a.backends if b != "dag-1gpu"]  # the reference runs first
    if "cupy-1gpu" in a.backends:  # the CuPy family's reference: before cupy-multi
        a.backends = [a.backends[0], "cupy-1gpu"] + [b for b in a.backends[1:] if b != "cupy-1gpu"]
    try:
        a.scale = parse_scale(a.scale) if (a.scale or a.mode != "quick") else {k: 1 for k in DEFAULT_SCALE}
    except ValueError as e:
        p.error(str(e))
    if any(v < 1 for v in a.scale.values()):
        p.error("--scale: at least 1")
    quick = a.mode == "quick"
    a.gpus = [int(x) for x in a.gpus.split(",")] if a.gpus else None
    a.blocks = a.blocks if a.blocks is not None else (64 if quick else 1024)
    a.reps = a.reps if a.reps is not None else (2 if quick else 5)
    a.warmup = a.warmup if a.warmup is not None else 1
    a.budget_s = a.budget_s if a.budget_s is not None else (45.0 if quick else 110.0)
    a.item_timeout = a.item_timeout if a.item_timeout is not None else (60.0 if quick else 90.0)
    if a.reps < 1 or a.warmup < 0 or not 1 <= a.blocks <= 4096 or (a.tile is not None and a.tile < 1):
        p.error("--reps >= 1, --warmup >= 0, 1 <= --blocks <= 4096, --tile >= 1")
    if a.mode == "dry":
        return a
    if a.out is None:
        base = os.environ.get("OUT") or os.path.join(HERE, "results")
        os.makedirs(base, exist_ok=True)
        a.out = os.path.join(base, f"dag_multigpu_{a.mode}.json")
    if a.md is None:
        a.md = os.path.splitext(a.out)[0] + ".md"
    return a


def main(argv=None):
    args = parse_args(argv)
    if args.mode == "dry":
        return dry_main(args)

    t_start = time.monotonic()
    meta = {"mode": args.mode, "started": time.strftime("%Y-%m-%d %H:%M:%S"), "host": platform.node(),
            "argv": list(argv if argv is not None else sys.argv[1:]), "shapes_requested": args.shapes,
            "backends": args.backends, "reps": args.reps, "warmup": args.warmup, "blocks": args.blocks,
            "scale": args.scale, "tile": args.tile, "budget_s": args.budget_s, "seed": args.seed,
            "excluded": args.excluded, "parent_stream": args.parent_stream or "default",
            "max_streams": args.max_streams or "default",
            "env": {k: v for k, v in os.environ.items() if k.startswith(("UCX_", "CUDA_", "CUPY_"))}}
    results = Results(args.out, args.md, meta)
    wd = run.Watchdog(results)
    log(f"DAG multi-GPU, {args.mode}: shapes {args.shapes}, backends {args.backends}, scale {args.scale}; "
        f"results -> {args.out}, {args.md}")
    try:
        with wd.guard("preflight", 120):
            devs = preflight(args, meta)
        log(f"preflight ok: {meta['gpu_names']}; {meta['topology']}; {meta['versions']}")
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        results.fail("preflight", f"{type(e).__name__}: {e}")
        results.write()
        log(f"PREFLIGHT FAILED: {type(e).__name__}: {e}")
        return 2
    args.parts = args.parts or len(devs)
    meta["parts"] = args.parts
    meta["peer_access"] = ", ".join(enable_peer_access(devs)) or "one GPU"
    log(f"{args.parts} partitions per shape; peer access {meta['peer_access']}")
    for name, why in args.excluded.items():
        log(f"excluded: {name} ({why})")
    results.write()
    env = Env(devs, args.arch_options, args.parent_stream, args.max_streams)
    failed = False
    for name in args.shapes:
        label = f"shape {name}"
        elapsed = time.monotonic() - t_start
        if elapsed > args.budget_s:
            results.data["skipped"].append({"item": label, "why": f"budget: {elapsed:.0f} s > {args.budget_s:.0f} s"})
            log(f"skipping {label}: the budget ({args.budget_s:.0f} s) is spent")
            results.write()
            continue
        try:
            with wd.guard(label, args.item_timeout):
                import contextlib  # noqa: PLC0415

                with contextlib.ExitStack() as debugging:
                    if args.go_trace or args.go_cpu_profile:
                        import ucxx_go  # noqa: PLC0415

                        if args.go_trace:
                            debugging.enter_context(ucxx_go.debug.go_trace(f"{args.go_trace}.{name}"))
                        if args.go_cpu_profile:
                            path = f"{args.go_cpu_profile}.{name}"
                            debugging.enter_context(ucxx_go.debug.go_cpu_profile(path, args.go_cpu_profile_hz))
                    r = run_shape(name, args, env)
            results.data["shapes"][name] = r
            if not r["ok"]:
                failed = True
                errs = {b: v["error"] for b, v in r["backends"].items() if "error" in v}
                results.fail(label, "; ".join(f"{b}: {e}" for b, e in errs.items()))
        except Exception as e:  # noqa: BLE001
            failed = True
            traceback.print_exc()
            results.fail(label, f"{type(e).__name__}: {e}")
            log(f"{label}: FAILED: {type(e).__name__}: {e}")
        results.write()
    with wd.guard("closing the contexts", 60):
        for e in env.close():
            failed = True
            results.fail("close", e)
    meta["compile_s"] = env.ptx.compile_s
    meta["elapsed_s"] = time.monotonic() - t_start
    results.write()
    print()
    print(results.markdown())
    log(f"done in {meta['elapsed_s']:.0f} s; wrote {args.out} and {args.md}")
    return 1 if (failed or results.data["failures"]) else 0


# -- --dry ------------------------------------------------------------------------------------------


def dry_checks(shapes, seed, out=print):
    """The multi-GPU mode without CUDA; returns a list of failures. See dry_main."""
    from emulate import DagDry, Emulator, FakeMultiRT
    from shapes import SHAPES, config
    from shapes_multi import NOT_PARTITIONED, make_partitioned

    from dry import stepper

    failures = []
    step = stepper(failures, "multi-gpu ")

    def policies():
        import ucxx_go

        for pol in POLICIES:
            c = ucxx_go.ExecutionContext(policy="async", device_policy=pol, gpus=[], transfers=False)
            c.close()
        out(f"  the ExecutionContext accepts device_policy {', '.join(POLICIES)}")

    def sizes():
        for name in shapes:
            for mode, scale in (("full", DEFAULT_SCALE[name]), ("quick", 1)):
                cfg = scaled_config(name, mode, scale, 1024 if mode == "full" else 64)
                big, note = size_limits(name, cfg)
                if big >= 2 ** 30:
                    raise AssertionError(f"{name} at scale {scale}: an array of {big} elements (kernels index with int)")
                if mode == "full" and cfg.tile > 1 and note == "not tiled" and name != "img":
                    raise AssertionError(f"{name}: the size is not a multiple of the tile {cfg.tile}")
                if mode == "full":
                    out(f"  {name:5s} scale {scale:2d}: largest array {big / 2**20:.0f} Mi elements, {note}")

    def shape(name, tile, P, G):
        """The partitioned program of `name` with P partitions: on one GPU (the
        emulator's lanes: dag-1gpu, cupy-1gpu) and by hand on G fake GPUs (cupy-multi
        over FakeMultiRT: every piece on its partition's GPU, nothing reached across
        GPUs but by copies, cross-GPU events ordering every conflicting pair), each
        equal to the one-GPU shape's float64 reference; twice, with a reset between;
        without its waits, racing; through pack_arguments."""
        cfg = config("dry", tile=tile)
        inst = make_partitioned(name, cfg, np.random.default_rng(seed + sorted(SHAPES).index(name)), P)
        rec = record(inst)
        emu = Emulator(inst.lanes)
        A = emu.alloc(inst.arrays, inst.state)
        emu.begin()
        inst.build(emu, A)
        if emu.races:
            raise AssertionError(f"{name}, {P} partitions, one GPU: the lanes race:\n  " + "\n  ".join(emu.races[:10]))
        errs = inst.check({k: emu.read(k) for k in inst.outputs}, "partitioned (emulated, one GPU)")
        devs = list(range(G))
        memu = Emulator(inst.lanes)
        rt = FakeMultiRT(memu, devs)
        mc = MultiCupy(rt, inst, devs)
        mc.checking = True
        mc.arrays = PlacedArrays(rt, inst, inst.arrays, devs[0], devs, host_copies(inst))
        for k, arr in mc.arrays.arrays.items():
            lay = inst.layout[k]
            want = ([part_device(q, devs) for q in range(P)] if lay.kind == "split" else
                    [part_device(lay.q, devs)] if lay.kind == "home" else devs)
            if [pc[2] for pc in arr.pieces] != want:
                raise AssertionError(f"{name}: {k} ({lay}) placed on {[pc[2] for pc in arr.pieces]}, expected {want}")
        first = None
        for _rep in range(2):  # twice: the events are reused and the state arrays reset
            mc.arrays.reset()
            mc.run(from_host(mc.arrays, inst))
            if memu.races:
                raise AssertionError(f"{name}, {P} partitions on {G} GPUs: the cross-GPU structure races:\n  "
                                     + "\n  ".join(memu.races[:10]))
            got = {k: np.array(mc.arrays.read(k)) for k in inst.outputs}
            merrs = inst.check(got, "cupy-multi (emulated)")
            if first is None:
                first = got
            elif any(not np.array_equal(first[k], got[k]) for k in got):
                raise AssertionError(f"{name}: cupy-multi's second repetition differs from its first")
        if rt.launches != 2 * rec.launches or rt.copies != 2 * rec.copies:
            raise AssertionError(f"{name}: {rt.launches} launches, {rt.copies} copies in two repetitions; "
                                 f"recorded {rec.launches}, {rec.copies} per repetition")
        pieces = sum(len(mc.arrays.arrays[k].pieces) for k in inst.host_reset)
        if rt.uploads != 2 * pieces:
            raise AssertionError(f"{name}: {rt.uploads} uploads in two repetitions, {pieces} pieces of "
                                 f"{inst.host_reset} per repetition")
        # cupy-managed: the same program over managed pieces, prefetched where cupy-multi uploads.
        gemu = Emulator(inst.lanes)
        grt = FakeMultiRT(gemu, devs)
        gm = MultiCupy(grt, inst, devs, name="cupy-managed")
        gm.checking = True
        gm.arrays = ManagedPlacedArrays(grt, inst, inst.arrays, devs[0], devs, host_copies(inst))
        for _rep in range(2):
            gm.arrays.reset()
            gm.run(from_host(gm.arrays, inst))
            if gemu.races:
                raise AssertionError(f"{name}, {P} partitions on {G} GPUs, managed: races:\n  " + "\n  ".join(gemu.races[:10]))
            gots = {k: np.array(gm.arrays.read(k)) for k in inst.outputs}
            if any(not np.array_equal(first[k], gots[k]) for k in gots):
                raise AssertionError(f"{name}: cupy-managed's outputs differ from cupy-multi's")
        if grt.prefetches != 2 * pieces or grt.uploads:
            raise AssertionError(f"{name}: cupy-managed made {grt.prefetches} prefetches and {grt.uploads} uploads in "
                                 f"two repetitions, {pieces} pieces of {inst.host_reset} per repetition")
        nw = Emulator(inst.lanes)
        A2 = nw.alloc(inst.arrays, inst.state)

        class NoWaits(Program):
            def launch(self, *a, **k):
                return nw.launch(*a, **k)

            def copy(self, *a, **k):
                return nw.copy(*a, **k)

            def mark(self, lane):
                return nw.mark(lane)

        inst.build(NoWaits(), A2)
        if name != "bs" and not nw.races:
            raise AssertionError(f"{name}: dropping the waits reported no race")
        dd = DagDry()
        try:
            inst.build(dd, dd.alloc(inst.arrays, inst.state))
        finally:
            dd.close()
        out(f"  {name:5s} tile {tile}, {P} partitions on {G} GPUs ok: {rec.launches} launches, {rec.copies} copies "
            f"({rec.peer_copies} between partitions, {rec.peer_bytes} B) per repetition; cupy-multi {rt.per_device} "
            f"launches per GPU, {rt.peer_copies} peer copies, {rt.cross_waits} cross-GPU waits, {rt.uploads} uploads "
            f"of {','.join(inst.host_reset) or 'nothing'} (cupy-managed: {grt.prefetches} prefetches, outputs equal); "
            f"max error {max(errs.values()):.1e} (one GPU), {max(merrs.values()):.1e} (cupy-multi); no-wait variant: "
            f"{len(nw.races)} races")

    step("policies", policies)
    step("sizes", sizes)
    for name in shapes:
        if name in NOT_PARTITIONED:
            out(f"  {name:5s} excluded from the multi-GPU mode: {NOT_PARTITIONED[name]}")
            continue
        for tile, P, G in ((1, 2, 2), (2, 2, 2), (1, 4, 2), (1, 3, 3), (1, 2, 1)):
            step(f"{name}/tile {tile}/{P} partitions/{G} GPUs", shape, name, tile, P, G)
    return failures


def dry_main(args):
    print("\n== multi-GPU mode (no CUDA: sizes, lanes -> GPUs, cross-GPU events, numpy emulation)", flush=True)
    failures = dry_checks(args.shapes, args.seed)
    print()
    if failures:
        print("MULTI-GPU DRY RUN FAILED:")
        for f in failures:
            print("  " + f)
        return 1
    print("multi-GPU dry run: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
