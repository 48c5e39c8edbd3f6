"""Stream-ordered collectives (``stream_ordered=True``), NCCL's semantics: a call is
queued on its buffers' stream after the work there and before the work queued after
it, and the await returns once it is queued. Ranks as processes sharing the GPU (or
one GPU each where there are several). Each chain below feeds every call's result
through work on the stream into the next call, so a call that read its input early,
or whose result landed late, gives a wrong number. Skipped where cupy or a GPU is
missing."""

import pathlib

import pytest

from _support import cupy_gpus

cp, _GPUS = cupy_gpus()

from test_collectives_gpu import run_ranks  # noqa: E402

TESTS = repr(str(pathlib.Path(__file__).resolve().parent))  # the bodies import _cuda_spin from here

CHAINS = r"""
import asyncio, os, sys, numpy as np, cupy as cp, ucxx_go
sys.path.insert(0, @TESTS@)
from _cuda_spin import spin_on

async def main():
    comm = await ucxx_go.Communicator.init(timeout=120)
    r, n = comm.rank, comm.size
    cp.cuda.Device(r % cp.cuda.runtime.getDeviceCount()).use()
    own_gpu = cp.cuda.runtime.getDeviceCount() >= n
    tri = n * (n - 1) // 2
    s = cp.cuda.Stream(non_blocking=True)
    # Programs (small), whole copies and sliced or waits-only chains (large): 20 calls
    # queued back to back, each step's input made on the stream from the last result.
    for count in [256, 1 << 16, (1 << 22) + 1024]:
        with s:
            x = cp.full(count, r + 1, cp.float32)
            want = float(n * (n + 1) // 2)
            for step in range(20):
                await comm.allreduce(x, stream_ordered=True)
                x /= n          # on the stream, after the call
                x += r
                want = want + tri
            await comm.allreduce(x, stream_ordered=True)
            got = cp.asnumpy(x)  # on the stream: after the last call
        assert (got == want).all(), ("allreduce chain", count, got[:4], want)
        with s:
            y = cp.full(count, r, cp.float32)
            g = cp.empty(n * count, cp.float32)
            for step in range(5):
                await comm.allgather(y, g, stream_ordered=True)
                y = g[((r + 1) % n) * count:((r + 1) % n + 1) * count] + 1
            got = cp.asnumpy(y)
        # step k hands each rank its right neighbour's value + 1: rank r ends with ((r + 5) % n) + 5
        assert (got == (r + 5) % n + 5).all(), ("allgather chain", count, got[:4])
        with s:
            b = cp.full(count, 7 if r == n - 1 else 0, cp.float32)
            for step in range(4):
                await comm.broadcast(b, root=n - 1, stream_ordered=True)
                if r == n - 1:
                    b += 1
            got = cp.asnumpy(b)
        # the root adds 1 after each call: the others end with its value before the last
        assert (got == (11 if r == n - 1 else 10)).all(), ("broadcast chain", count, got[:4])
        with s:
            a = cp.full(n * count, r, cp.float32)
            o = cp.empty(count, cp.float32)
            await comm.reduce_scatter(a, o, stream_ordered=True)
            o += 1
            t = cp.empty(n * count, cp.float32)
            await comm.alltoall(cp.tile(o, n), t, stream_ordered=True)
            got = cp.asnumpy(t)
        assert (got == tri + 1).all(), ("reduce_scatter then alltoall", count, got[:4])
    # alltoallv (per-call blocks) ordered too.
    with s:
        v = cp.full(n * 1000, r, cp.float32)
        o = cp.empty(n * 1000, cp.float32)
        await comm.alltoallv(v, [1000] * n, o, [1000] * n, stream_ordered=True)
        o += 1
        got = cp.asnumpy(o)
    assert (got == np.repeat(np.arange(n) + 1, 1000)).all(), ("alltoallv", got[:4])
    # Calls on two streams in turn: the later call's lanes start after the earlier's.
    s2 = cp.cuda.Stream(non_blocking=True)
    xs = [cp.full(1 << 20, r + k, cp.float32) for k in range(6)]
    cp.cuda.Device().synchronize()  # made on the null stream, which s and s2 do not wait for
    for k, x in enumerate(xs):
        with (s if k % 2 else s2):
            await comm.allreduce(x, stream_ordered=True)
    s.synchronize(); s2.synchronize()
    for k, x in enumerate(xs):
        assert (cp.asnumpy(x) == tri + n * k).all(), ("two streams", k)
    # Ordered and unordered calls mixed on one stream.
    with s:
        x = cp.full(1 << 18, r + 1, cp.float32)
        await comm.allreduce(x, stream_ordered=True)
        x += 1
        await comm.allreduce(x)
        x += 1
        await comm.allreduce(x, stream_ordered=True)
        got = cp.asnumpy(x)
    assert (got == (n * (n + 1) // 2 + 1) * n * n + n).all(), ("mixed", got[:4])
    # On the per-thread default stream (which only the calling thread can name) a
    # stream-ordered call runs as an ordinary one: done when the await returns.
    ptds = getattr(cp.cuda.Stream, "ptds", None)
    if ptds is not None:
        with ptds:
            x = cp.full(1 << 18, r + 1, cp.float32)
            x *= 2
            await comm.allreduce(x, stream_ordered=True)
            x += 1
            await comm.allreduce(x, stream_ordered=True)
            got = cp.asnumpy(x)
        assert (got == (n * (n + 1) + 1) * n).all(), ("per-thread default stream", got[:4])
    # The await returns while the stream is still busy with work queued before the
    # call (ranks with a GPU each: ranks sharing one wait for each other on the host).
    with s:
        x = cp.full(1 << 16, r + 1, cp.float32)
        spin_on(s, 2.0)
        await comm.allreduce(x, stream_ordered=True)
        queued_early = not s.done
        got = cp.asnumpy(x)
    assert (got == n * (n + 1) // 2).all(), ("after the spin", got[:4])
    if own_gpu:
        assert queued_early, "the stream-ordered call waited for the stream"
    await comm.synchronize()
    os.write(1, f"rank {r} ok\n".encode())
    comm.close()

asyncio.run(main())
"""


