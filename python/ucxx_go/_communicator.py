"""Communicator: this process's rank among N processes, for collectives.

    comm = await ucxx_go.Communicator.init()   # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    await comm.barrier()
    comm.close()

Rank 0 listens at MASTER_ADDR:MASTER_PORT; the others connect, send their worker
addresses and get everyone's; every rank then reaches every other through an
endpoint made from a worker address, on an engine of the communicator's own (its
traffic never mixes with the application's endpoints). ``python -m ucxx_go.launch
-n N script.py`` sets the variables, as torchrun does.

Collectives (allreduce, allgather, reduce_scatter, broadcast, reduce, alltoall) and
``execute(plan, ...)`` run MSCCL++ execution plans with the Go executor
(core/executor): one crossing into Go per call, no Python per op.

Stream-ordered calls (GPU buffers, ``stream_ordered=True``), as NCCL's: the call is
queued on the buffers' stream (CuPy's current stream, or the one
``__cuda_array_interface__`` names) after the work it holds, work queued there later
runs after the call, and the await returns once the call is queued, not once it is
done. Keep the buffers alive (or used only on that stream) until the stream has
passed the call. A failure on the device (a rank died, the timeout passed) comes back
from ``await comm.synchronize()`` or the communicator's next call, after which its
calls fail; no stream stays blocked. Buffers without a stream or on the per-thread
default stream, and host buffers, run as an ordinary call (done when the await
returns).
"""

import asyncio
import ctypes
import itertools
import json
import os

from ._blocking import in_thread
from ._buffers import buffer_info
from ._bridge import call, ext, translate
from . import _constants as C
from ._collective_args import dtype_code, op_code
from .exceptions import UCXCloseError

# How long (µs) a collective call may run inside its one crossing into Go before the
# event loop gets control back and the rest is waited for on a thread of its own: short
# collectives finish within it and cost no thread hop.
SPIN_US = 200

__all__ = ["Communicator"]


# Element sizes by the Go core's type codes.
_ITEM_BYTES = {
    C.DTYPE_INT8: 1, C.DTYPE_UINT8: 1, C.DTYPE_INT16: 2, C.DTYPE_UINT16: 2, C.DTYPE_FLOAT16: 2, C.DTYPE_BFLOAT16: 2,
    C.DTYPE_INT32: 4, C.DTYPE_UINT32: 4, C.DTYPE_FLOAT32: 4, C.DTYPE_INT64: 8, C.DTYPE_UINT64: 8, C.DTYPE_FLOAT64: 8,
}


def _view_like(x, rank, size):
    """Rank's block of x, as x's own type where it can slice (numpy, CuPy), else
    bytes."""
    try:
        n = len(x) // size
        return x[rank * n:(rank + 1) * n]
    except TypeError:
        mv = memoryview(x).cast("B")
        m = mv.nbytes // size
        return mv[rank * m:(rank + 1) * m]


def _env_int(name):
    value = os.environ.get(name)
    if value is None:
        raise ValueError(f"Communicator.init: {name} is not set (give rank=, size=, root=, or run under "
                         "python -m ucxx_go.launch or torchrun)")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"Communicator.init: {name}={value!r} is not an integer") from None


def _rest(ticket, keep):
    """The rest of a call that outlived its crossing: a future of its CommWait, started
    now on a thread of its own. Cancelling the future (or the task awaiting it) stops
    neither the call nor the wait, and keep (the buffers' keep-alives) stays referenced
    until CommWait has returned: a cancelled await must not free a buffer the other
    ranks still write into."""
    return in_thread(_wait, ticket, keep, name="ucxx_go-commwait")


def _wait(ticket, keep):
    """CommWait; keep (the buffers' keep-alives), an argument, lives as long as the call."""
    return call(ext.pybridge_CommWait, ticket)


_init_tokens = itertools.count(1)  # names each init's CommNew for CommCancelNew


def _close_handle(h):
    """Close communicator h, which CommNew formed for a caller that is gone."""
    call(ext.pybridge_CommClose, h)


def _close_split(res):
    """Close the communicator in CommSplit's answer res ("handle rank size"; handle 0:
    none), formed for a caller that is gone."""
    h = int(res.split()[0])
    if h:
        _close_handle(h)


