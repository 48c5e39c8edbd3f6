"""The backends a shape's program runs on, behind one small interface.

A shape's ``build(p, A)`` issues one repetition of its work through ``p``:

    p.launch(kernel_name, grid, block, *args, lane=k)   # one kernel launch
    tok = p.mark(k)                                      # "everything issued on lane k so far"
    p.wait(j, tok)                                       # lane j waits for that
    p.copy(dst, src, lane=k)                             # dst[:] = src on lane k (an exchange
                                                         # between partitions: multi-GPU mode)

``A`` holds the backend's arrays by name (``A.x``; slices ``A.u[1:n]`` are views).
Lanes, marks and waits are the hand-written stream structure: the CuPy backends map
lanes to streams and marks/waits to event record/wait; the DAG backends ignore them
(the program order alone is the input, the ExecutionContext infers the rest).

Backends:
  dag-async     ucxx_go.ExecutionContext(policy="async"), kernels from build_kernel
  dag-sync      the same, policy="sync" (every vertex waits for the previous one)
  cupy-streams  cupy.RawKernel of the same source on one non-blocking stream per lane,
                Event record / Stream.wait_event for the marks and waits
  cuda-graph    the cupy-streams program captured once (Stream.begin_capture /
                end_capture) and replayed with Graph.launch
  cupy-serial   (reference) every launch on one stream, no events
  emulate       (--dry, no CUDA) numpy versions of the kernels run in program order,
                plus a vector-clock check that the hand-written lane structure orders
                every conflicting pair of launches (see emulate.py)
"""

import time
import types

import numpy as np

from kernels import KERNELS

BACKENDS = ("dag-async", "dag-sync", "cupy-streams", "cuda-graph", "cupy-serial")
DAG_BACKENDS = ("dag-async", "dag-sync")
CUPY_BACKENDS = ("cupy-streams", "cuda-graph", "cupy-serial")


class BenchError(Exception):
    """A benchmark that cannot run or computed something wrong."""


_PARAMS = {}


def params_of(name):
    """The parsed signature of kernel `name` (ucxx_go's parser: what build_kernel uses)."""
    p = _PARAMS.get(name)
    if p is None:
        from ucxx_go._kernels import parse_signature

        spec = KERNELS.get(name)
        if spec is None:
            raise BenchError(f"no kernel named {name!r} in kernels.py")
        p = _PARAMS[name] = parse_signature(spec.signature)
    return p


# NIDL element type -> numpy dtype a pointer argument must have.
_ELEMENT = {"float": np.dtype(np.float32), "sint32": np.dtype(np.int32), "double": np.dtype(np.float64)}


def check_launch(name, grid, block, args, length, dtype):
    """The checks every backend's validation repetition makes before a launch (and the
    dry run makes on all): the argument count and kinds against the signature, each
    pointer argument's element type, and each pointer argument's length against what
    the kernel touches (kernels.required_lengths). `length(a)`/`dtype(a)` read a backend array.
    Raises BenchError."""
    from kernels import required_lengths

    params = params_of(name)
    if len(args) != len(params):
        raise BenchError(f"launch of {name}: {len(args)} arguments for {len(params)} parameters ({KERNELS[name].signature})")
    if not (isinstance(grid, int) and isinstance(block, int) and grid >= 1 and 1 <= block <= 1024):
        raise BenchError(f"launch of {name}: grid {grid!r}, block {block!r}: positive ints (block <= 1024)")
    if block % 32:
        raise BenchError(f"launch of {name}: block {block} is not a multiple of 32 (block_reduce)")
    sig_parts = [s.strip() for s in KERNELS[name].signature.split(",")]
    scalars, lengths = {}, {}
    for p, a, part in zip(params, args, sig_parts):
        if p.pointer:
            if isinstance(a, (int, float, np.number)):
                raise BenchError(f"launch of {name}: parameter {p.name} is a pointer, got scalar {a!r}")
            want = _ELEMENT[part.split()[-1]]
            if dtype(a) != want:
                raise BenchError(f"launch of {name}: parameter {p.name} wants {want} elements, got {dtype(a)}")
            lengths[p.name] = length(a)
        else:
            if not isinstance(a, (int, float, np.number)):
                raise BenchError(f"launch of {name}: parameter {p.name} is a scalar, got {type(a).__name__}")
            scalars[p.name] = a
    for pname, want in required_lengths(name, scalars, grid, block).items():
        if lengths[pname] != want:
            raise BenchError(f"launch of {name}: argument {pname} has {lengths[pname]} elements, the kernel "
                             f"touches exactly {want} (scalars {scalars}, grid {grid})")


def convert_scalars(name, args, numpy_types):
    """Scalars as the signature types them: Python int/float (numpy_types False: the DAG
    packs them) or numpy scalars (True: cupy passes numpy scalars with their width)."""
    out = []
    for p, a in zip(params_of(name), args):
        if p.pointer:
            out.append(a)
        elif p.fmt in "bBhHiIqQ?":
            v = int(a)
            if numpy_types:
                v = {"i": np.int32, "I": np.uint32, "q": np.int64, "Q": np.uint64}[p.fmt](v)
            out.append(v)
        else:
            v = float(a)
            if numpy_types:
                v = (np.float32 if p.fmt == "f" else np.float64)(v)
            out.append(v)
    return out