@pytest.mark.parametrize("n", [2, 4])
def test_stream_ordered_chains(tmp_path, n):
    out = run_ranks(tmp_path, n, CHAINS.replace("@TESTS@", TESTS), timeout=400)
    assert out.count(" ok") == n, out


DEATH = r"""
import asyncio, os, sys, time, cupy as cp, ucxx_go
sys.path.insert(0, @TESTS@)
from _cuda_spin import spin_on

async def main():
    comm = await ucxx_go.Communicator.init(timeout=30)
    r, n = comm.rank, comm.size
    cp.cuda.Device(r % cp.cuda.runtime.getDeviceCount()).use()
    s = cp.cuda.Stream(non_blocking=True)
    x = cp.ones(1 << 16, cp.float32)
    await comm.allreduce(x)
    with s:
        if r == 1:
            spin_on(s, 30.0)  # its part of the call never runs: the process ends first
        failed = None
        await comm.allreduce(x, stream_ordered=True)
        if r == 1:
            await comm.barrier()  # rank 0 queued its part too
            os._exit(0)
        await comm.barrier()
        if failed is None:
            try:
                await comm.synchronize()
            except ucxx_go.RankFailedError as e:
                failed = e
        assert failed is not None and failed.rank == 1, repr(failed)
        s.synchronize()  # released: the stream does not stay blocked
        try:
            await comm.allreduce(x, stream_ordered=True)
            raise SystemExit("a call after the failure ran")
        except (ucxx_go.CommunicatorBrokenError, ucxx_go.RankFailedError):
            pass
    os.write(1, b"rank 0 ok\n")
    comm.close()

asyncio.run(main())
"""


@pytest.mark.skipif(_GPUS < 2, reason="ranks sharing a GPU wait for signals on the host, where a rank's death "
                    "fails the call itself (test_collectives_gpu's paths)")
def test_stream_ordered_call_whose_rank_dies(tmp_path):
    """A rank dies with a stream-ordered call queued on the others: the survivor's
    synchronize raises RankFailedError naming it, its stream is released (does not stay
    blocked in the call's waits), and its next call fails."""
    out = run_ranks(tmp_path, 2, DEATH.replace("@TESTS@", TESTS), timeout=200)
    assert out.count(" ok") == 1, out


LOOP_FREE = r"""
import asyncio, os, sys, cupy as cp, ucxx_go
sys.path.insert(0, @TESTS@)
from _cuda_spin import Gate

async def main():
    comm = await ucxx_go.Communicator.init(timeout=60)
    r, n = comm.rank, comm.size
    cp.cuda.Device(r % cp.cuda.runtime.getDeviceCount()).use()
    own_gpu = cp.cuda.runtime.getDeviceCount() >= n
    s = cp.cuda.Stream(non_blocking=True)
    x = cp.full(1 << 16, r + 1, cp.float32)
    y = cp.full(1024, 1, cp.float32)
    await comm.allreduce(cp.zeros_like(x))  # contexts made, peers opened
    # CUDA loads a kernel at its first launch (lazy loading, the default), and the
    # load waits for the device's streams: the add below, first launched behind a
    # closed gate, would wait for a gate only this thread can open. Launch it once now.
    x += 1
    x -= 1
    cp.cuda.Device().synchronize()
    gate = Gate()

    # An ordinary call whose stream is held until a task on the event loop opens the
    # gate: the call must wait for the stream off the loop's thread, or nothing ever
    # opens it. It reads what the stream wrote after the gate.
    with s:
        gate.close_on(s)
        x += 1
        assert not s.done
        opener = asyncio.ensure_future(gate.open_after(0.2))
        await comm.allreduce(x)
    await opener
    assert (cp.asnumpy(x) == n * (n + 3) // 2).all(), ("ordinary call after the gate", cp.asnumpy(x)[:4])
    # 80 stream-ordered calls behind the gate: from the 65th a call waits for the
    # oldest in flight, and that wait too must leave the loop free. (Ranks sharing a
    # GPU wait for each other's signals on the host, inside the call: not here.)
    if own_gpu:
        await comm.barrier()
        with s:
            gate.close_on(s)
            opener = asyncio.ensure_future(gate.open_after(0.2))
            for _ in range(80):
                await comm.allreduce(y, stream_ordered=True)
        await opener
        await comm.synchronize()
        assert (cp.asnumpy(y) == n ** 80).all(), ("80 ordered calls", cp.asnumpy(y)[:4])
    await comm.barrier()
    os.write(1, f"rank {r} ok\n".encode())
    comm.close()

asyncio.run(main())
"""