class Communicator:
    """A communicator of ``size`` ranks; make one with ``await Communicator.init()``."""

    __slots__ = ("_h", "rank", "size", "__weakref__")

    def __init__(self, handle, rank, size):
        self._h, self.rank, self.size = handle, rank, size

    @classmethod
    async def init(cls, rank=None, size=None, root=None, timeout=60.0, secret=None):
        """Form the communicator with the other ranks.

        Parameters
        ----------
        rank, size : int, optional
            This process's rank and the number of ranks; default RANK and WORLD_SIZE.
        root : str, optional
            Rank 0's listening address "host:port"; default MASTER_ADDR:MASTER_PORT.
        timeout : float
            Seconds to wait for the other ranks (and, later, for any peer). A cancelled
            await abandons the bootstrap (rank 0's port is free again at once); a
            communicator formed meanwhile is closed.
        secret : str or bytes, optional
            Shared by every rank (default UCXGO_COMM_SECRET, which ``ucxx_go.launch``
            sets to a fresh random value for its ranks): rank 0 takes a rank only with
            proof of it (an HMAC of its hello), dropping other connections without
            failing the world, and a rank takes the table of the world only with
            proof that rank 0 holds it. The secret never travels. None and unset: any
            process that reaches rank 0's port may join.

        Raises
        ------
        ValueError
            Missing or malformed arguments or environment.
        UCXError
            Bootstrap failed: a duplicate rank, ranks that disagree on the size, a
            timeout, a root that cannot listen.
        """
        rank = _env_int("RANK") if rank is None else int(rank)
        size = _env_int("WORLD_SIZE") if size is None else int(size)
        if root is None:
            addr = os.environ.get("MASTER_ADDR")
            port = _env_int("MASTER_PORT")
            if not addr:
                raise ValueError("Communicator.init: MASTER_ADDR is not set")
            root = f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"
        if not 0 <= rank < size:
            raise ValueError(f"Communicator.init: rank {rank} of {size}")
        if not 0.001 <= timeout <= 1e6:  # Go took a timeout under 1 ms for none (its default)
            raise ValueError(f"Communicator.init: timeout {timeout} s, not between 1 ms and 10**6 s")
        if secret is None:
            secret = os.environ.get("UCXGO_COMM_SECRET", "")
        # The bridge takes text: the secret's bytes (a str's UTF-8) in hex, so that "abc"
        # and b"abc" make one world on every rank.
        secret = (secret.encode() if isinstance(secret, str) else bytes(secret)).hex()
        token = next(_init_tokens)
        forming = in_thread(call, ext.pybridge_CommNew, rank, size, root, secret, int(timeout * 1000), token,
                            unclaimed=_close_handle)
        try:
            h = await forming
        except asyncio.CancelledError:
            call(ext.pybridge_CommCancelNew, token)
            raise
        return cls(h, rank, size)

    async def barrier(self):
        """Return once every rank has called ``barrier``. Ranks of one host meet in
        shared memory (a 2-rank barrier takes about 2 µs); ranks of several hosts
        exchange messages.

        Raises
        ------
        UCXError
            A rank never came (timeout) or died (its endpoint broke), naming it.
        """
        self._check()
        ticket = call(ext.pybridge_CommBarrier, self._h, SPIN_US)
        if ticket:
            await _rest(ticket, None)

    async def execute(self, plan, send, recv=None, *, dtype=None, op=None, stream_ordered=False):
        """Run an execution plan with the other ranks, which make the same call
        (MSCCL++'s ``Executor.execute``).

        Parameters
        ----------
        plan : ExecutionPlan
        send, recv : buffer
            Any object with the buffer protocol (numpy, bytearray, ...). For an
            in-place plan they follow its convention (allreduce: one buffer, `recv`
            omitted; allgather: `send` is this rank's slot of `recv`).
        dtype : str or dtype, optional
            The element type of reductions; default `send`'s own.
        op : {"sum", "prod", "min", "max"}, optional
            Every reduction's operator; default each op's own (``reduce_op``).
        stream_ordered : bool
            GPU buffers: queue the call on their stream and return once queued (see
            the module's doc).

        Raises
        ------
        PlanError
            The sizes do not divide into the plan's chunks, or the buffers do not follow
            its in-place convention.
        CollectiveMismatchError
            The ranks' calls differ (plan, sizes, type, operator).
        RankFailedError, CollectiveTimeoutError
            A rank died or did not come (its number in ``.rank``).
        CollectiveUnsupportedError
            Ranks on several hosts (not built yet), or an LL-packet plan on GPU memory.
        """
        h = self._h
        if h is None:
            raise UCXCloseError("Communicator: closed")
        if recv is None or send is recv:  # in place: one look at the buffer, writable
            s_addr, s_n, s_keep, s_mem, s_stream = r_addr, r_n, r_keep, r_mem, r_stream = buffer_info(send, True)
        else:
            s_addr, s_n, s_keep, s_mem, s_stream = buffer_info(send, False)
            r_addr, r_n, r_keep, r_mem, r_stream = buffer_info(recv, True)
        code = dtype_code(send, dtype)
        opc = 0 if op is None else op_code(op)
        try:
            ticket = ext.pybridge_CommExecute(h, plan._h, s_addr, s_n, s_mem, s_stream, r_addr, r_n, r_mem, r_stream, code,
                                              opc, bool(stream_ordered), SPIN_US)
        except RuntimeError as e:
            raise translate(e) from None
        if ticket:  # written out flat as _start: no helper calls on every small call
            await _rest(ticket, (s_keep, r_keep))

    async def allreduce(self, x, out=None, op="sum", *, stream_ordered=False):
        """Reduce `x` element-wise over all ranks into `out` (every rank gets the result);
        in place when `out` is omitted.

        `x` and `out`: numpy arrays or anything with the buffer protocol, of one of
        int8..int64, uint8..uint64, float16, bfloat16, float32, float64 (any element
        count, 0 included). Every rank passes the same count, type and `op` ("sum",
        "prod", "min", "max"). Returns `out` (or `x`). ``stream_ordered=True`` (GPU
        buffers, every collective takes it): queued on the buffers' stream, the await
        returns once queued (see the module's doc).

        Raises
        ------
        CollectiveMismatchError
            The ranks' calls differ (count, type, op, collective).
        RankFailedError, CollectiveTimeoutError
            A rank died or did not come (``.rank`` names it).
        PlanError
            `x` and `out` differ in size, or overlap other than as one buffer.
        """
        out = x if out is None else out
        pending = self._start("allreduce", x, out, op=op, ordered=stream_ordered)
        if pending is not None:
            await pending
        return out

    async def allgather(self, x, out=None, *, stream_ordered=False):
        """Gather every rank's `x` into `out`, rank r's at block r (`out` holds size ×
        `x`). In place: pass `out` alone (this rank's block already in it), or `x` as
        the rank's block of `out`. Returns `out`."""
        if out is None:
            out = x
            x = _view_like(out, self.rank, self.size)
        pending = self._start("allgather", x, out, dtype=out, ordered=stream_ordered)
        if pending is not None:
            await pending
        return out

    async def reduce_scatter(self, x, out=None, op="sum", *, stream_ordered=False):
        """Reduce `x` element-wise over all ranks and give rank r block r of the result
        in `out` (`x` holds size × `out`). In place (`out` omitted): the result lands in
        this rank's block of `x`, which is returned."""
        if out is None:
            out = _view_like(x, self.rank, self.size)
        pending = self._start("reducescatter", x, out, op=op, dtype=x, ordered=stream_ordered)
        if pending is not None:
            await pending
        return out

    async def broadcast(self, x, root=0, out=None, *, stream_ordered=False):
        """Copy the root's `x` to every rank's `x` (or `out`). Returns the buffer written."""
        out = x if out is None else out
        pending = self._start("broadcast", x, out, root=root, ordered=stream_ordered)
        if pending is not None:
            await pending
        return out

    async def reduce(self, x, out=None, root=0, op="sum", *, stream_ordered=False):
        """Reduce `x` element-wise over all ranks into the root's `out` (in place when
        `out` is omitted); the other ranks' buffers are left as they are."""
        out = x if out is None else out
        pending = self._start("reduce", x, out, root=root, op=op, ordered=stream_ordered)
        if pending is not None:
            await pending
        return out

    async def alltoall(self, x, out=None, *, stream_ordered=False):
        """Send block j of `x` to rank j, which puts it at its block r (this rank's);
        `x` and `out` hold size equal blocks. In place when `out` is omitted."""
        out = x if out is None else out
        pending = self._start("alltoall", x, out, ordered=stream_ordered)
        if pending is not None:
            await pending
        return out

    async def alltoallv(self, x, send_counts, out, recv_counts, send_displs=None, recv_displs=None, *,
                        stream_ordered=False):
        """Send `send_counts[j]` elements of `x` (from `send_displs[j]`) to rank j, and
        receive `recv_counts[j]` elements from rank j into `out` at `recv_displs[j]`
        (MPI's Alltoallv; displacements default to the counts' running sums). Counts and
        displacements are in elements; rank i's send_counts[j] must equal rank j's
        recv_counts[i] (every rank checks every pair before anything moves:
        CollectiveMismatchError otherwise). Out of place. Returns `out`.

        The sizes travel with each call: the built-in alltoallv plan's blocks are
        placeholders the executor fills from every rank's counts (an extension of
        MSCCL++'s plan format, "ucxxgo_variable_blocks"). ``stream_ordered=True``: as
        for the other collectives (GPU buffers)."""
        self._check()
        n = self.size
        s_addr, s_n, s_keep, s_mem, s_stream = buffer_info(x, writable=False)
        r_addr, r_n, r_keep, r_mem, r_stream = buffer_info(out, writable=True)
        code = dtype_code(x)
        item = _ITEM_BYTES[code]
        table = (ctypes.c_uint64 * (4 * n))()
        for k, (counts, displs) in enumerate(((send_counts, send_displs), (recv_counts, recv_displs))):
            counts = [int(c) for c in counts]
            if len(counts) != n or any(c < 0 for c in counts):
                raise ValueError(f"alltoallv: {n} non-negative counts per side, got {counts}")
            if displs is None:
                displs, at = [], 0
                for c in counts:
                    displs.append(at)
                    at += c
            displs = [int(d) for d in displs]
            if len(displs) != n or any(d < 0 for d in displs):
                raise ValueError(f"alltoallv: {n} non-negative displacements per side, got {displs}")
            for j in range(n):
                table[2 * k * n + j] = displs[j] * item
                table[(2 * k + 1) * n + j] = counts[j] * item
        pending = self._run((s_keep, r_keep, table), ext.pybridge_CommAllToAllV, self._h, s_addr, s_n, s_mem, s_stream,
                            r_addr, r_n, r_mem, r_stream, code, ctypes.addressof(table), 4 * n, bool(stream_ordered))
        if pending is not None:
            await pending
        return out

    async def synchronize(self):
        """Return once every stream-ordered call this communicator made has ended on
        the device (the host waits for the device, as ``cupy.cuda.Stream.synchronize``
        does for one stream); without such calls at once.

        Raises
        ------
        RankFailedError, CollectiveTimeoutError
            A stream-ordered call failed on the device: a rank died or the timeout
            passed (``.rank`` names the rank where known). The communicator's calls
            fail after it (CommunicatorBrokenError).
        """
        self._check()
        pending = self._run(None, ext.pybridge_CommSynchronize, self._h)
        if pending is not None:
            await pending

    async def split(self, color, key=0):
        """Form sub-communicators (MPI's Comm_split): the ranks that pass the same
        `color` form one, ranked by `key` then by rank; a negative color joins none
        (returns None). Every rank calls it. The new communicator has an engine of its
        own, and runs beside this one. A cancelled await leaves the split running in
        Go; the communicator it forms then is closed."""
        self._check()
        res = await in_thread(call, ext.pybridge_CommSplit, self._h, int(color), int(key), unclaimed=_close_split)
        h, rank, size = (int(v) for v in res.split())
        return Communicator(h, rank, size) if h else None

    def builtin_choice(self, collective, nbytes, in_place=False, device=False, item_bytes=4, root=0):
        """The built-in plan this communicator's `collective` ("allreduce",
        "allgather", "reducescatter", "broadcast", "reduce", "alltoall") takes for a
        message of `nbytes` (allgather: the output's size) of `item_bytes` elements, in
        place or not, on device memory or host, when no registered plan fits: a dict
        ``{"algorithm": "ring", "lanes": 4, "chunks": 4, "uneven": ""}`` (algorithms:
        direct, allpairs, ring, chain, tree, pairwise; with one rank "copy" or "none").
        ``uneven`` is "" when the plan covers the whole message; for an allreduce whose
        element count its chunks do not divide, "padded" (the message runs padded
        through all-pairs) or "tail" (the plan over the largest whole part, the rest
        padded). The answer is what the call runs: nothing here copies the registry's
        thresholds."""
        self._check()
        return json.loads(call(ext.pybridge_CommBuiltinChoice, self._h, str(collective), int(nbytes), bool(in_place),
                               bool(device), int(item_bytes), int(root)))

    def register_plan(self, plan):
        """Use `plan` (an ExecutionPlan) for the calls it fits: its collective, rank
        count, in-place form and message-size range (the newest registered first,
        before the built-ins). Every rank registers the same plans."""
        self._check()
        call(ext.pybridge_CommRegisterPlan, self._h, plan._h)

    def _start(self, kind, send, recv, root=0, op=None, dtype=None, ordered=False):
        """Start collective kind from the registry's plan: None when it ended in the
        crossing, else an awaitable for the rest (see _run). Not a coroutine: the
        public methods await only what outlives the crossing. Written out flat (no
        helper calls but the buffer and code lookups): it runs on every small call."""
        h = self._h
        if h is None:
            raise UCXCloseError("Communicator: closed")
        if send is recv:  # in place: one look at the buffer, writable
            s_addr, s_n, s_keep, s_mem, s_stream = r_addr, r_n, r_keep, r_mem, r_stream = buffer_info(recv, True)
        else:
            s_addr, s_n, s_keep, s_mem, s_stream = buffer_info(send, False)
            r_addr, r_n, r_keep, r_mem, r_stream = buffer_info(recv, True)
        code = dtype_code(send, dtype)
        opc = 0 if op is None else op_code(op)
        try:
            ticket = ext.pybridge_CommCollective(h, kind, root if type(root) is int else int(root), s_addr, s_n, s_mem,
                                                 s_stream, r_addr, r_n, r_mem, r_stream, code, opc, bool(ordered),
                                                 SPIN_US)
        except RuntimeError as e:
            raise translate(e) from None
        return _rest(ticket, (s_keep, r_keep)) if ticket else None

    def _run(self, keep, fn, *args):
        """One crossing into Go. None when the call ended within SPIN_US (its error
        raised here); else a future of the rest (_rest), which holds keep (the
        buffers' keep-alives) until the call ends, awaited or not. Not a coroutine: a
        coroutine frame a call is ~0.1-0.2 µs of a 3 µs small call."""
        ticket = call(fn, *args, SPIN_US)
        if ticket:
            return _rest(ticket, keep)
        return None

    def _check(self):
        if self._h is None:
            raise UCXCloseError("Communicator: closed")

    def close(self):
        """Close the communicator (its engine); a second call does nothing. After
        stream-ordered calls, ``await comm.synchronize()`` and ``await comm.barrier()``
        on every rank first: a rank's close frees its side of the calls (their scratch
        buffers) without asking whether a peer's GPU still reads it. A call still in
        flight (a task awaiting a collective a peer never joins) is waited for, up to
        the communicator's timeout: from a running event loop, ``await comm.aclose()``
        waits without blocking the loop."""
        if self._h is not None:
            h, self._h = self._h, None
            call(ext.pybridge_CommClose, h)

    async def aclose(self):
        """close(), waiting on a thread of its own: the event loop runs meanwhile. A
        cancelled await does not stop the close."""
        if self._h is not None:
            h, self._h = self._h, None
            await in_thread(call, ext.pybridge_CommClose, h, name="ucxx_go-commclose")

    def __repr__(self):
        return f"<Communicator rank {self.rank} of {self.size}{' closed' if self._h is None else ''}>"
