"""One-sided transfers and semaphores from asyncio: register, pack, unpack_remote, put,
get, put_many, flush; semaphores signalled after puts; bounds on what a peer's key
allows; a peer that dies. Two processes where a peer must die, otherwise a connected
pair in this process (the engine treats both ends alike)."""

import asyncio
import gc
import os
import signal

import numpy as np
import pytest

import ucxx_go
from _support import STARTUP, TIMEOUT, mp, queue_get, start, wait_for_condition

MiB = 1 << 20

pytestmark = pytest.mark.usefixtures("one_sided")


async def shared(owner, user, nbytes, fill=0):
    """A buffer of `owner`'s side registered and known to `user`'s as a RemoteRegion."""
    buf = np.full(nbytes, fill, dtype="u1")
    region = ucxx_go.register(buf)
    return buf, region, user.unpack_remote(region.pack())


async def test_put_flush_get(pair):
    client, srv = pair
    target, _, remote = await shared(srv, client, MiB)
    assert remote.nbytes == MiB
    src = np.random.default_rng(0).integers(0, 256, 4096, dtype="u1")
    await asyncio.wait_for(client.put(src, remote, offset=8192), TIMEOUT)
    await asyncio.wait_for(client.flush(), TIMEOUT)
    np.testing.assert_array_equal(target[8192:8192 + 4096], src)
    back = np.empty(4096, dtype="u1")
    await asyncio.wait_for(client.get(back, remote, offset=8192), TIMEOUT)
    np.testing.assert_array_equal(back, src)
    # A registered local buffer moves as a Region.
    big = ucxx_go.register(np.full(MiB, 3, dtype="u1"))
    await asyncio.wait_for(client.put(big, remote), TIMEOUT)
    await asyncio.wait_for(client.flush(), TIMEOUT)
    assert (target == 3).all()


async def test_put_many_posts_all_at_once(pair):
    client, srv = pair
    target, _, remote = await shared(srv, client, 64 * 1024)
    pieces = [np.full(4096, i + 1, dtype="u1") for i in range(16)]
    await asyncio.wait_for(client.put_many([(p, remote, i * 4096) for i, p in enumerate(pieces)]), TIMEOUT)
    await asyncio.wait_for(client.flush(), TIMEOUT)
    for i in range(16):
        assert (target[i * 4096:(i + 1) * 4096] == i + 1).all()


async def test_gathered_transfers_are_posted_without_waiting(pair, monkeypatch):
    """Large puts and gets started together post at once (no inline wait while the
    loop has the others ready to run); small ones always may wait; all land."""
    from ucxx_go import _onesided, _request

    client, srv = pair
    piece = _request._NO_WAIT_HOST_MIN
    target, _, remote = await shared(srv, client, 8 * piece)
    waits = []
    submit = _onesided.submit

    def recording_submit(fn, *args):
        waits.append(args[-1])
        return submit(fn, *args)

    monkeypatch.setattr(_onesided, "submit", recording_submit)
    pieces = [np.full(piece, i + 1, dtype="u1") for i in range(8)]
    await asyncio.wait_for(asyncio.gather(*(client.put(p, remote, i * piece) for i, p in enumerate(pieces))), TIMEOUT)
    assert waits[:7] == [0] * 7  # the last may wait: nothing else is ready by then
    await asyncio.wait_for(client.flush(), TIMEOUT)
    for i in range(8):
        assert (target[i * piece:(i + 1) * piece] == i + 1).all()
    backs = [np.zeros(piece, dtype="u1") for _ in range(8)]
    waits.clear()
    await asyncio.wait_for(asyncio.gather(*(client.get(b, remote, i * piece) for i, b in enumerate(backs))), TIMEOUT)
    assert waits[:7] == [0] * 7  # the last may wait: nothing else is ready by then
    for i, b in enumerate(backs):
        assert (b == i + 1).all()
    waits.clear()
    small = [p[:piece - 1] for p in pieces]
    await asyncio.wait_for(asyncio.gather(*(client.put(p, remote, i * piece) for i, p in enumerate(small))), TIMEOUT)
    assert waits == [1] * 8


@pytest.mark.parametrize("offset,size", [(4000, 200), (-1, 8), (1 << 40, 8), (0, 0)])
async def test_out_of_range_fails_before_anything_moves(pair, offset, size):
    client, srv = pair
    target, _, remote = await shared(srv, client, 4096)
    src = np.full(max(size, 1), 9, dtype="u1")[:size]
    for op in (client.put, client.get):
        with pytest.raises(ValueError):
            await op(src if op is client.put else src.copy(), remote, offset=offset)
    with pytest.raises(ValueError):  # one bad transfer: none of them moves
        await client.put_many([(np.full(8, 1, dtype="u1"), remote, 0), (src, remote, offset)])
    await asyncio.wait_for(client.flush(), TIMEOUT)
    assert not target.any()


@pytest.mark.parametrize(
    "data",
    [b"", b"not a key", b"UXK1" + bytes(100), bytes(64 << 10)],
    ids=["empty", "garbage", "zeros-after-magic", "oversized"],
)
async def test_bad_packed_key_is_a_value_error(pair, data):
    client, _ = pair
    with pytest.raises(ValueError):
        client.unpack_remote(data)
    with pytest.raises(ValueError):
        client.unpack_semaphore(data)


async def test_key_of_the_other_kind_is_refused(pair):
    client, srv = pair
    _, region, _ = await shared(srv, client, 64)
    with pytest.raises(ValueError):
        client.unpack_semaphore(region.pack())
    with pytest.raises(ValueError):
        client.unpack_remote(srv.semaphore().pack())