def test_device_calls_leave_the_event_loop_free(tmp_path):
    """A device call whose caller's stream is still busy, or that waits for the
    stream-ordered calls in flight (64 of them), waits off the event loop's thread:
    a task on the loop opens what holds the stream (else the ranks hang until the
    launcher's timeout), and the results are right."""
    out = run_ranks(tmp_path, 2, LOOP_FREE.replace("@TESTS@", TESTS), timeout=120)
    assert out.count(" ok") == 2, out


ONE_RANK = r"""
import asyncio, os, sys, cupy as cp, ucxx_go
sys.path.insert(0, @TESTS@)
from _cuda_spin import Gate

def step(what):
    print("rank 0:", what, flush=True)

async def main():
    # The device's context first, then the communicator, as NCCL asks for cudaSetDevice
    # before ncclCommInitRank: init readies the context for stream-ordered calls
    # (CU_CTX_SYNC_MEMOPS, whose setting waits for the device).
    x = cp.arange(1 << 16, dtype=cp.float32)
    comm = await ucxx_go.Communicator.init(timeout=60)
    assert comm.size == 1, comm.size
    s = cp.cuda.Stream(non_blocking=True)
    out, gathered, doubled = cp.zeros_like(x), cp.zeros_like(x), cp.zeros_like(x)
    # What runs behind the gate, run once before it: CUDA loads a kernel at its first
    # launch (lazy loading), and the load waits for the device, here for the gated
    # stream. The cupy kernels, and the driver's device-to-device copy, which the
    # ordered calls queue; the communicator's calls are first made behind the gate,
    # where nothing of theirs may wait for the device (the first look at a cupy array
    # once launched cupy.arange on the caller's stream; the first call once set the
    # context's flags).
    x += 1
    x -= 1
    cp.multiply(out, 2, out=doubled)
    gathered.data.copy_from_device_async(x.data, x.nbytes)
    cp.cuda.Device().synchronize()
    gate = Gate(watchdog_s=30)
    try:
        with s:
            gate.close_on(s)
            step("closed")
            x += 1
            step("added")
            # Queued on the stream behind the gate: the awaits return with it closed
            # (a wait for the stream on the host would never end: only this thread opens it).
            await comm.allreduce(x, out, stream_ordered=True)
            step("allreduce queued")
            await comm.allgather(x, gathered, stream_ordered=True)
            step("allgather queued")
            assert not s.done
            cp.multiply(out, 2, out=doubled)  # after the copy on the stream
        gate.open()
        step("opened")
        await comm.synchronize()
        s.synchronize()
        want = cp.arange(1 << 16, dtype=cp.float32) + 1
        assert (out == want).all() and (gathered == want).all() and (doubled == 2 * want).all(), "one-rank ordered copies"
        # An ordinary call behind a gate that a task on the event loop opens: it waits for
        # the stream off the loop's thread (else nothing opens the gate), then copies.
        z = cp.zeros_like(x)
        with s:
            gate.close_on(s)
            x += 1
            step("closed again")
            opener = asyncio.ensure_future(gate.open_after(0.2))
            await comm.allreduce(x, z)
        await opener
        step("ordinary call done")
        assert (z == want + 1).all(), "one-rank ordinary copy behind a gate"
    finally:  # a failure above leaves nothing waiting on the closed gate at exit
        gate.open()
        gate.disarm()
    assert not gate.rescued, "the watchdog opened the gate: a wait for the gated stream on the host"
    print("rank 0 ok", flush=True)
    comm.close()

asyncio.run(main())
"""


def test_one_rank_ordered_calls_are_copies_on_the_stream(tmp_path):
    """A one-rank communicator's stream-ordered allreduce and allgather are a copy
    queued on the stream, as NCCL's: the await returns while the stream is still held
    (by a gate only the caller's thread opens), and the copies land in stream order.
    An ordinary one-rank call behind a gate waits for the stream off the event loop."""
    out = run_ranks(tmp_path, 1, ONE_RANK.replace("@TESTS@", TESTS), timeout=90)
    assert "rank 0 ok" in out, out
