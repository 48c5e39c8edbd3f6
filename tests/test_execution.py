"""ExecutionContext on the host (no GPU): byte-range dependencies of copies, reductions
and Python host functions, host accesses and their fast path, failures and their
chains, sync and async policies against numpy, transfers as vertices, close.

Every wait is bounded (TIMEOUT); nothing sleeps to synchronize: a host function held
on a threading.Event stands for work still running."""

import asyncio
import gc
import threading
import time
import weakref

import numpy as np
import pytest

import ucxx_go
from _support import PROMPT, TIMEOUT, block_until, refuse_submissions, wait_in_flight
from ucxx_go import ExecutionContext, VertexFailedError

pytestmark = pytest.mark.usefixtures("one_sided")  # transfers between engines are one-sided
from ucxx_go._bridge import ext
from ucxx_go._execution import Kernel, pack_arguments


@pytest.fixture
def ctx():
    c = ExecutionContext(transfers=False, gpus=[])
    yield c
    c.close()


def gate():
    """An Event, and a host function body that waits on it (bounded)."""
    ev = threading.Event()

    def held():
        assert ev.wait(TIMEOUT), "the test never released the gate"

    return ev, held


class FakeCuda:
    """__cuda_array_interface__ over host memory: a 'device' array for the argument
    checks, which never reach a GPU."""

    def __init__(self, n, typestr="<f4"):
        self._buf = np.zeros(n, typestr)
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": typestr,
                                         "data": (self._buf.ctypes.data, False), "version": 3}


# -- byte ranges ---------------------------------------------------------------------


def test_copies_follow_byte_ranges(ctx):
    n, h = 64, 32
    raw_y = np.arange(n, dtype="f8")
    raw_z = np.zeros(n, dtype="f8")
    y, z = ctx.wrap(raw_y), ctx.wrap(raw_z)
    ev, held = gate()

    def write_low_half():
        held()
        np.asarray(y)[:h] = -1.0  # inside a host function: no synchronization

    hv = ctx.host(write_low_half, writes=[y[:h]])
    high = ctx.copy(z[h:], y[h:])
    low = ctx.copy(z[:h], y[:h])
    high.wait(timeout=TIMEOUT)  # the high half is not the held function's
    assert (raw_z[h:] == np.arange(h, n)).all()
    assert (raw_z[:h] == 0).all(), "the copy of the held half ran before the function that writes it"
    ev.set()
    low.wait(timeout=TIMEOUT)
    hv.wait(timeout=TIMEOUT)
    assert (raw_z[:h] == -1.0).all(), "the copy of the held half did not see the function's writes"
    assert (np.asarray(z)[h:] == np.arange(h, n)).all()


def test_reductions_from_many_sources(ctx):
    n, k = 100, 40
    rng = np.random.default_rng(1)
    sources = [rng.integers(-1000, 1000, n, dtype="i8") for _ in range(k)]
    dst = ctx.array(n, "int64", device="cpu")
    ev, held = gate()
    first = ctx.array(n, "int64", device="cpu")
    first[:] = sources[0]

    def fill_first():  # the first source is written by a held function: every read of dst waits
        held()

    ctx.host(fill_first, writes=[first])
    ctx.reduce_into(dst, first)
    vs = [ctx.reduce_into(dst, ctx.wrap(s)) for s in sources[1:]]
    for v in vs:
        v.wait(timeout=TIMEOUT)  # the others ran meanwhile, concurrently
    ev.set()
    assert int(dst[7]) == int(sum(s[7] for s in sources))  # a read waits for all of them
    assert (np.asarray(dst) == np.sum(sources, axis=0)).all()
    # Other ops, and an op after a different one: ordered, not mixed.
    mx = ctx.array(n, "float32", device="cpu")
    mx[:] = -np.inf
    for s in sources[:5]:
        ctx.reduce_into(mx, ctx.wrap(s.astype("f4")), op="max")
    ctx.reduce_into(mx, ctx.wrap(np.ones(n, "f4")), op="sum")
    want = np.max([s.astype("f4") for s in sources[:5]], axis=0) + 1
    assert (np.asarray(mx) == want).all()