class Program:
    """The interface shapes program against; see the module docstring."""

    name = "?"
    checking = False  # run check_launch before each launch (the validation repetition)

    def launch(self, name, grid, block, *args, lane=0):
        raise NotImplementedError

    def mark(self, lane):
        return None

    def wait(self, lane, token):
        pass

    def copy(self, dst, src, lane=0):
        """dst[:] = src (equal sizes and types) on `lane`, after what the lane issued
        before: the data a partitioned program exchanges (shapes_multi.py)."""
        raise NotImplementedError(f"{self.name}: no copy")

    def begin(self):
        pass

    def end(self):
        pass


# -- CuPy -----------------------------------------------------------------------------------


class CupyModules:
    """One cupy.RawKernel per kernel, compiled once per process."""

    def __init__(self, options=()):  # CuPy 14 defaults to C++17 and -arch=sm_<cc>
        self.options = tuple(options)
        self.kernels = {}
        self.compile_s = 0.0

    def get(self, name):
        k = self.kernels.get(name)
        if k is None:
            import cupy as cp

            t = time.perf_counter()
            k = cp.RawKernel(KERNELS[name].source, name, options=self.options)
            k.compile()  # now, not in the first (timed or captured) launch
            self.compile_s += time.perf_counter() - t
            self.kernels[name] = k
        return k


class DeviceArrays:
    """The device copies of a shape instance's host arrays, their pristine copies for the
    state arrays, and the handles the program sees (`handles`)."""

    def __init__(self, host_arrays, state, wrap=None):
        import cupy as cp

        self.dev = {}
        for k, v in host_arrays.items():
            self.dev[k] = cp.asarray(v)
        self.pristine = {k: self.dev[k].copy() for k in state}
        cp.cuda.Device().synchronize()
        self.handles = types.SimpleNamespace(**{k: (wrap(v) if wrap else v) for k, v in self.dev.items()})

    def reset(self):
        """Restore the state arrays (null stream, then the whole device synchronized: the
        DAG's and the streams' next work sees them)."""
        import cupy as cp

        for k, v in self.pristine.items():
            self.dev[k][...] = v
        cp.cuda.Device().synchronize()

    def read(self, name):
        import cupy as cp

        return cp.asnumpy(self.dev[name])


class CupyStreams(Program):
    """cupy-streams (lanes -> non-blocking streams), or cupy-serial (serial=True: one
    stream, marks and waits do nothing)."""

    def __init__(self, modules, lanes, serial=False):
        import cupy as cp

        self.name = "cupy-serial" if serial else "cupy-streams"
        self.modules = modules
        self.serial = serial
        n = 1 if serial else max(1, lanes)
        self.streams = [cp.cuda.Stream(non_blocking=True) for _ in range(n)]
        self._events = []
        self._next_event = 0
        self._fork = cp.cuda.Event(disable_timing=True)
        self._join = [cp.cuda.Event(disable_timing=True) for _ in range(n)]
        self.arrays = None

    def alloc(self, host_arrays, state):
        self.arrays = DeviceArrays(host_arrays, state)
        return self.arrays.handles

    def _event(self):
        import cupy as cp

        if self._next_event == len(self._events):
            self._events.append(cp.cuda.Event(disable_timing=True))
        ev = self._events[self._next_event]
        self._next_event += 1
        return ev

    def _stream(self, lane):
        if self.serial:
            return self.streams[0]
        if not 0 <= lane < len(self.streams):
            raise BenchError(f"{self.name}: lane {lane}, the shape declared {len(self.streams)}")
        return self.streams[lane]

    def launch(self, name, grid, block, *args, lane=0):
        if self.checking:
            check_launch(name, grid, block, args, len, lambda a: a.dtype)
        k = self.modules.get(name)
        k((grid,), (block,), tuple(convert_scalars(name, args, True)), stream=self._stream(lane))

    def copy(self, dst, src, lane=0):
        """A device-to-device cudaMemcpyAsync on the lane's stream."""
        import cupy as cp

        if dst.dtype != src.dtype or dst.size != src.size:
            raise BenchError(f"{self.name}: copy of {src.dtype} x {src.size} into {dst.dtype} x {dst.size}")
        cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes, cp.cuda.runtime.memcpyDeviceToDevice,
                                    self._stream(lane).ptr)

    def mark(self, lane):
        if self.serial:
            return None
        ev = self._event()
        ev.record(self._stream(lane))
        return ev

    def wait(self, lane, token):
        if self.serial:
            return
        if token is None:
            raise BenchError(f"{self.name}: wait on lane {lane} for no mark")
        self._stream(lane).wait_event(token)

    def begin(self):
        """Fork: every lane starts after what lane 0 had (needed to pull the lanes into a
        capture; harmless otherwise)."""
        self._next_event = 0
        if len(self.streams) > 1:
            self._fork.record(self.streams[0])
            for s in self.streams[1:]:
                s.wait_event(self._fork)

    def end(self):
        """Join: lane 0 waits for every other lane (a capture must end joined)."""
        for s, ev in zip(self.streams[1:], self._join[1:]):
            ev.record(s)
            self.streams[0].wait_event(ev)

    def run(self, build):
        """One repetition: launch everything, then wait for the device."""
        import cupy as cp

        self.begin()
        build(self, self.arrays.handles)
        self.end()
        submitted = time.perf_counter()
        self.streams[0].synchronize()
        cp.cuda.Device().synchronize()
        return submitted

    def close(self):
        self.arrays = None