async def test_remote_region_is_bound_to_its_endpoint(server):
    a, a_srv = await server.connect()
    b, _ = await server.connect()
    try:
        _, _, remote = await shared(a_srv, a, 64)
        with pytest.raises(ValueError):
            await b.put(np.zeros(8, dtype="u1"), remote)
    finally:
        a.abort()
        b.abort()


def test_registration_is_cached():
    buf = np.zeros(MiB, dtype="u1")
    r1 = ucxx_go.register(buf)
    r2 = ucxx_go.register(buf)
    assert r1 is r2  # the same object: its Region again
    assert ucxx_go.register(buf[:])._reg is r1._reg  # the same memory: the same registration
    inner = ucxx_go.register(buf[4096:8192])  # inside: the Go core's cache
    assert inner._reg.id == r1._reg.id
    with pytest.raises(ValueError):
        ucxx_go.register(np.zeros(0, dtype="u1"))


async def test_semaphore_signal_after_puts(pair):
    client, srv = pair
    target, _, remote = await shared(srv, client, 256 * 1024)
    sem = srv.semaphore()
    rsem = client.unpack_semaphore(sem.pack())
    assert sem.value == 0
    waiting = asyncio.ensure_future(sem.wait(1))
    src = np.full(256 * 1024, 0x5A, dtype="u1")
    await asyncio.wait_for(client.put(src, remote), TIMEOUT)
    await asyncio.wait_for(rsem.signal(), TIMEOUT)
    assert await asyncio.wait_for(waiting, TIMEOUT) == 1
    assert (target == 0x5A).all(), "the wait ended before the put before the signal landed"
    await asyncio.wait_for(rsem.signal(4), TIMEOUT)
    assert await asyncio.wait_for(sem.wait(5), TIMEOUT) == 5
    with pytest.raises(ValueError):
        await rsem.signal(0)
    # Out of the counter's 64 bits: refused, not wrapped (-1 became a wait for 2**64 - 1).
    for bad in (-1, 1 << 64):
        with pytest.raises(ValueError):
            await sem.wait(bad)
    with pytest.raises(ValueError):
        await rsem.signal(1 << 64)


async def test_semaphore_wait_timeout_and_cancel(pair):
    client, srv = pair
    sem = srv.semaphore()
    rsem = client.unpack_semaphore(sem.pack())
    with pytest.raises(asyncio.TimeoutError):
        await sem.wait(1, timeout=0.05)
    task = asyncio.ensure_future(sem.wait(1))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # Cancelled waits took nothing: the counter still counts every signal.
    await asyncio.wait_for(rsem.signal(2), TIMEOUT)
    assert await asyncio.wait_for(sem.wait(2), TIMEOUT) == 2


async def test_semaphore_release_ends_waits(pair):
    _, srv = pair
    sem = srv.semaphore()
    waiting = asyncio.ensure_future(sem.wait(1))
    await asyncio.sleep(0)
    sem.release()
    with pytest.raises(ucxx_go.UCXCanceledError):
        await asyncio.wait_for(waiting, TIMEOUT)


# -- a peer that dies ----------------------------------------------------------------------


def _target_peer(port, q):
    """Connects, shares 1 MiB and a semaphore, then waits to be killed."""

    async def main():
        ep = await ucxx_go.create_endpoint("127.0.0.1", port)
        buf = np.zeros(MiB, dtype="u1")
        region = ucxx_go.register(buf)
        sem = ep.semaphore()
        await ep.send_obj(region.pack())
        await ep.send_obj(sem.pack())
        q.put(os.getpid())
        await asyncio.sleep(3600)

    asyncio.run(main())


async def test_peer_death_fails_pending_operations(processes, server):
    q = mp.Queue()
    start(processes, _target_peer, server.listener.port, q)
    ep = await asyncio.wait_for(server.accepted.get(), STARTUP)
    remote = ep.unpack_remote(await asyncio.wait_for(ep.recv_obj(), STARTUP))
    rsem = ep.unpack_semaphore(await asyncio.wait_for(ep.recv_obj(), STARTUP))
    pid = await queue_get(q, STARTUP)
    local_sem = ep.semaphore()
    waiting = asyncio.ensure_future(local_sem.wait(1))
    await asyncio.wait_for(ep.put(np.ones(MiB, dtype="u1"), remote), TIMEOUT)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(ucxx_go.UCXError):
        await asyncio.wait_for(waiting, TIMEOUT)
    await wait_for_condition(lambda: not ep.alive, "the endpoint noticing its peer died")
    for op in (lambda: ep.put(np.ones(8, dtype="u1"), remote), ep.flush, rsem.signal):
        with pytest.raises(ucxx_go.UCXError):
            await asyncio.wait_for(op(), TIMEOUT)
    ep.abort()
    gc.collect()


async def test_stream_wait_without_cuda_says_why(pair):
    """Semaphore.wait(stream=) needs the CUDA driver: without it, a UCXError naming
    it, at once (tests/gpu/test_onesided_gpu.py runs the real thing)."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            pytest.skip("a GPU is present: tests/gpu covers the stream wait")
    except Exception:
        pass
    _, srv = pair
    with pytest.raises(ucxx_go.UCXError, match="CUDA"):
        await srv.semaphore().wait(1, stream=1)


async def test_read_only_memory_is_never_written(pair):
    """A read-only buffer may be registered and put from, but not packed for a peer
    (who could write into it) nor got into."""
    client, srv = pair
    _, _, remote = await shared(srv, client, 64)
    region = ucxx_go.register(bytes(64))
    with pytest.raises(TypeError):
        region.pack()
    with pytest.raises(TypeError):
        await client.get(region, remote)
    await asyncio.wait_for(client.put(region, remote), TIMEOUT)