def test_reduce_and_copy_checks(ctx):
    a, b = ctx.array(8, "int32", device="cpu"), ctx.array(8, "int64", device="cpu")
    with pytest.raises(TypeError):
        ctx.reduce_into(a, b)
    with pytest.raises(ValueError):
        ctx.reduce_into(a, a[:4], op="mean")
    with pytest.raises(ValueError):
        ctx.reduce_into(a[:4], a[2:6])  # overlap
    with pytest.raises(ValueError):
        ctx.copy(a[:4], b[:1])  # 16 bytes from 8
    with pytest.raises(ValueError):
        ctx.copy(a[:4], a[2:6])
    with pytest.raises(TypeError):
        ctx.copy(a, np.zeros(8, "i4"))
    other = ExecutionContext(transfers=False, gpus=[])
    try:
        with pytest.raises(TypeError):
            ctx.copy(a, other.array(8, "int32", device="cpu"))
    finally:
        other.close()
    ro = ctx.wrap(b"12345678")
    with pytest.raises(TypeError):
        ctx.copy(ro, a[:2])
    assert bytes(np.asarray(ro)) == b"12345678"


def test_a_read_only_numpy_array_wraps_read_only(ctx):
    """A numpy array that is not writeable wraps read-only however buffer_info reads it,
    numpy's fast path (whose keep-alive is the array itself) included: the DAG refuses
    to write into it, and its bytes stay."""
    ctx.wrap(np.zeros(4, np.uint8))  # uint8 arrays take buffer_info's numpy fast path from here on
    const = "immutable bytes!".encode()  # a bytes object of its own, not the code's constant
    frozen = np.zeros(16, np.uint8)
    frozen.flags.writeable = False
    src = ctx.wrap(np.frombuffer(bytearray(b"OVERWRITTEN!!!!!"), np.uint8))
    for obj in (np.frombuffer(const, np.uint8), frozen):
        dst = ctx.wrap(obj)
        with pytest.raises(TypeError):
            ctx.copy(dst, src)
        with pytest.raises(TypeError):
            ctx.reduce_into(dst, src)
    ctx.synchronize_sync()
    assert const == b"immutable bytes!" and not frozen.any()


def test_a_bounded_wait_times_out_on_the_calling_thread(ctx):
    a = ctx.array(8, "int64", device="cpu")
    ev, held = gate()
    hv = ctx.host(held, writes=[a])
    before = set(threading.enumerate())
    for timeout in (0, 0.001, 0.02, -1.0, float("-inf")) * 6:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError, match=f"vertex {hv.id}: not finished within"):
            hv.wait(timeout=timeout)
        assert time.monotonic() - t0 >= max(timeout, 0)
    started = {t.name for t in set(threading.enumerate()) - before}
    assert not started, f"bounded waits started threads: {started}"
    with pytest.raises(ValueError, match="timeout"):
        hv.wait(timeout=float("nan"))
    with pytest.raises(TypeError, match="timeout"):
        hv.wait(timeout="0.01")
    ev.set()
    hv.wait(timeout=TIMEOUT)  # the vertex ran on regardless
    hv.wait(timeout=0)  # finished: no wait at all
    hv.wait(timeout=float("inf"))
    hv.wait(timeout=1e300)

    def boom():
        raise KeyError("boom")

    failed = ctx.host(boom, writes=[a])
    for timeout in (TIMEOUT, 0, None):  # a failure is never a timeout
        with pytest.raises(VertexFailedError):
            failed.wait(timeout=timeout)


# -- host access ---------------------------------------------------------------------


def test_asarray_is_a_view_after_sync(ctx):
    raw = np.zeros(16, "i4")
    y = ctx.wrap(raw)

    def fill():
        np.asarray(y)[:] = np.arange(16)

    ctx.host(fill, writes=[y])
    view = np.asarray(y)  # waits for fill
    assert np.shares_memory(view, raw)
    assert (view == np.arange(16)).all()
    view[3] = 99
    assert y[3] == 99 and raw[3] == 99
    assert np.shares_memory(np.asarray(y[4:8]), raw[4:8])
    assert y[-1] == 15
    with pytest.raises(IndexError):
        y[16]
    with pytest.raises(ValueError):
        y[::2]