class CudaGraph(CupyStreams):
    """The cupy-streams program captured once into a CUDA graph, replayed per repetition."""

    def __init__(self, modules, lanes):
        super().__init__(modules, lanes)
        self.name = "cuda-graph"
        self.graph = None
        self.capture_s = None

    def capture(self, build):
        s0 = self.streams[0]
        t = time.perf_counter()
        s0.begin_capture()
        try:
            self.begin()
            build(self, self.arrays.handles)
            self.end()
        except BaseException:
            try:
                s0.end_capture()
            except Exception:  # noqa: BLE001 (the build's error is the one to report)
                pass
            raise
        self.graph = s0.end_capture()
        self.capture_s = time.perf_counter() - t

    def run(self, build):
        import cupy as cp

        if self.graph is None:
            raise BenchError("cuda-graph: run before capture")
        self.graph.launch(stream=self.streams[0])
        submitted = time.perf_counter()
        self.streams[0].synchronize()
        cp.cuda.Device().synchronize()
        return submitted

    def close(self):
        self.graph = None
        super().close()


# -- ucxx_go ExecutionContext ------------------------------------------------------------------


class DagContext:
    """One ExecutionContext per policy, reused by the shapes, with its kernels built once
    (build_kernel). Remade after a failure."""

    def __init__(self, policy, arch_options):
        self.policy = policy
        self.arch_options = tuple(arch_options)
        self.ctx = None
        self.kernels = {}
        self.compile_s = 0.0

    def get(self):
        if self.ctx is None:
            import ucxx_go

            self.ctx = ucxx_go.ExecutionContext(policy=self.policy, transfers=False)
            if not self.ctx.gpus:
                raise BenchError("ucxx_go.ExecutionContext sees no GPU (ctx.gpus == []): is the CUDA driver visible?")
            self.kernels = {}
        return self.ctx

    def kernel(self, name):
        k = self.kernels.get(name)
        if k is None:
            spec = KERNELS[name]
            t = time.perf_counter()
            k = self.get().build_kernel(spec.source, name, spec.signature, options=self.arch_options)
            self.compile_s += time.perf_counter() - t
            self.kernels[name] = k
        return k

    def close(self):
        ctx, self.ctx = self.ctx, None
        self.kernels = {}
        if ctx is not None:
            ctx.close()
            left = ctx.resources()
            if any(left.values()):
                raise BenchError(f"ExecutionContext({self.policy}).close() left {left}")


class Dag(Program):
    """dag-async / dag-sync: the program order into an ExecutionContext; lanes, marks and
    waits are ignored."""

    def __init__(self, dagctx):
        self.name = f"dag-{dagctx.policy}"
        self.dagctx = dagctx
        self.vertices = []
        self.checked = []
        self.arrays = None

    def alloc(self, host_arrays, state):
        ctx = self.dagctx.get()
        self.arrays = DeviceArrays(host_arrays, state, wrap=ctx.wrap)
        return self.arrays.handles

    def launch(self, name, grid, block, *args, lane=0):
        if self.checking:
            check_launch(name, grid, block, args, len, lambda a: a.dtype)
        k = self.dagctx.kernel(name)
        self.vertices.append(k(grid, block)(*convert_scalars(name, args, False)))

    def copy(self, dst, src, lane=0):
        """ctx.copy: a vertex like a kernel (reads src's range, writes dst's)."""
        self.vertices.append(self.dagctx.get().copy(dst, src))

    def run(self, build):
        import cupy as cp

        self.vertices = []
        build(self, self.arrays.handles)
        submitted = time.perf_counter()
        self.dagctx.ctx.synchronize_sync()
        cp.cuda.Device().synchronize()
        return submitted

    def check_vertices(self, timeout=60.0):
        """Every vertex of the last repetition ended well (synchronize does not raise a
        vertex's failure; waiting for it does). They stay in self.checked."""
        vs, self.vertices = self.vertices, []
        self.checked = vs
        for v in vs:
            v.wait(timeout=timeout)
        return len(vs)

    def close(self):
        if self.arrays is not None and self.dagctx.ctx is not None:
            self.dagctx.ctx.synchronize_sync()
        self.arrays = None
        self.vertices = []
