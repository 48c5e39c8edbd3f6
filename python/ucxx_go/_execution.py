"""ExecutionContext: GrCUDA's run-time DAG for Python (core/dag, core/execution).

Every operation (a kernel launch, a copy, a reduction, a Python host function, a put,
get, send or receive) is one call into the Go core that adds one vertex with the byte
ranges it reads and writes, and returns at once: a ``Vertex``. The DAG orders each
vertex after the earlier ones it conflicts with, per byte range, so independent work
runs concurrently (kernels on separate CUDA streams, host work on worker threads,
transfers through the engine); the host only waits where it reads or writes.

    ctx = ucxx_go.ExecutionContext()
    x = ctx.array(n, "float32")                      # on the context's GPU
    y = ctx.array(n, "float32", device="cpu")        # host memory (numpy)
    sq = ctx.build_kernel(SRC, "square", "pointer, const pointer, sint32")
    sq(blocks, threads)(x, x, n)                     # a Vertex, at once
    ctx.copy(y, x)
    print(y[3])                                      # waits for the copy only
    ctx.close()

Arrays are ``DeviceArray`` objects: 1-D, typed, host or device memory, with an id
unique in their context that their slices share (a slice is a byte range of its root
array). Kernel signatures use GrCUDA's syntax (``_kernels``).

Lifetime: the objects an operation uses (arrays' memory, endpoints, remote regions)
are referenced by the context from the call until the next ``synchronize()`` (which
proves that everything added before it has finished) or ``close()``; a Python host
function is referenced until it has run. A context dropped without ``close()`` is closed
by its finalizer in the background, and its vertices' objects stay referenced until
that close has returned. Arrays keep their context alive.

Host access fast path (GrCUDA's): each root array remembers which byte ranges the
host may read, and which it may write, without asking the DAG (what the last host
access made safe, and the whole array before any operation used it). An element
access inside such a range makes no call into Go; an operation that writes the array
forgets both, one that only reads it forgets the write-safe ranges.

Host functions run on daemon threads of the context (``python_workers``), each
taking ready vertices from Go (``DagTakeHost``). Inside a host function, the context's
arrays are accessed directly, without synchronization: the function's declared
``reads`` and ``writes`` are what made it safe to run.
"""

import array
import asyncio
import ctypes
import itertools
import json
import logging
import math
import numbers
import operator
import os
import re
import threading
import time
import weakref

import numpy

from . import _constants as C
from . import _context, _kernels, _tags
from ._blocking import in_thread
from ._bridge import ext, translate
from ._buffers import buffer_info
from ._onesided import RemoteRegion
from .exceptions import UCXCloseError, UCXError, UCXForkError, UCXTimedOutError, UCXUnsupportedError

__all__ = ["ExecutionContext", "DeviceArray", "Vertex", "Kernel", "ConfiguredKernel", "VertexFailedError"]

logger = logging.getLogger("ucxx_go")

# The access descriptors Go decodes (execution.AccessDescriptor): four u64 words, in
# the order _access() writes them.
if (C.ACCESS_ARRAY_WORD, C.ACCESS_OFF_WORD, C.ACCESS_LEN_WORD, C.ACCESS_MODE_WORD) != (0, 1, 2, 3) \
        or C.ACCESS_DESCRIPTOR_WORDS != 4 or C.ACCESS_DESCRIPTOR_SIZE != 32:
    raise ImportError("ucxx_go._execution: execution.AccessDescriptor changed; update the descriptors")
if array.array("Q").itemsize != 8:
    raise ImportError("ucxx_go._execution: array('Q') is not 8 bytes")

_READ, _WRITE, _RW, _REDUCE = C.ACCESS_READ, C.ACCESS_WRITE, C.ACCESS_READ_WRITE, C.ACCESS_REDUCE

# Each option's Go key and the names the Go core parses (generated from core/dag).
_POLICIES = {
    "policy": ("execution", C.EXECUTION_POLICIES),
    "dependency": ("dependency", C.DEPENDENCY_POLICIES),
    "new_stream": ("new_stream", C.NEW_STREAM_POLICIES),
    "parent_stream": ("parent_stream", C.PARENT_STREAM_POLICIES),
    "device_policy": ("device_selection", C.DEVICE_POLICIES),
}

# Reductions' element types (execution.Dtype) and operations (execution.ReduceOp).
_DTYPES = {
    numpy.dtype(numpy.int8): C.DTYPE_INT8, numpy.dtype(numpy.int16): C.DTYPE_INT16,
    numpy.dtype(numpy.int32): C.DTYPE_INT32, numpy.dtype(numpy.int64): C.DTYPE_INT64,
    numpy.dtype(numpy.uint8): C.DTYPE_UINT8, numpy.dtype(numpy.uint16): C.DTYPE_UINT16,
    numpy.dtype(numpy.uint32): C.DTYPE_UINT32, numpy.dtype(numpy.uint64): C.DTYPE_UINT64,
    numpy.dtype(numpy.float32): C.DTYPE_FLOAT32, numpy.dtype(numpy.float64): C.DTYPE_FLOAT64,
}
_OPS = {"sum": C.REDUCE_SUM, "prod": C.REDUCE_PROD, "min": C.REDUCE_MIN, "max": C.REDUCE_MAX}

_HOST_NAMES = ("cpu", "host")
_GPU_NAMES = ("gpu", "cuda")

# How long a Python worker waits in DagTakeHost before it looks at its context again,
# and how long close() waits for the workers to return.
_TAKE_TIMEOUT_MS = 1000
_JOIN_TIMEOUT = 5.0
# Python host functions' exceptions kept for the errors of their vertices' waiters.
_MAX_ERRORS = 4096

# An awaited vertex is waited for in slices this long (Vertex.__await__).
_AWAIT_SLICE = 0.1
_MAX_WAIT_MS = 10**12  # a bounded wait's longest, ~30 years (Go's durations end at ~292)

_tls = threading.local()  # .host: the _HostLane whose function this thread runs


class VertexFailedError(UCXError):
    """A vertex of an ExecutionContext failed, or did not run because an ancestor it
    depends on failed.

    Attributes
    ----------
    vertex : int
        The vertex waited for (for a host access, the access's own vertex).
    root : int
        The vertex whose failure this is: ``vertex`` itself, or the failed ancestor.
    status : int
        The UCS status of the root's failure, when it has one.

    ``__cause__`` is the root's own failure: the exception a Python host function
    raised, or the UCXError of a transfer (UCXCanceledError for one the context's
    close cancelled), a kernel or a copy.
    """

    vertex = None
    root = None


# 'dag: vertex 7 (host "copy") not completed: ancestor vertex 5 (host "python") failed: ...'
_SELF = re.compile(r'^dag: vertex (\d+) \((\w+)(?: "((?:[^"\\]|\\.)*)")?\) (?:failed|not completed)')
_ROOT = re.compile(r'ancestor vertex (\d+) \((\w+)(?: "((?:[^"\\]|\\.)*)")?\) failed')