def test_element_get_set(ctx):
    y = ctx.array(10, "float32", device="cpu")
    z = ctx.array(10, "float32", device="cpu")
    for i in range(10):
        y[i] = i * 1.5
    ctx.copy(z, y)
    assert float(z[3]) == 4.5
    z[2:5] = [7, 8, 9]
    assert list(np.asarray(z)[:6]) == [0.0, 1.5, 7, 8, 9, 7.5]
    assert len(z) == 10 and z.nbytes == 40 and z.device == -1 and z.dtype == np.float32
    assert z[2:5].id == z.id and z[2:5].offset == 8
    assert (z[2:5].copy_to_host() == [7, 8, 9]).all()


def test_host_access_fast_path(ctx, monkeypatch):
    calls = []
    real = ext.pybridge_DagAccess

    def counting(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(ext, "pybridge_DagAccess", counting)
    y = ctx.array(8, "int64", device="cpu")
    src = ctx.array(8, "int64", device="cpu")
    y[0] = 5
    assert y[0] == 5
    assert calls == [], "a fresh array is safe everywhere"
    src[:] = np.arange(8)
    ctx.copy(y[:4], src[:4])  # writes y[0:4]
    assert y[1] == 1
    assert len(calls) == 1
    assert y[1] == 1
    assert len(calls) == 1, "a second read of a clean range made a call"
    assert y[6] == 0
    assert len(calls) == 2, "an element the last access did not cover"
    np.asarray(y)  # the whole array, as a write
    y[5] = 3
    assert y[2] == 2 and y[5] == 3
    assert len(calls) == 3
    ctx.copy(src, y)  # only reads y: reads stay safe, writes do not
    assert y[5] == 3
    assert len(calls) == 3
    y[5] = 4
    assert len(calls) == 4
    ctx.copy(y[4:], src[:4])  # writes y[4:8] (src is y as the read-only copy saw it)
    assert y[5] == 1
    assert len(calls) == 5, "an operation that writes the array must make the next read sync again"


def test_host_access_waits_only_for_its_range(ctx):
    y = ctx.array(8, "int32", device="cpu")
    ev, held = gate()

    def write_low():
        held()
        np.asarray(y)[:4] = 1

    v = ctx.host(write_low, writes=[y[:4]])
    ctx.copy(y[4:6], ctx.wrap(np.array([5, 6], "i4")))
    assert y[5] == 6  # does not wait for the held function
    ev.set()
    assert y[0] == 1
    v.wait(timeout=TIMEOUT)


# -- failures ------------------------------------------------------------------------


async def test_host_function_failure_chains(ctx):
    y = ctx.array(8, "int32", device="cpu")
    z = ctx.array(8, "int32", device="cpu")
    other = ctx.array(8, "int32", device="cpu")
    boom = ValueError("boom")
    ev, held = gate()

    def bad():
        held()
        raise boom

    bv = ctx.host(bad, writes=[y[:4]])
    child = ctx.copy(z[:4], y[:4])  # added while bad is running: a descendant
    unrelated = ctx.copy(other, ctx.wrap(np.arange(8, dtype="i4")))
    unrelated.wait(timeout=TIMEOUT)
    ev.set()
    with pytest.raises(VertexFailedError) as info:
        await asyncio.wait_for(bv, TIMEOUT)
    assert info.value.__cause__ is boom
    assert info.value.vertex == info.value.root == bv.id
    with pytest.raises(VertexFailedError) as info:
        child.wait(timeout=TIMEOUT)
    assert info.value.vertex == child.id and info.value.root == bv.id
    assert info.value.__cause__ is boom
    assert isinstance(info.value, ucxx_go.UCXError)
    assert (np.asarray(other) == np.arange(8)).all()
    # The context goes on: later work over the same bytes runs.
    again = ctx.copy(z[:4], y[4:])
    await asyncio.wait_for(again, TIMEOUT)
    ctx.host(lambda: None, reads=[y]).wait(timeout=TIMEOUT)
    await asyncio.wait_for(ctx.synchronize(), TIMEOUT)


async def test_cancelled_await_of_a_vertex_leaves_no_thread(ctx):
    """Awaiting a vertex waits on a thread (the wait is in Go); an await that is
    cancelled (here by wait_for's timeout) lets that thread go within a moment, not
    when the vertex ends: repeated timed-out awaits of a long vertex piled threads up."""
    ev, held = gate()
    x = ctx.array(8, "int32", device="cpu")
    v = ctx.host(held, writes=[x])
    before = set(threading.enumerate())
    try:
        for _ in range(5):
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(v, 0.05)
        for t in [t for t in threading.enumerate() if t.name == "ucxx_go-dagwait" and t not in before]:
            t.join(TIMEOUT)  # their ends need nothing of the loop
            assert not t.is_alive(), "a cancelled await's thread still waits for the vertex"
    finally:
        ev.set()
    await asyncio.wait_for(v, TIMEOUT)


def test_host_access_after_a_failure_in_flight():
    with ExecutionContext(transfers=False, gpus=[], export_dot=True) as ctx:
        y = ctx.array(4, "int32", device="cpu")
        ev, held = gate()
        boom = RuntimeError("late")

        def bad():
            held()
            raise boom

        bv = ctx.host(bad, writes=[y])
        got = []
        reader = threading.Thread(target=lambda: got.append(_outcome(lambda: y[0])))
        reader.start()
        # Release the function once the host access is in the DAG (nothing to await:
        # the DAG's DOT export shows it).
        block_until(lambda: "host access" in ctx.dot(), "the host access added")
        ev.set()
        reader.join(TIMEOUT)
        assert len(got) == 1
        err = got[0]
        assert isinstance(err, VertexFailedError), err
        assert err.root == bv.id and err.__cause__ is boom


def _outcome(fn):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001
        return e


# -- sync and async against numpy ----------------------------------------------------


def random_program(seed, n_ops=200, arrays=3, size=48):
    """A program of copies, reductions, host functions and host accesses over
    overlapping slices: a list of ops, run by run_dag and run_numpy."""
    rng = np.random.default_rng(seed)
    init = [rng.integers(-50, 50, size, dtype="i8") for _ in range(arrays)]
    ops = []

    def two_ranges():
        while True:
            a, b = rng.integers(arrays, size=2)
            n = int(rng.integers(1, size // 2 + 1))
            i, j = (int(x) for x in rng.integers(0, size - n + 1, size=2))
            if a != b or i + n <= j or j + n <= i:
                return int(a), i, int(b), j, n

    for _ in range(n_ops):
        kind = rng.choice(["copy", "reduce", "host", "set", "get"], p=[0.3, 0.3, 0.2, 0.1, 0.1])
        if kind in ("copy", "reduce", "host"):
            op = str(rng.choice(["sum", "sum", "max", "min", "prod"])) if kind == "reduce" else None
            ops.append((kind, *two_ranges(), op, int(rng.integers(-5, 5))))
        else:
            ops.append((kind, int(rng.integers(arrays)), int(rng.integers(size)), int(rng.integers(-99, 99))))
    return init, ops


_NP_OPS = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}


def run_numpy(init, ops):
    arrs = [a.copy() for a in init]
    reads = []
    for kind, *args in ops:
        if kind in ("copy", "reduce", "host"):
            a, i, b, j, n, op, k = args
            dst, src = arrs[a][i:i + n], arrs[b][j:j + n]
            if kind == "copy":
                dst[:] = src
            elif kind == "reduce":
                dst[:] = _NP_OPS[op](dst, src)
            else:
                dst[:] = src * 3 + k
        elif kind == "set":
            arrs[args[0]][args[1]] = args[2]
        else:
            reads.append(int(arrs[args[0]][args[1]]))
    return [a.tobytes() for a in arrs], reads


def run_dag(init, ops, policy):
    with ExecutionContext(policy, transfers=False, gpus=[], python_workers=3) as ctx:
        arrs = [ctx.wrap(a.copy()) for a in init]
        reads = []
        for kind, *args in ops:
            if kind in ("copy", "reduce", "host"):
                a, i, b, j, n, op, k = args
                dst, src = arrs[a][i:i + n], arrs[b][j:j + n]
                if kind == "copy":
                    ctx.copy(dst, src)
                elif kind == "reduce":
                    ctx.reduce_into(dst, src, op=op)
                else:
                    def fn(dst=dst, src=src, k=k):
                        np.asarray(dst)[:] = np.asarray(src) * 3 + k

                    ctx.host(fn, reads=[src], writes=[dst])
            elif kind == "set":
                arrs[args[0]][args[1]] = args[2]
            else:
                reads.append(int(arrs[args[0]][args[1]]))
        ctx.synchronize_sync()
        return [np.asarray(a).tobytes() for a in arrs], reads


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sync_and_async_match_numpy(seed):
    init, ops = random_program(seed)
    want = run_numpy(init, ops)
    assert run_dag(init, ops, "sync") == want
    assert run_dag(init, ops, "async") == want


# -- transfers -----------------------------------------------------------------------


async def test_recv_then_host_function(pair):
    client, srv = pair
    async with ExecutionContext(gpus=[]) as ctx:
        w = ctx.array(64, "uint8", device="cpu")
        rv = ctx.recv(srv, w, tag=7)
        seen = {}

        def look():
            seen["data"] = bytes(np.asarray(w))

        hv = ctx.host(look, reads=[w])
        payload = np.arange(64, dtype="u1")
        assert "data" not in seen
        await asyncio.wait_for(client.send(payload, tag=7), TIMEOUT)
        await asyncio.wait_for(hv, TIMEOUT)
        await asyncio.wait_for(rv, TIMEOUT)
        assert seen["data"] == payload.tobytes()
        # And a ctx.send that the peer's ep.recv matches.
        back = np.zeros(64, "u1")
        sv = ctx.send(srv, w[:32], tag="back")
        await asyncio.wait_for(client.recv(back[:32], tag="back"), TIMEOUT)
        await asyncio.wait_for(sv, TIMEOUT)
        assert (back[:32] == payload[:32]).all()


async def test_put_after_host_function(pair):
    client, srv = pair
    target = np.zeros(128, "u1")
    region = ucxx_go.register(target)
    remote = client.unpack_remote(region.pack())
    async with ExecutionContext(gpus=[]) as ctx:
        src = ctx.array(64, "uint8", device="cpu")

        def write():
            np.asarray(src)[:] = 5

        ctx.host(write, writes=[src])
        pv = ctx.put(client, src, remote, offset=64)
        await asyncio.wait_for(ctx.synchronize(), TIMEOUT)
        await asyncio.wait_for(pv, TIMEOUT)
        await asyncio.wait_for(client.flush(), TIMEOUT)
        assert (target[64:] == 5).all() and (target[:64] == 0).all()
        # get it back into another array.
        dst = ctx.array(64, "uint8", device="cpu")
        await asyncio.wait_for(ctx.get(client, dst, remote, offset=64), TIMEOUT)
        assert (np.asarray(dst) == 5).all()
        with pytest.raises(ValueError):
            ctx.put(client, src, remote, offset=100)  # past the region


async def test_close_cancels_pending_recv(pair):
    client, srv = pair
    ctx = ExecutionContext(gpus=[])
    w = ctx.array(64, "uint8", device="cpu")
    rv = ctx.recv(srv, w, tag="never")
    child = ctx.host(lambda: None, reads=[w])
    waited = asyncio.ensure_future(rv)
    start = time.monotonic()
    await asyncio.wait_for(ctx.aclose(), PROMPT)
    assert time.monotonic() - start < PROMPT
    with pytest.raises((VertexFailedError, ucxx_go.UCXCloseError)) as info:
        await asyncio.wait_for(waited, PROMPT)
    if isinstance(info.value, VertexFailedError):
        assert isinstance(info.value.__cause__, ucxx_go.UCXCanceledError)
    await wait_in_flight(0)
    assert ctx.resources() == {"streams": 0, "events": 0, "modules": 0, "word_pages": 0}
    assert ctx.closed
    ctx.close()  # harmless
    for use in (lambda: ctx.array(4), lambda: ctx.copy(w, w), lambda: ctx.host(print), child.wait,
                ctx.synchronize_sync, lambda: ctx.recv(srv, w), lambda: w[0]):
        with pytest.raises(ucxx_go.UCXCloseError):
            use()
    # The endpoints still work.
    got = np.zeros(4, "u1")
    await asyncio.gather(srv.recv(got), client.send(np.ones(4, "u1")))
    assert (got == 1).all()


def test_a_dropped_context_keeps_what_its_vertices_use_until_it_closed():
    """An ExecutionContext dropped without close() while a host function runs and a copy
    waits for it: its finalizer closes it in the background, and the arrays the vertices
    use stay referenced until that close has returned (before, collecting the context
    dropped them at once). The arrays are views of memory the test holds, so that the
    copy writes into live memory either way."""
    running, release = threading.Event(), threading.Event()

    def held():
        running.set()
        assert release.wait(TIMEOUT), "the test never released the host function"

    base = np.zeros(2 << 20, np.uint8)
    base[:1 << 20] = 1
    arrays = {}

    def add_work():
        ctx = ExecutionContext(transfers=False, gpus=[])
        s, d = base[:1 << 20], base[1 << 20:]
        arrays["src"], arrays["dst"], arrays["ctx"] = weakref.ref(s), weakref.ref(d), weakref.ref(ctx)
        src, dst = ctx.wrap(s), ctx.wrap(d)
        ctx.host(held, writes=[src])
        ctx.copy(dst, src)
        return ctx

    try:
        ctx = add_work()
        assert running.wait(TIMEOUT)
        del ctx
        gc.collect()
        assert arrays["ctx"]() is None, "the context was not collected"
        assert arrays["src"]() is not None and arrays["dst"]() is not None, "dropped while the vertices use them"
    finally:
        release.set()
    block_until(lambda: gc.collect() >= 0 and arrays["src"]() is None and arrays["dst"]() is None,
                "the arrays released once the context closed")
    assert (base == 1).all()


def test_close_fails_host_functions_not_started():
    ctx = ExecutionContext(transfers=False, gpus=[], python_workers=1)
    y = ctx.array(4, "int32", device="cpu")
    ev, held = gate()
    first = ctx.host(held, writes=[y])
    later = ctx.host(lambda: None, writes=[y])
    closer = threading.Thread(target=ctx.close)
    closer.start()
    ev.set()  # close waits for the running function
    closer.join(TIMEOUT)
    assert not closer.is_alive()
    assert all(not t.is_alive() for t in ctx._lane.threads)
    with pytest.raises(ucxx_go.UCXCloseError):
        later.wait()
    with pytest.raises(ucxx_go.UCXCloseError):
        first.wait()


# -- kernels (no GPU: the checks before anything is scheduled) -----------------------


def test_kernel_argument_checks(ctx, monkeypatch):
    refuse_submissions(monkeypatch, "pybridge_DagLaunch")
    k = Kernel(ctx, 12345, "square", "pointer, const pointer, sint32")
    y, x = ctx.wrap(FakeCuda(16)), ctx.wrap(FakeCuda(16))
    host = ctx.array(16, "float32", device="cpu")
    other = ExecutionContext(transfers=False, gpus=[])
    try:
        foreign = other.wrap(FakeCuda(16))
        launch = k(4, 4)
        for args in [(y, x), (y, x, 16, 1), (y, 3, 16), (y, x, y), (y, x, 2**31), (y, x, "16"), (host, x, 16),
                     (y, host, 16), (foreign, x, 16), (np.zeros(16, "f4"), x, 16)]:
            with pytest.raises(TypeError):
                launch(*args)
    finally:
        other.close()
    with pytest.raises(ValueError):
        k(0, 4)
    with pytest.raises(ValueError):
        k((1, 2, 3, 4), 4)
    with pytest.raises(ValueError):
        Kernel(ctx, 1, "k", "pointer, widget")
    # What a well-formed call packs: pointers (with offsets), scalars, accesses.
    slots, words, roots = pack_arguments(ctx, k.params, (y[4:], x, -3), "square")
    assert slots[0] == y.address + 16 and slots[1] == x.address
    assert slots[2] == (-3) & 0xFFFFFFFF
    assert words == [y.id, 16, 48, ucxx_go._constants.ACCESS_READ_WRITE, x.id, 0, 64, ucxx_go._constants.ACCESS_READ]
    assert [r.id for r in roots] == [y.id, x.id]
    nidl = Kernel(ctx, 1, "axpy", "y: inout pointer float, x: in pointer float, a: float, n: sint64")
    slots, words, _ = pack_arguments(ctx, nidl.params, (y, x, 0.5, 16))
    assert words[3] == ucxx_go._constants.ACCESS_READ_WRITE and words[7] == ucxx_go._constants.ACCESS_READ
    assert slots[3] == 16


def test_no_gpu_for_kernels(ctx):
    with pytest.raises(ucxx_go.UCXError):
        ctx.bind_kernel(b".version 8.0\n.target sm_90\n", "k", "pointer")


# -- options, introspection ----------------------------------------------------------


@pytest.mark.parametrize("kwargs", [
    {"policy": "eager"}, {"dependency": "const"}, {"new_stream": "lifo"}, {"parent_stream": "any"},
    {"device_policy": "random"}, {"gpus": [-1]}, {"gpus": [0, 0]}, {"gpus": "0"}, {"max_streams": -1},
    {"python_workers": 0}, {"host_workers": 1.5},
])
def test_bad_options(kwargs, monkeypatch):
    refuse_submissions(monkeypatch, "pybridge_DagNew")
    with pytest.raises(ValueError):
        ExecutionContext(transfers=False, **kwargs)


@pytest.mark.parametrize("parent_stream", ["same-as-parent", "disjoint", "multigpu-early-disjoint",
                                           "multigpu-disjoint", None])
@pytest.mark.parametrize("device_policy", ["round-robin", "minmin-transfer-time"])
def test_policies_the_go_core_takes(parent_stream, device_policy):
    """Every parent-stream name the context accepts, and its default, is one the Go core
    parses (a name only Python knew would fail here, in DagNew)."""
    with ExecutionContext(transfers=False, gpus=[], parent_stream=parent_stream, device_policy=device_policy) as ctx:
        a, b = ctx.array(8, "int8", device="cpu"), ctx.array(8, "int8", device="cpu")
        ctx.copy(b, a).wait(timeout=TIMEOUT)


def test_dot_and_times():
    with ExecutionContext(transfers=False, gpus=[], timings=True, export_dot=True, dependency="no-const",
                          new_stream="always-new", parent_stream="disjoint", device_policy="stream-aware",
                          max_streams=4, host_workers=2) as ctx:
        a, b = ctx.array(8, "int8", device="cpu"), ctx.array(8, "int8", device="cpu")
        v = ctx.copy(b, a)
        w = ctx.host(lambda: None, reads=[b])
        w.wait(timeout=TIMEOUT)
        v.wait(timeout=TIMEOUT)
        start, stop, gpu = v.times()
        assert 0 < start <= stop and gpu == 0
        dot = ctx.dot()
        assert dot.startswith("digraph") and "copy" in dot
        assert repr(v).startswith("<ucxx_go.Vertex")
    with ExecutionContext(transfers=False, gpus=[]) as ctx:
        with pytest.raises(ValueError):
            ctx.dot()


def test_transfers_need_the_option(ctx):
    a = ctx.array(4, "uint8", device="cpu")
    with pytest.raises(ucxx_go.UCXError):
        ctx.send(object(), a)


def _forget_in_child(handle):
    from ucxx_go._execution import _forget_array

    _forget_array(handle, 1)  # Go is not usable here: must return quietly, not call it


def test_array_finalizer_in_a_forked_child():
    """A described array's finalizer (contexts with several GPUs) may run in a child
    forked after the context was made: it returns without calling into Go."""
    import multiprocessing

    with ExecutionContext(gpus=[], transfers=False) as ctx:
        child = multiprocessing.get_context("fork").Process(target=_forget_in_child, args=(ctx._h,))
        child.start()
        child.join(TIMEOUT)
        if child.is_alive():
            child.kill()
        assert child.exitcode == 0, child.exitcode