def _default_gpus():
    """[0] when the CUDA driver sees a device, else []. Asks the driver directly (no
    cupy needed, nothing of Go's started)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return []
    try:
        if lib.cuInit(0) != 0:
            return []
        n = ctypes.c_int(0)
        if lib.cuDeviceGetCount(ctypes.byref(n)) != 0:
            return []
    except AttributeError:
        return []
    return [0] if n.value > 0 else []


def _cupy(what):
    try:
        import cupy  # noqa: PLC0415
    except ImportError:
        raise RuntimeError(f"{what} needs cupy (pip install cupy-cuda13x) to allocate device memory; "
                           "or allocate it yourself and pass it to ExecutionContext.wrap") from None
    return cupy


def _dim3(v, what):
    if isinstance(v, (tuple, list)):
        if not 1 <= len(v) <= 3:
            raise ValueError(f"{what} must be an int or 1 to 3 ints, got {v!r}")
        dims = [operator.index(x) for x in v]
    else:
        dims = [operator.index(v)]
    if any(d < 1 or d > 0xFFFFFFFF for d in dims):
        raise ValueError(f"{what} must be positive, got {v!r}")
    return tuple(dims) + (1,) * (3 - len(dims))


# -- host functions -------------------------------------------------------------------


class _HostLane:
    """The Python side of a context's lane of host functions: the functions not run yet
    (by vertex id), the exceptions of those that failed, the worker threads. Workers
    hold this, never the ExecutionContext, so a context nobody references can be
    collected (and its finalizer closes it)."""

    def __init__(self, handle):
        self.handle = handle
        self.lock = threading.Lock()  # DagHost and the registration of its function, atomically
        self.fns = {}  # vertex id -> fn
        self.errors = {}  # vertex id -> exception, oldest first
        self.threads = []
        self.closed = False

    def start(self, n):
        for i in range(n):
            t = threading.Thread(target=self._work, name=f"ucxx_go-host-{self.handle}-{i}", daemon=True)
            self.threads.append(t)
            t.start()

    def record(self, vid, exc):
        with self.lock:
            if len(self.errors) >= _MAX_ERRORS:
                del self.errors[next(iter(self.errors))]
            self.errors[vid] = exc

    def _work(self):
        h = self.handle
        while True:
            try:
                vid = ext.pybridge_DagTakeHost(h, _TAKE_TIMEOUT_MS)
            except RuntimeError as e:
                if not self.closed:
                    logger.error("ucxx_go: ExecutionContext host worker stops: %s", translate(e))
                return  # closed: nothing more to take
            if vid == 0:
                if self.closed:
                    return
                continue
            # DagHost may have returned this id to the submitter, which registers the
            # function under the lock it holds across the call: take the lock to see it.
            with self.lock:
                fn = self.fns.pop(vid, None)
            failure = ""
            if fn is None:
                failure = "RuntimeError: ucxx_go: no host function for this vertex"
            else:
                _tls.host = self
                try:
                    fn()
                except BaseException as e:  # noqa: BLE001 (the vertex fails; the worker goes on)
                    self.record(vid, e)
                    failure = f"{type(e).__name__}: {e}"
                finally:
                    _tls.host = None
                    del fn
            try:
                ext.pybridge_DagEndHost(h, vid, failure)
            except RuntimeError as e:
                logger.error("ucxx_go: ExecutionContext could not end host vertex %d: %s", vid, translate(e))


class _InUse:
    """What the vertices added since the last synchronize use (root arrays, endpoints,
    remote regions), by id: referenced by the context, and by its finalizer until a
    context dropped without close() has closed. Nothing here refers to the context."""

    __slots__ = ("objects",)

    def __init__(self):
        self.objects = {}


def _close_handle(handle, lane, in_use):
    """The backstop of an ExecutionContext dropped without close(): closed on a thread
    of its own (DagClose waits for running vertices, maybe this very thread's), which
    lets go of what the vertices use once DagClose has returned."""

    def close():
        lane.closed = True
        try:
            ext.pybridge_DagClose(handle)
        except RuntimeError:
            pass
        in_use.objects = {}

    threading.Thread(target=close, name=f"ucxx_go-dagclose-{handle}", daemon=True).start()


def _forget_array(handle, aid):
    """The finalizer of a described array's root: Go drops its description. The
    function is looked up at the call, so that in a child forked after the context was
    made the access raises UCXForkError instead of calling into Go."""
    try:
        ext.pybridge_DagForgetArray(handle, aid)
    except (UCXForkError, RuntimeError):
        pass


# -- vertices -------------------------------------------------------------------------


class Vertex:
    """One operation of an ExecutionContext, returned at once by the call that added
    it. ``wait()`` or ``await`` it for its end; ``times()`` for its timings."""

    __slots__ = ("_ctx", "id", "name")

    def __init__(self, ctx, vid, name):
        self._ctx, self.id, self.name = ctx, vid, name

    def wait(self, timeout=None):
        """Block until the vertex has finished.

        Parameters
        ----------
        timeout : float, optional
            Seconds to wait at most (rounded up to a millisecond). The wait runs in
            Go: a KeyboardInterrupt is seen once it returns.

        Raises
        ------
        VertexFailedError
            The vertex failed, or an ancestor it depends on did (``root`` names it;
            ``__cause__`` is its failure, e.g. the exception a host function raised).
        TimeoutError
            ``timeout`` passed first.
        UCXCloseError
            The context is closed.
        """
        return self._ctx._wait(self.id, timeout)

    def __await__(self):
        ctx, vid = self._ctx, self.id
        given_up = threading.Event()

        def wait():
            # In slices, so that a cancelled await lets its thread go soon, not when
            # the vertex ends.
            while True:
                try:
                    return ctx._wait(vid, _AWAIT_SLICE)
                except TimeoutError:
                    if given_up.is_set():
                        return None

        fut = in_thread(wait, name="ucxx_go-dagwait")
        fut.add_done_callback(lambda f: f.cancelled() and given_up.set())
        return fut.__await__()

    def times(self):
        """(start_ns, stop_ns, gpu_ns): when the vertex was handed to its lane and when
        it ended (time.time_ns() clock), and how long its GPU work ran; 0 where unknown
        (a context made without ``timings=True``, a vertex not finished, or one the
        context no longer tracks).

        Raises
        ------
        UCXCloseError
            The context is closed.
        """
        ctx = self._ctx
        ctx._check("Vertex.times")
        return tuple(int(x) for x in ctx._go(ext.pybridge_DagVertexTimes, ctx._h, self.id).split())

    def __repr__(self):
        return f"<ucxx_go.Vertex {self.id} {self.name!r}>"


# -- arrays ---------------------------------------------------------------------------


class _Root:
    """A root array: its memory, its id in the context, and the host-access fast path's
    state (ranges safe to read, ranges safe to write, bumped by every operation). It
    does not refer to its context (its DeviceArrays do): a dropped context's finalizer
    holds it until the DAG closed, which must not keep the context alive."""

    __slots__ = ("id", "obj", "keep", "address", "nbytes", "dtype", "device", "readonly", "np", "safe_r", "safe_w",
                 "gen", "reduce_op", "__weakref__")

    def __init__(self, aid, obj, keep, address, nbytes, dtype, device, readonly, np_view):
        self.id, self.obj, self.keep = aid, obj, keep
        self.address, self.nbytes, self.dtype, self.device = address, nbytes, dtype, device
        self.readonly, self.np = readonly, np_view
        # Nothing of the DAG has used the array yet: all of it is safe.
        self.safe_r = ()
        self.safe_w = ((0, nbytes),)
        self.gen = 0
        self.reduce_op = None


def _covered(ranges, lo, hi):
    for a, b in ranges:
        if a <= lo and hi <= b:
            return True
    return False


def _with(ranges, lo, hi):
    return tuple(r for r in ranges if not (lo <= r[0] and r[1] <= hi))[-7:] + ((lo, hi),)


class DeviceArray:
    """A 1-D typed array of an ExecutionContext, in host memory (``device == -1``) or
    on a GPU: made by ``ExecutionContext.array`` or ``wrap``.

    A slice (``a[i:j]``, step 1) is a view: the same array (``id``) at a byte offset,
    made without synchronizing. Operations on views depend on each other only where
    their byte ranges overlap.

    Host access synchronizes with the DAG for the bytes it touches only: ``a[i]``
    waits for the operations that write element i; ``a[i] = v`` also for those that
    read it; ``numpy.asarray(a)`` of a host array waits as a write of the whole range
    (the result is a view, through which the caller may write) and of a device array
    as a read (the result is a host copy). ``__cuda_array_interface__`` (device arrays)
    waits as a write of the whole range, then hands out the memory itself. What the
    caller does with such a view or export after later operations were added is not
    synchronized: access the array again (or ``synchronize()``) first.
    """

    __slots__ = ("_ctx", "_root", "_off", "nbytes", "_len")

    def __init__(self, ctx, root, off, nbytes):
        self._ctx, self._root, self._off, self.nbytes = ctx, root, off, nbytes
        self._len = nbytes // root.dtype.itemsize

    # -- description --

    @property
    def dtype(self):
        """The element type (numpy.dtype)."""
        return self._root.dtype

    @property
    def device(self):
        """The CUDA device ordinal of the memory, or -1 for host memory."""
        return self._root.device

    @property
    def id(self):
        """The array's id in its context, shared by every slice of it."""
        return self._root.id

    @property
    def offset(self):
        """The byte offset of this view in its root array."""
        return self._off

    @property
    def address(self):
        """The address of the first byte of this view."""
        return self._root.address + self._off

    @property
    def shape(self):
        return (self._len,)

    @property
    def size(self):
        return self._len

    def __len__(self):
        return self._len

    def __repr__(self):
        where = "host" if self._root.device < 0 else f"GPU {self._root.device}"
        return (f"<ucxx_go.DeviceArray id={self._root.id} {self._len} x {self._root.dtype} on {where}, "
                f"bytes [{self._off}:{self._off + self.nbytes})>")

    # -- host access --

    def _sync(self, lo, hi, write):
        """Make bytes [lo, hi) of the root safe for the host to read (or write)."""
        root = self._root
        if _covered(root.safe_w, lo, hi) or (not write and _covered(root.safe_r, lo, hi)):
            return
        ctx = self._ctx
        if getattr(_tls, "host", None) is ctx._lane:
            return  # inside one of this context's host functions: its accesses were declared
        gen = root.gen
        ctx._host_access(root.id, lo, hi - lo, _RW if write else _READ)
        if root.gen == gen:  # no operation was added meanwhile
            if write:
                root.safe_w = _with(root.safe_w, lo, hi)
            else:
                root.safe_r = _with(root.safe_r, lo, hi)

    def _index(self, i):
        i = operator.index(i)
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError(f"index {i} out of range for a DeviceArray of {self._len} elements")
        return i

    def _slice(self, s):
        start, stop, step = s.indices(self._len)
        if step != 1:
            raise ValueError("DeviceArray slices are contiguous byte ranges: step must be 1")
        stop = max(stop, start)
        size = self._root.dtype.itemsize
        return DeviceArray(self._ctx, self._root, self._off + start * size, (stop - start) * size)

    def __getitem__(self, key):
        if isinstance(key, slice):
            return self._slice(key)
        i = self._index(key)
        root = self._root
        size = root.dtype.itemsize
        lo = self._off + i * size
        self._sync(lo, lo + size, False)
        if root.device < 0:
            return root.np[lo // size]
        out = numpy.empty(1, root.dtype)
        self._ctx._go(ext.pybridge_CopyCUDAToHost, root.device, out.ctypes.data, root.address + lo, size)
        return out[0]

    def __setitem__(self, key, value):
        view = self._slice(key) if isinstance(key, slice) else self[self._index(key):self._index(key) + 1]
        root = self._root
        if root.readonly:
            raise TypeError("the array's memory is read-only")
        if view.nbytes == 0:
            return
        lo, hi = view._off, view._off + view.nbytes
        size = root.dtype.itemsize
        if root.device < 0:
            self._sync(lo, hi, True)
            root.np[lo // size:hi // size] = value
            return
        # Device memory: a copy from host memory, ordered by the DAG itself.
        src = numpy.empty(view._len, root.dtype)
        src[:] = value
        ctx = self._ctx
        staged = ctx.wrap(src)
        ctx.copy(view, staged).wait()

    def __array__(self, dtype=None, copy=None):
        root = self._root
        lo, hi = self._off, self._off + self.nbytes
        if root.device < 0:
            self._sync(lo, hi, True)
            size = root.dtype.itemsize
            out = root.np[lo // size:hi // size]
            if copy:
                out = out.copy()
        else:
            if copy is False:
                raise ValueError("a DeviceArray in GPU memory cannot be exported to numpy without a copy")
            out = self.copy_to_host()
        if dtype is not None and numpy.dtype(dtype) != out.dtype:
            if copy is False:
                raise ValueError(f"cannot convert {out.dtype} to {dtype} without a copy")
            out = out.astype(dtype)
        return out

    def copy_to_host(self):
        """A new numpy array holding this view's elements, once the operations that
        write them have finished."""
        root = self._root
        lo, hi = self._off, self._off + self.nbytes
        self._sync(lo, hi, False)
        size = root.dtype.itemsize
        if root.device < 0:
            return root.np[lo // size:hi // size].copy()
        out = numpy.empty(self._len, root.dtype)
        if self.nbytes:
            self._ctx._go(ext.pybridge_CopyCUDAToHost, root.device, out.ctypes.data, root.address + lo, self.nbytes)
        return out

    @property
    def __cuda_array_interface__(self):
        """The device memory of this view (version 3, no stream: ready), once the
        operations that read or write it have finished. Only for device arrays."""
        root = self._root
        if root.device < 0:
            raise AttributeError("a host DeviceArray has no __cuda_array_interface__ (use numpy.asarray)")
        self._sync(self._off, self._off + self.nbytes, True)
        return {"shape": (self._len,), "typestr": root.dtype.str, "data": (root.address + self._off if self.nbytes else 0,
                                                                         root.readonly),
                "strides": None, "version": 3, "stream": None}


def _array_of(ctx, a, what):
    if not isinstance(a, DeviceArray):
        raise TypeError(f"{what} must be a DeviceArray of this ExecutionContext (see ExecutionContext.wrap), "
                        f"not {type(a).__name__}")
    if a._ctx is not ctx:
        raise TypeError(f"{what} belongs to another ExecutionContext")
    return a


# -- kernels --------------------------------------------------------------------------


def pack_arguments(ctx, params, args, name="kernel"):
    """Check a kernel call's arguments against its parameters and pack them: a list of
    8-byte argument slots (ints), a list of access descriptor words, and the root
    arrays used. Nothing is scheduled.

    Raises
    ------
    TypeError
        A wrong count, an array where a scalar belongs or the reverse, a scalar out of
        its type's range, an array of another context, or a host array.
    """
    if len(args) != len(params):
        raise TypeError(f"kernel {name!r} takes {len(params)} arguments, got {len(args)}")
    slots = []
    words = []
    roots = []
    for i, (p, a) in enumerate(zip(params, args)):
        if p.pointer:
            if not isinstance(a, DeviceArray):
                raise TypeError(f"kernel {name!r} argument {p.name or i}: a pointer parameter takes a DeviceArray "
                                f"(ExecutionContext.array or wrap), not {type(a).__name__}")
            root = a._root
            if a._ctx is not ctx:
                raise TypeError(f"kernel {name!r} argument {p.name or i}: the array belongs to another ExecutionContext")
            if root.device < 0:
                raise TypeError(f"kernel {name!r} argument {p.name or i}: a host array cannot be passed to a GPU kernel "
                                "(allocate it with device= a GPU, or copy it there first)")
            if p.access == _kernels.READ:
                mode = _READ
            elif root.readonly:
                raise TypeError(f"kernel {name!r} argument {p.name or i}: the array is read-only, the parameter is written")
            else:
                mode = _RW
            off = a._off
            slots.append(root.address + off)
            words += (root.id, off, a.nbytes, mode)
            roots.append(root)
        else:
            if isinstance(a, DeviceArray):
                raise TypeError(f"kernel {name!r} argument {p.name or i}: a scalar parameter ({p.fmt!r}) got a DeviceArray")
            slots.append(p.slot(a, i))
    return slots, words, roots


class Kernel:
    """A GPU kernel loaded in an ExecutionContext (``build_kernel``, ``bind_kernel``).
    ``kernel(grid, block)`` configures a launch; calling that with the arguments adds
    the launch to the DAG::

        v = kernel(blocks, threads)(y, x, n)
    """

    __slots__ = ("_ctx", "_handle", "name", "params", "signature")

    def __init__(self, ctx, handle, name, signature):
        self._ctx, self._handle, self.name, self.signature = ctx, handle, name, signature
        self.params = _kernels.parse_signature(signature)
        if len(self.params) > C.MAX_KERNEL_ARGS:
            raise ValueError(f"kernel {name!r}: {len(self.params)} parameters, at most {C.MAX_KERNEL_ARGS}")

    def __call__(self, grid, block, shared_mem=0):
        """A launch configuration: ``grid`` blocks of ``block`` threads (an int or up to
        3 ints each) with ``shared_mem`` bytes of dynamic shared memory."""
        shared = operator.index(shared_mem)
        if not 0 <= shared <= 0xFFFFFFFF:
            raise ValueError(f"shared_mem must be a non-negative byte count, got {shared_mem!r}")
        return ConfiguredKernel(self, _dim3(grid, "grid"), _dim3(block, "block"), shared)

    def launch(self, grid, block, *args, shared_mem=0):
        """``self(grid, block, shared_mem)(*args)``."""
        return self(grid, block, shared_mem)(*args)

    def __repr__(self):
        return f"<ucxx_go.Kernel {self.name!r} ({self.signature})>"


class ConfiguredKernel:
    """A kernel with its grid, block and shared memory: call it with the arguments."""

    __slots__ = ("kernel", "grid", "block", "shared_mem")

    def __init__(self, kernel, grid, block, shared_mem):
        self.kernel, self.grid, self.block, self.shared_mem = kernel, grid, block, shared_mem

    def __call__(self, *args):
        """Add the launch to the DAG and return its Vertex at once. Pointer arguments
        are DeviceArrays (or slices) of the kernel's context: a ``const pointer`` (or
        NIDL ``in``) is read, any other pointer read and written, over the argument's
        whole byte range.

        Raises
        ------
        TypeError
            The arguments do not match the signature (nothing is scheduled).
        UCXCloseError
            The context is closed.
        """
        k = self.kernel
        ctx = k._ctx
        ctx._check("kernel launch")
        slots, words, roots = pack_arguments(ctx, k.params, args, k.name)
        packed = array.array("Q", slots)  # the argument slots, then the access descriptors
        packed.extend(words)
        at = packed.buffer_info()[0]
        n = len(slots)
        (gx, gy, gz), (bx, by, bz) = self.grid, self.block
        vid = ctx._go(ext.pybridge_DagLaunch, ctx._h, k._handle, gx, gy, gz, bx, by, bz, self.shared_mem,
                      at if n else 0, n, at + 8 * n if roots else 0, len(roots))
        ctx._used(roots, words)
        return ctx._vertex(vid, k.name)


# -- the context ----------------------------------------------------------------------


class ExecutionContext:
    """GrCUDA's execution context: a run-time DAG of kernels, copies, reductions, host
    functions and transfers, ordered per byte range and run as concurrently as the
    dependencies allow. Each operation returns a ``Vertex`` at once.

    Parameters
    ----------
    policy : {"async", "sync"}
        "sync" makes every vertex also wait for the one added before it (GrCUDA's
        serial execution); "async" (default) orders by data dependencies only.
    dependency : {"with-const", "no-const"}
        "with-const" (default): reads do not wait for reads; "no-const": every access
        is treated as a write.
    new_stream : {"fifo", "always-new"}
        How a vertex with no parent on a stream gets one: a free stream in FIFO order,
        or a new one.
    parent_stream : {"same-as-parent", "disjoint", "multigpu-early-disjoint", "multigpu-disjoint"}
        GrCUDA's parent-stream policies: which parent's stream, and so device, a GPU
        vertex inherits; a vertex inheriting none has its device chosen by
        ``device_policy``. "same-as-parent" and "disjoint" keep a child on its
        parent's device; "multigpu-early-disjoint" asks ``device_policy`` first, then
        inherits a parent's stream there; "multigpu-disjoint" asks it among the
        parents' devices. Default: "same-as-parent" on one GPU,
        "multigpu-early-disjoint" on several.
    device_policy : str
        GrCUDA's device selection: "round-robin", "stream-aware",
        "min-transfer-size", "minmin-transfer-time" (default), "minmax-transfer-time".
    gpus : list of int, optional
        CUDA ordinals to run GPU work on; default [0] when the CUDA driver sees a
        device, else none (a host-only context).
    max_streams : int
        Streams per GPU at most (0: the DAG's default).
    host_workers : int
        Go workers for built-in host work, copies and reductions (0: the default).
    python_workers : int
        Python threads that run host functions (default 2), started at the first
        ``host()``.
    timings : bool
        Record vertices' start and stop times and GPU times (``Vertex.times()``).
    export_dot : bool
        Record the DAG for ``dot()``.
    transfers : bool
        Accept put, get, send and receive (default True): starts ucxx_go's engine now,
        as create_endpoint would. Close the context before ``ucxx_go.reset()``.

    Raises
    ------
    ValueError
        An unknown policy or a bad option (before anything starts).
    UCXError
        The Go core refused the options, or CUDA could not start on ``gpus``.
    """

    def __init__(self, policy="async", *, dependency="with-const", new_stream="fifo",
                 parent_stream=None, device_policy="minmin-transfer-time", gpus=None, max_streams=0,
                 host_workers=0, python_workers=2, timings=False, export_dot=False, transfers=True):
        given = {"policy": policy, "dependency": dependency, "new_stream": new_stream,
                 "parent_stream": parent_stream, "device_policy": device_policy}
        options = {}
        for key, value in given.items():
            go_key, allowed = _POLICIES[key]
            if value not in allowed and not (key == "parent_stream" and value is None):
                raise ValueError(f"ExecutionContext: {key} must be one of {allowed}, got {value!r}")
            options[go_key] = value
        if gpus is None:
            gpus = _default_gpus()
        else:
            try:
                gpus = [operator.index(g) for g in gpus]
            except TypeError:
                raise ValueError(f"ExecutionContext: gpus must be a list of CUDA ordinals, got {gpus!r}") from None
            if any(g < 0 for g in gpus) or len(set(gpus)) != len(gpus):
                raise ValueError(f"ExecutionContext: gpus must be distinct non-negative ordinals, got {gpus!r}")
        for key, value in (("max_streams", max_streams), ("host_workers", host_workers)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"ExecutionContext: {key} must be a non-negative int, got {value!r}")
        if not isinstance(python_workers, int) or isinstance(python_workers, bool) or python_workers < 1:
            raise ValueError(f"ExecutionContext: python_workers must be at least 1, got {python_workers!r}")
        if parent_stream is None:
            options["parent_stream"] = "same-as-parent" if len(gpus) <= 1 else "multigpu-early-disjoint"
        options.update(devices=gpus, max_streams=max_streams, host_workers=host_workers, timings=bool(timings),
                       dot=bool(export_dot), transfers=bool(transfers))
        self._gpus = tuple(gpus)
        self._python_workers = python_workers
        self._dot = bool(export_dot)
        self._closed = True  # until made
        self._engine = _context.get() if transfers else None
        if self._engine is not None and self._engine.engine_progress == "loop":
            # Its vertices wait for transfers on threads that the loop mode's owner
            # also blocks in (host waits, synchronize): nothing would progress them.
            raise UCXUnsupportedError("ExecutionContext(transfers=True) needs the engine's progress thread; "
                                      "ucxx_go runs with engine_progress='loop' (UCXGO_PROGRESS_MODE)")
        self._h = self._go(ext.pybridge_DagNew, json.dumps(options))
        self._lane = _HostLane(self._h)
        self._close_lock = threading.Lock()
        self._in_use = _InUse()
        self._last = 0  # the highest vertex id returned
        self._array_ids = itertools.count(1)
        self._closed = False
        self._finalizer = weakref.finalize(self, _close_handle, self._h, self._lane, self._in_use)
        self._finalizer.atexit = False

    # -- plumbing --

    def _go(self, fn, *args):
        try:
            return fn(*args)
        except RuntimeError as e:
            err = self._error(translate(e))
        raise err from err.__cause__  # a vertex's failure is chained to its root's

    def _error(self, err):
        """A VertexFailedError for a vertex's failure (err: the translated UCXError),
        chained to its root's failure; other errors as they are."""
        text = str(err)
        m = _SELF.match(text)
        if m is None:
            return err
        vertex = int(m.group(1))
        r = _ROOT.search(text)
        root = int(r.group(1)) if r else vertex
        exc = VertexFailedError(text)
        exc.vertex, exc.root, exc.status = vertex, root, err.status
        lane = getattr(self, "_lane", None)
        cause = lane.errors.get(root) if lane is not None else None
        if cause is None and r is not None:  # the root's own failure, as its status's class
            cause = type(err)("dag: " + text[r.start() + len("ancestor "):])
            cause.status = err.status
        exc.__cause__ = cause if cause is not None else err
        return exc

    def _check(self, op):
        if self._closed:
            raise UCXCloseError(f"ExecutionContext.{op}: the context is closed")

    def _vertex(self, vid, name):
        if vid > self._last:
            self._last = vid
        return Vertex(self, vid, name)

    def _used(self, roots, words):
        """After an operation was added: keep its arrays referenced, and forget the
        ranges their roots' host accesses had made safe (a read forgets the writes)."""
        in_use = self._in_use.objects
        for i, root in enumerate(roots):
            in_use[id(root)] = root
            root.gen += 1
            if words[4 * i + 3] == _READ:
                if root.safe_w:  # still safe to read
                    root.safe_r = (root.safe_r + root.safe_w)[-8:]
                    root.safe_w = ()
            else:
                root.safe_r = root.safe_w = ()

    def _wait(self, vid, timeout):
        """Block until vertex vid has finished, or for timeout seconds at most (None:
        without limit; TimeoutError after)."""
        self._check("wait")
        ms = -1
        if timeout is not None:
            if not isinstance(timeout, numbers.Real):
                raise TypeError(f"timeout must be a number of seconds, got {type(timeout).__name__}")
            t = float(timeout) * 1000
            if t != t:
                raise ValueError(f"timeout must be a number of seconds, got {timeout!r}")
            if t <= 0:
                ms = 0
            elif t <= _MAX_WAIT_MS:  # beyond: longer than anyone waits, so without limit
                ms = math.ceil(t)
        try:
            self._go(ext.pybridge_DagWait, self._h, vid, ms)
        except UCXTimedOutError as e:
            raise TimeoutError(f"vertex {vid}: not finished within {timeout} s") from e

    def _host_access(self, aid, off, n, mode):
        self._check("host access")
        d = array.array("Q", (aid, off, n, mode))
        self._go(ext.pybridge_DagAccess, self._h, d.buffer_info()[0], 1)

    def _new_root(self, obj, keep, address, nbytes, dtype, device, readonly, np_view):
        root = _Root(next(self._array_ids), obj, keep, address, nbytes, dtype, device, readonly, np_view)
        if len(self._gpus) > 1:
            # For the DAG's moves between GPUs: the array's memory, and where its
            # newest copy is (its GPU if the context runs there, else the host).
            where = device if device in self._gpus else -1
            self._go(ext.pybridge_DagDescribeArray, self._h, root.id, address, nbytes, where)
            weakref.finalize(root, _forget_array, self._h, root.id).atexit = False
        return root

    # -- state --

    @property
    def closed(self):
        """True once close() was called."""
        return self._closed

    @property
    def gpus(self):
        """The CUDA ordinals the context runs GPU work on."""
        return list(self._gpus)

    def __repr__(self):
        return f"<ucxx_go.ExecutionContext {'closed' if self._closed else 'open'} gpus={list(self._gpus)}>"

    # -- arrays --

    def array(self, n, dtype="float32", device=None):
        """A new zeroed DeviceArray of ``n`` elements of ``dtype``.

        Parameters
        ----------
        device : int, str or None
            A CUDA ordinal of the context's GPUs (or "gpu"/"cuda": its first), "cpu"
            (or "host", -1) for host memory (numpy); default: the first GPU, or host
            memory in a context without GPUs. Device memory comes from cupy; with
            several GPUs and no device named, managed memory (cupy's
            ``malloc_managed``), which the DAG prefetches to the GPU each vertex runs
            on (GrCUDA's arrays are managed too).

        Raises
        ------
        ValueError
            A negative size, or a device the context does not run on.
        TypeError
            Not a fixed-size numeric dtype.
        RuntimeError
            Device memory without cupy.
        """
        self._check("array")
        n = operator.index(n)
        if n < 0:
            raise ValueError(f"ExecutionContext.array: negative size {n}")
        dt = numpy.dtype(dtype)
        if dt.kind not in "biufc":
            raise TypeError(f"ExecutionContext.array: {dt} is not a numeric element type")
        ordinal = self._device(device)
        if ordinal < 0:
            return self.wrap(numpy.zeros(n, dt))
        cupy = _cupy("ExecutionContext.array on a GPU")
        with cupy.cuda.Device(ordinal):
            if len(self._gpus) > 1 and device is None:
                # Several GPUs: managed memory, as GrCUDA's arrays, which the DAG
                # prefetches to whichever GPU a vertex runs on.
                obj = cupy.ndarray(n, dt, cupy.cuda.malloc_managed(max(n * dt.itemsize, 1)))
                obj.fill(0)
            else:
                obj = cupy.zeros(n, dt)
            cupy.cuda.get_current_stream().synchronize()  # the DAG's streams do not wait for cupy's
        return self.wrap(obj)

    def _device(self, device):
        if device is None:
            return self._gpus[0] if self._gpus else -1
        if isinstance(device, str):
            if device in _HOST_NAMES:
                return -1
            if device in _GPU_NAMES:
                if not self._gpus:
                    raise ValueError("ExecutionContext.array: the context has no GPU (gpus=[])")
                return self._gpus[0]
            raise ValueError(f"ExecutionContext.array: device must be an ordinal, 'cpu' or 'gpu', got {device!r}")
        d = operator.index(device)
        if d < 0:
            return -1
        if d not in self._gpus:
            raise ValueError(f"ExecutionContext.array: GPU {d} is not one of the context's {list(self._gpus)}")
        return d

    def wrap(self, obj, dtype=None):
        """A DeviceArray over ``obj``'s memory, without a copy: any contiguous object
        with the buffer protocol (host) or ``__cuda_array_interface__`` (device).
        Multi-dimensional arrays are seen flat. Wrapping the same memory twice makes two
        arrays that the DAG does not order against each other.

        Parameters
        ----------
        dtype : optional
            The element type to see the memory as (default: the object's, or uint8 for
            untyped buffers).

        Raises
        ------
        TypeError, ValueError
            Not a contiguous buffer, or its size is not a multiple of ``dtype``'s.
        """
        self._check("wrap")
        addr, n, keep, mem, stream = buffer_info(obj, writable=False)
        if mem == C.UCS_MEMORY_TYPE_HOST:
            if not isinstance(obj, numpy.ndarray):
                try:
                    obj_view = numpy.asarray(memoryview(obj))  # zero copy, the buffer's own type
                except (TypeError, ValueError):  # a format numpy does not read: as bytes
                    obj_view = numpy.frombuffer(memoryview(obj).cast("B"), numpy.uint8)
            else:
                obj_view = obj
            readonly = not obj_view.flags.writeable  # the object's own flag, as numpy reads it
            np_view = obj_view.reshape(-1, order="A")  # memory order: a view of a C- or F-contiguous array
            if dtype is not None:
                dt = numpy.dtype(dtype)
                if n % dt.itemsize:
                    raise ValueError(f"ExecutionContext.wrap: {n} bytes are not a whole number of {dt}")
                np_view = np_view.view(numpy.uint8).view(dt) if n else numpy.empty(0, dt)
            root = self._new_root(obj, keep, addr, n, np_view.dtype, -1, readonly, np_view)
        else:
            cai = obj.__cuda_array_interface__
            dt = numpy.dtype(dtype if dtype is not None else cai["typestr"])
            if n % dt.itemsize:
                raise ValueError(f"ExecutionContext.wrap: {n} bytes are not a whole number of {dt}")
            if stream:
                try:
                    import cupy  # noqa: PLC0415

                    cupy.cuda.ExternalStream(stream).synchronize()  # its pending writes
                except ImportError:
                    pass
            root = self._new_root(obj, keep, addr, n, dt, _cuda_device(obj, addr, self._gpus),
                                  bool(cai["data"][1]), None)
        return DeviceArray(self, root, 0, n)

    # -- kernels --

    def build_kernel(self, source, name, signature, options=()):
        """Compile CUDA C ``source`` with NVRTC and load kernel ``name`` on the
        context's GPUs (a C++ kernel's mangled name is found; a template kernel is named
        with its arguments, e.g. "axpy<float>").

        Parameters
        ----------
        signature : str
            GrCUDA's: ``"pointer, const pointer, sint32"`` or
            ``"y: out pointer float, x: in pointer float, n: sint32"``.
        options : sequence of str
            NVRTC options, e.g. ``("-arch=compute_90",)``.

        Raises
        ------
        ValueError
            A malformed signature.
        RuntimeError
            NVRTC is missing or the source does not compile (with its log).
        UCXError
            The driver refused the PTX; the context has no GPU.
        """
        self._check("build_kernel")
        _kernels.parse_signature(signature)
        ptx, lowered = _kernels.compile_kernel(source, name, tuple(options))
        return self._load(ptx, lowered, name, signature)

    def bind_kernel(self, code, name, signature):
        """Load kernel ``name`` (its extern "C" or mangled name) from PTX or a cubin:
        bytes, PTX text, or the path of a file.

        Raises
        ------
        ValueError
            A malformed signature.
        UCXError
            The driver refused the image or has no such kernel; the context has no GPU.
        """
        self._check("bind_kernel")
        _kernels.parse_signature(signature)
        if isinstance(code, (str, os.PathLike)) and os.path.exists(code):
            with open(code, "rb") as f:
                image = f.read()
        elif isinstance(code, str):
            if ".entry" not in code and ".version" not in code:
                raise ValueError(f"ExecutionContext.bind_kernel: {code[:80]!r} is neither a file nor PTX")
            image = code.encode()
        else:
            image = bytes(memoryview(code).cast("B"))
        return self._load(image, name, name, signature)

    def _load(self, image, symbol, name, signature):
        if not self._gpus:
            raise UCXError("ExecutionContext: kernels need a context with GPUs (gpus=[...])")
        buf = ctypes.create_string_buffer(image, len(image))
        m = self._go(ext.pybridge_DagLoadModule, self._h, ctypes.addressof(buf), len(image))
        k = self._go(ext.pybridge_DagKernelOf, self._h, m, symbol)
        return Kernel(self, k, name, signature)

    # -- operations --

    def copy(self, dst, src):
        """Copy ``src``'s bytes into ``dst`` (DeviceArrays or slices of this context,
        of equal byte sizes; host or device memory, on a GPU stream when either is
        device memory). Reads ``src``'s range, writes ``dst``'s.

        Raises
        ------
        TypeError
            Not arrays of this context, or ``dst`` is read-only.
        ValueError
            The sizes differ, or the ranges overlap in one array.
        """
        self._check("copy")
        _array_of(self, dst, "dst")
        _array_of(self, src, "src")
        if dst.nbytes != src.nbytes:
            raise ValueError(f"ExecutionContext.copy: {src.nbytes} bytes into {dst.nbytes}")
        droot, sroot = dst._root, src._root
        if droot.readonly:
            raise TypeError("ExecutionContext.copy: dst is read-only")
        if droot is sroot and dst._off < src._off + src.nbytes and src._off < dst._off + dst.nbytes:
            raise ValueError("ExecutionContext.copy: dst and src overlap")
        gpu = droot.device >= 0 or sroot.device >= 0
        if gpu and not self._gpus:
            raise ValueError("ExecutionContext.copy: device memory needs a context with GPUs")
        words = [sroot.id, src._off, src.nbytes, _READ, droot.id, dst._off, dst.nbytes, _WRITE]
        d = array.array("Q", words)
        vid = self._go(ext.pybridge_DagCopy, self._h, droot.address + dst._off, sroot.address + src._off,
                       dst.nbytes, gpu, d.buffer_info()[0], 2)
        self._used((sroot, droot), words)
        return self._vertex(vid, "copy")

    def reduce_into(self, dst, src, op="sum"):
        """Combine ``src`` into ``dst`` elementwise with ``op`` ("sum", "prod", "min",
        "max"): host arrays of one dtype (int8 to uint64, float32, float64) and length.
        Reductions with the same op into overlapping ranges run in any order, even
        concurrently; any read or write of ``dst`` waits for all of them.

        Raises
        ------
        TypeError
            Device memory, differing or unsupported dtypes, a read-only ``dst``.
        ValueError
            An unknown op, differing lengths, or overlapping ranges of one array.
        """
        self._check("reduce_into")
        _array_of(self, dst, "dst")
        _array_of(self, src, "src")
        code = _OPS.get(op)
        if code is None:
            raise ValueError(f"ExecutionContext.reduce_into: op must be one of {tuple(_OPS)}, got {op!r}")
        droot, sroot = dst._root, src._root
        if droot.device >= 0 or sroot.device >= 0:
            raise TypeError("ExecutionContext.reduce_into: host arrays only")
        if droot.dtype != sroot.dtype or droot.dtype not in _DTYPES:
            raise TypeError(f"ExecutionContext.reduce_into: dtypes {droot.dtype} and {sroot.dtype}; both must be one "
                            "of int8..int64, uint8..uint64, float32, float64")
        if len(dst) != len(src):
            raise ValueError(f"ExecutionContext.reduce_into: {len(src)} elements into {len(dst)}")
        if droot.readonly:
            raise TypeError("ExecutionContext.reduce_into: dst is read-only")
        if droot is sroot and dst._off < src._off + src.nbytes and src._off < dst._off + dst.nbytes:
            raise ValueError("ExecutionContext.reduce_into: dst and src overlap")
        # The DAG lets reductions into a range run in any order: right for one op, not
        # across ops (a max and a sum do not commute). A reduction whose op differs from
        # the array's last one is therefore a read-write: it follows all earlier ones,
        # and later ones follow it.
        mode = _REDUCE if droot.reduce_op in (None, op) else _RW
        droot.reduce_op = op
        words = [sroot.id, src._off, src.nbytes, _READ, droot.id, dst._off, dst.nbytes, mode]
        d = array.array("Q", words)
        vid = self._go(ext.pybridge_DagReduce, self._h, droot.id, droot.address + dst._off,
                       sroot.address + src._off, len(dst), _DTYPES[droot.dtype], code, d.buffer_info()[0], 2)
        self._used((sroot, droot), words)
        return self._vertex(vid, "reduce")

    def host(self, fn, reads=(), writes=()):
        """Run ``fn()`` on one of the context's Python threads once the operations it
        depends on through ``reads`` and ``writes`` (DeviceArrays or slices) have
        finished; ``writes`` are read and written. Inside ``fn``, the context's arrays
        are accessed without synchronization (``numpy.asarray(a)``, ``a[i]``): touch
        only what was declared. If ``fn`` raises, its vertex fails with that exception
        as the cause, and so do the vertices that depend on it.

        Raises
        ------
        TypeError
            ``fn`` is not callable, or an array is not this context's (or read-only
            in ``writes``).
        """
        self._check("host")
        if not callable(fn):
            raise TypeError(f"ExecutionContext.host: fn must be callable, not {type(fn).__name__}")
        words = []
        roots = []
        for arrays, mode in ((reads, _READ), (writes, _RW)):
            for a in arrays:
                _array_of(self, a, "an array of reads/writes")
                if mode != _READ and a._root.readonly:
                    raise TypeError("ExecutionContext.host: a read-only array in writes")
                words += (a._root.id, a._off, a.nbytes, mode)
                roots.append(a._root)
        d = array.array("Q", words)
        lane = self._lane
        if not lane.threads:
            with self._close_lock:
                if not lane.threads and not self._closed:
                    lane.start(self._python_workers)
        with lane.lock:
            vid = self._go(ext.pybridge_DagHost, self._h, d.buffer_info()[0] if words else 0, len(roots))
            lane.fns[vid] = fn
        self._used(roots, words)
        return self._vertex(vid, getattr(fn, "__name__", "host"))

    # -- transfers --

    def _transfer_check(self, op, ep):
        self._check(op)
        if self._engine is None:
            raise UCXError(f"ExecutionContext.{op}: the context was made with transfers=False")
        if self._engine.closed:
            raise UCXCloseError(f"ExecutionContext.{op}: ucxx_go was reset since the context was made")
        if getattr(ep, "_ctx", None) is not self._engine:
            raise ValueError(f"ExecutionContext.{op}: the endpoint is not of ucxx_go's running context")

    def _one_sided(self, op, ep, local, remote, offset):
        self._transfer_check(op, ep)
        ep._check(op)
        _array_of(self, local, "the local array")
        if not isinstance(remote, RemoteRegion):
            raise TypeError(f"ExecutionContext.{op}: remote must be a RemoteRegion, not {type(remote).__name__}")
        if remote._ep is not ep:
            raise ValueError(f"ExecutionContext.{op}: the remote region belongs to another endpoint")
        offset = operator.index(offset)
        n = local.nbytes
        if offset < 0 or n == 0 or offset + n > remote.nbytes:
            raise ValueError(f"ExecutionContext.{op}: {n} bytes at offset {offset} do not fit the remote region "
                             f"of {remote.nbytes} bytes")
        root = local._root
        mode = _READ if op == "put" else _WRITE
        if mode == _WRITE and root.readonly:
            raise TypeError(f"ExecutionContext.{op}: the local array is read-only")
        words = [root.id, local._off, n, mode]
        d = array.array("Q", words)
        fn = ext.pybridge_DagPut if op == "put" else ext.pybridge_DagGet
        mem = C.MEM_CUDA if root.device >= 0 else C.MEM_HOST
        vid = self._go(fn, self._h, ep._handle, remote._id, offset, root.address + local._off, n, mem,
                       d.buffer_info()[0], 1)
        self._used((root,), words)
        in_use = self._in_use.objects
        in_use[id(ep)] = ep
        in_use[id(remote)] = remote
        return self._vertex(vid, op)

    def put(self, ep, local, remote, offset=0):
        """Write ``local`` (a DeviceArray or slice) into the peer's ``remote`` region
        (``ep.unpack_remote``) at ``offset``, once the operations writing ``local`` have
        finished. The vertex ends when ``local`` may be reused; ``await ep.flush()``
        after it says when the data is at the peer.

        Raises
        ------
        TypeError, ValueError
            Not an array of this context, a remote region of another endpoint, or
            bytes that do not fit it.
        UCXCloseError
            The context or endpoint is closed, or ucxx_go was reset.
        """
        return self._one_sided("put", ep, local, remote, offset)

    def get(self, ep, local, remote, offset=0):
        """Read the peer's ``remote`` region at ``offset`` into ``local``, as many bytes
        as it holds; as ``put``."""
        return self._one_sided("get", ep, local, remote, offset)

    def _tagged(self, op, ep, buf, tag, force_tag):
        self._transfer_check(op, ep)
        _array_of(self, buf, "the array")
        root = buf._root
        mem = C.UCS_MEMORY_TYPE_CUDA if root.device >= 0 else C.UCS_MEMORY_TYPE_HOST
        addr = root.address + buf._off
        if op == "send":
            ep._check("send")
            t = ep._send_tag if tag is None else _tags.mix(ep._send_tag, tag, force_tag)
            words = [root.id, buf._off, buf.nbytes, _READ]
            d = array.array("Q", words)
            vid = self._go(ext.pybridge_DagSend, self._h, ep._handle, addr, buf.nbytes, t, mem, d.buffer_info()[0], 1)
        else:
            if ep._closed:
                raise UCXCloseError("ExecutionContext.recv: the endpoint is closed")
            if root.readonly:
                raise TypeError("ExecutionContext.recv: the array is read-only")
            t = ep._recv_tag if tag is None else _tags.mix(ep._recv_tag, tag, force_tag)
            words = [root.id, buf._off, buf.nbytes, _WRITE]
            d = array.array("Q", words)
            vid = self._go(ext.pybridge_DagRecv, self._h, ep._handle, addr, buf.nbytes, t, _tags.MASK64, mem,
                           d.buffer_info()[0], 1)
        self._used((root,), words)
        self._in_use.objects[id(ep)] = ep
        return self._vertex(vid, op)

    def send(self, ep, array, tag=None, force_tag=False):
        """Send ``array``'s bytes to ``ep``'s peer with ``tag`` (as ``Endpoint.send``:
        the peer's ``ep.recv`` or ``ctx.recv`` with the same tag matches), once the
        operations writing them have finished.

        Raises
        ------
        UCXCloseError
            The context or endpoint is closed, or ucxx_go was reset.
        """
        return self._tagged("send", ep, array, tag, force_tag)

    def recv(self, ep, array, tag=None, force_tag=False):
        """Receive the next message with ``tag`` from ``ep``'s peer into ``array`` (as
        ``Endpoint.recv``), once the operations using its bytes have finished; what
        depends on the bytes waits for the message (a GPU kernel on the device). A
        message that an ``Endpoint.recv`` cancelled earlier kept is not seen here.

        Raises
        ------
        UCXCloseError
            The context or endpoint is closed, or ucxx_go was reset.
        """
        return self._tagged("recv", ep, array, tag, force_tag)

    # -- waiting --

    def synchronize_sync(self):
        """Block until every vertex added so far has finished, then drop the context's
        references to what they used. Failures are not raised here: waiting for a
        vertex, or a host access after it, reports them.

        Raises
        ------
        UCXCloseError
            The context is closed.
        """
        self._check("synchronize")
        in_use = self._in_use
        kept, in_use.objects = in_use.objects, {}
        last = self._last
        try:
            self._go(ext.pybridge_DagSynchronize, self._h)
        except BaseException:
            kept.update(in_use.objects)
            in_use.objects = kept
            raise
        lane = self._lane
        if lane.fns:  # functions of vertices that never ran (an ancestor failed)
            with lane.lock:
                for vid in [v for v in lane.fns if v <= last]:
                    del lane.fns[vid]

    async def synchronize(self):
        """``synchronize_sync()`` without blocking the event loop."""
        await in_thread(self.synchronize_sync, name="ucxx_go-dagwait")

    # -- introspection --

    def resources(self):
        """What the context holds: {"streams", "events", "modules", "word_pages"}
        (CUDA streams and events, loaded modules, pages of transfers' done words).
        After close() all are 0: close releases every one or raises."""
        if self._closed:
            return {"streams": 0, "events": 0, "modules": 0, "word_pages": 0}
        s, e, m, w = (int(x) for x in self._go(ext.pybridge_DagResources, self._h).split())
        return {"streams": s, "events": e, "modules": m, "word_pages": w}

    def dot(self):
        """The DAG as Graphviz DOT (a context made with ``export_dot=True``)."""
        self._check("dot")
        if not self._dot:
            raise ValueError("ExecutionContext.dot: make the context with export_dot=True")
        return self._go(ext.pybridge_DagDOT, self._h)

    # -- closing --

    def close(self):
        """Close the context: transfers in flight are cancelled, host functions not
        started yet fail, everything else runs to its end (a host function running now
        included), then every stream, event, module and word is released. A second
        call does nothing.

        Raises
        ------
        RuntimeError
            Called from one of the context's host functions.
        UCXError
            The Go core could not release something.
        """
        lane = getattr(self, "_lane", None)
        if lane is None:
            return  # the constructor failed
        if getattr(_tls, "host", None) is lane:
            raise RuntimeError("ExecutionContext.close: called from one of its own host functions")
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._finalizer.detach()
        lane.closed = True  # the workers return once DagTakeHost fails or times out
        try:
            self._go(ext.pybridge_DagClose, self._h)
        finally:
            deadline = time.monotonic() + _JOIN_TIMEOUT
            for t in lane.threads:
                t.join(max(0.0, deadline - time.monotonic()))
            with lane.lock:
                lane.fns.clear()
                lane.errors.clear()
            self._in_use.objects = {}

    async def aclose(self):
        """``close()`` without blocking the event loop; it finishes even if the caller
        is cancelled."""
        fut = in_thread(self.close, name="ucxx_go-dagwait")
        await asyncio.shield(fut)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.aclose()


def _cuda_device(obj, addr, gpus):
    """The CUDA ordinal of a CUDA array's memory."""
    dev = getattr(obj, "device", None)
    for attr in ("id", "index"):  # cupy, torch
        v = getattr(dev, attr, None)
        if isinstance(v, int):
            return v
    try:
        import cupy  # noqa: PLC0415

        return int(cupy.cuda.runtime.pointerGetAttributes(addr).device)
    except Exception:  # noqa: BLE001 (no cupy, or not a pointer it knows)
        return gpus[0] if gpus else 0
