"""CUDA buffers end to end: two processes on one GPU (the test and a spawned echo
server, tests/gpu/_gpu_peers.py). Skipped where cupy or a GPU is missing."""

import asyncio
import gc
import multiprocessing
import time

import numpy as np
import pytest

from _support import cupy_gpus

cp, _GPUS = cupy_gpus()

import ucxx_go  # noqa: E402
from _cuda_spin import spin_on  # noqa: E402
from _gpu_peers import ECHO_MULTI, ECHO_TAG, QUIT, serve  # noqa: E402
from _support import GPU_TIMEOUT, engine_stats, started, wait_for_condition  # noqa: E402


def pattern(n, seed=0):
    return ((cp.arange(n, dtype=cp.int64) * 7 + seed) % 251).astype(cp.uint8)


@pytest.fixture
async def gpu_peer():
    """An endpoint to an echo server in another process on the same GPU."""
    async for ep in _gpu_peer():
        yield ep


@pytest.fixture
async def gpu_peer_small_budget():
    """gpu_peer, this side's multi-buffer budget 32 MiB: messages over 4 MiB are
    admitted on the evidence of their frames (README, "Peers that lie")."""
    ucxx_go.init(multi_buffer_limits={"max_outstanding_bytes": 32 << 20})
    async for ep in _gpu_peer():
        yield ep


async def _gpu_peer():
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=serve, args=(q,), daemon=True)
    proc.start()
    try:
        port = q.get(timeout=60)
        ep = await asyncio.wait_for(ucxx_go.create_endpoint("127.0.0.1", port), 30)
        yield ep
        if not ep.closed:
            await asyncio.wait_for(ep.send(np.array([QUIT, 0], dtype="<u8")), 10)
            await ep.close()
        proc.join(30)
        assert proc.exitcode == 0, f"echo server exited with {proc.exitcode}"
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join(10)


async def echo_tag(ep, buf):
    await ep.send(np.array([ECHO_TAG, buf.nbytes], dtype="<u8"))
    out = cp.empty(buf.nbytes, dtype=cp.uint8)
    await asyncio.wait_for(asyncio.gather(ep.send(buf), ep.recv(out)), GPU_TIMEOUT)
    return out


async def test_cuda_frames_admitted_on_evidence(gpu_peer_small_budget):
    """Messages larger than a quarter of the per-endpoint bound wait until every frame
    is here, then receive the held frames (rendezvous requests into device memory)."""
    ep = gpu_peer_small_budget
    for frames in ([pattern(12 << 20, 4)],
                   [np.arange(100, dtype=np.uint8), pattern(6 << 20, 5), pattern(3, 6), pattern(5 << 20, 7)]):
        got = await echo_multi(ep, frames)
        for sent, recv in zip(frames, got):
            if isinstance(sent, np.ndarray):
                assert np.array_equal(recv, sent)
            else:
                assert bool(cp.array_equal(cp.asarray(recv), sent))


async def echo_multi(ep, frames):
    """frames through the echo server as one multi-buffer message, and back."""
    await ep.send(np.array([ECHO_MULTI, 0], dtype="<u8"))
    await asyncio.wait_for(ep.send_multi(frames), GPU_TIMEOUT)
    got = await asyncio.wait_for(ep.recv_multi(), GPU_TIMEOUT)
    assert len(got) == len(frames)
    return got


@pytest.mark.parametrize("size", [1, 8, 4096, 1 << 20, 64 << 20, 1 << 30], ids=lambda s: f"{s}B")
async def test_cupy_round_trip(gpu_peer, size):
    a = pattern(size, seed=size % 13)
    b = await echo_tag(gpu_peer, a)
    assert bool(cp.array_equal(a, b))


async def test_mixed_host_and_cuda_multi(gpu_peer):
    frames = [
        np.arange(1000, dtype=np.uint8),
        pattern(1 << 20, 1),
        np.frombuffer(b"host bytes", dtype=np.uint8),
        pattern(3, 2),
        cp.empty(0, dtype=cp.uint8),
        pattern(5 << 20, 3),
    ]
    got = await echo_multi(gpu_peer, frames)
    for sent, recv in zip(frames, got):
        if isinstance(sent, np.ndarray):
            assert isinstance(recv, np.ndarray), type(recv)
            assert np.array_equal(recv, sent)
        else:
            assert isinstance(recv, ucxx_go.CudaFrame), type(recv)
            assert recv.nbytes == sent.nbytes
            assert bool(cp.array_equal(cp.asarray(recv), sent))
            # UCXX's received CUDA buffers copy to host, into a new array or a given one.
            assert np.array_equal(recv.copy_to_host(), cp.asnumpy(sent))
            into = bytearray(sent.nbytes + 1)
            assert recv.copy_to_host(into) is into and bytes(into[:sent.nbytes]) == cp.asnumpy(sent).tobytes()


async def test_recv_multi_into_frames_from_a_user_allocator(gpu_peer):
    frames = [np.arange(100, dtype=np.uint8), pattern(2 << 20, 7), pattern(17, 8)]
    allocated = []

    def from_pool(n):
        a = cp.empty(n, dtype=cp.uint8)  # cupy's memory pool
        allocated.append(a)
        return a

    def failing(n):
        raise MemoryError(f"no room for {n} bytes")

    # An allocator that fails drops that message; the stream stays in step.
    await gpu_peer.send(np.array([ECHO_MULTI, 0], dtype="<u8"))
    await gpu_peer.send_multi(frames)
    with pytest.raises(MemoryError):
        await asyncio.wait_for(gpu_peer.recv_multi(cuda_allocator=failing), GPU_TIMEOUT)
    await gpu_peer.send(np.array([ECHO_MULTI, 0], dtype="<u8"))
    await gpu_peer.send_multi(frames)
    got = await asyncio.wait_for(gpu_peer.recv_multi(cuda_allocator=from_pool), GPU_TIMEOUT)
    assert isinstance(got[0], np.ndarray) and np.array_equal(got[0], frames[0])
    assert got[1] is allocated[0] and got[2] is allocated[1]
    assert bool(cp.array_equal(got[1], frames[1])) and bool(cp.array_equal(got[2], frames[2]))


@pytest.mark.parametrize("cuda_too", [False, True], ids=["host-allocator", "both-allocators"])
async def test_recv_multi_with_host_allocator_and_cuda_frames(gpu_peer, cuda_too):
    """host_allocator takes the large host frames; CUDA frames are the engine's
    (CudaFrame) unless a cuda_allocator is given too (the engine allocates its CUDA
    frames only once the application provided the others)."""
    frames = [np.arange(100, dtype=np.uint8), pattern(1 << 20, 3), np.full(100_000, 5, dtype=np.uint8),
              pattern(17, 4)]
    host, cuda = [], []

    def host_allocator(n):
        host.append(np.empty(n, dtype=np.uint8))
        return host[-1]

    def cuda_allocator(n):
        cuda.append(cp.empty(n, dtype=cp.uint8))
        return cuda[-1]

    await gpu_peer.send(np.array([ECHO_MULTI, 0], dtype="<u8"))
    await gpu_peer.send_multi(frames)
    got = await asyncio.wait_for(
        gpu_peer.recv_multi(host_allocator=host_allocator, cuda_allocator=cuda_allocator if cuda_too else None),
        GPU_TIMEOUT)
    assert len(host) == 1 and got[2] is host[0] and np.array_equal(got[2], frames[2])
    assert isinstance(got[0], np.ndarray) and np.array_equal(got[0], frames[0])
    if cuda_too:
        assert got[1] is cuda[0] and got[3] is cuda[1]
    else:
        assert isinstance(got[1], ucxx_go.CudaFrame) and isinstance(got[3], ucxx_go.CudaFrame)
    assert bool(cp.array_equal(cp.asarray(got[1]), frames[1])) and bool(cp.array_equal(cp.asarray(got[3]), frames[3]))


async def test_send_waits_for_the_producing_stream_only(gpu_peer):
    n = 32 << 20
    a = cp.zeros(n, dtype=cp.uint8)
    cp.cuda.runtime.deviceSynchronize()
    s = cp.cuda.Stream(non_blocking=True)
    spin_on(s, 0.5)
    with s:
        a.fill(42)  # queued behind the spin: ready in about 0.5 s
        assert a.__cuda_array_interface__["stream"] == s.ptr
        await gpu_peer.send(np.array([ECHO_TAG, n], dtype="<u8"))
        out = cp.empty(n, dtype=cp.uint8)
        recv = asyncio.ensure_future(gpu_peer.recv(out))
        t0 = time.monotonic()
        # While the send waits for s, other streams run: a copy on another stream
        # completes long before s does.
        other = cp.cuda.Stream(non_blocking=True)
        with other:
            c = cp.ones(1 << 20, dtype=cp.uint8)
            c += 1
        other.synchronize()
        other_done = time.monotonic() - t0
        await asyncio.wait_for(gpu_peer.send(a), GPU_TIMEOUT)
        await asyncio.wait_for(recv, GPU_TIMEOUT)
    assert other_done < 0.25, f"another stream's work waited {other_done:.3f}s"
    cp.cuda.runtime.deviceSynchronize()
    assert bool((out == 42).all()), "the send did not wait for the stream that filled the buffer"


async def test_cancel_and_close_with_cuda_in_flight():
    release = asyncio.Event()

    async def handler(ep):
        await release.wait()  # never receives
        ep.abort()

    listener = ucxx_go.create_listener(handler)
    try:
        ep = await ucxx_go.create_endpoint("127.0.0.1", listener.port)
        buf = cp.empty(64 << 20, dtype=cp.uint8)
        [recv] = await started(ep.recv(buf))  # submitted: the cancel finds it in flight
        recv.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(recv, 10)
        big = pattern(256 << 20)
        [send] = await started(ep.send(big))  # rendezvous: nobody receives
        t0 = time.monotonic()
        await asyncio.wait_for(ep.close(timeout=2.0), 10)
        assert time.monotonic() - t0 < 5
        res = await asyncio.wait_for(asyncio.gather(send, return_exceptions=True), 10)
        assert res[0] is None or isinstance(res[0], ucxx_go.exceptions.UCXError), res
    finally:
        release.set()
        listener.close()


async def test_cuda_sends_held_back_by_flow_control_arrive_in_order(server):
    """CUDA sends that run ahead of their receiver (max_unexpected_bytes 1 MiB: flow
    control holds sends back once 512 KiB are held) wait, in order, and each arrives
    intact once received: a held-back send is posted later, in the CUDA context it
    passed the stream gate in."""
    ucxx_go.init(multi_buffer_limits={"max_unexpected_bytes": 1 << 20})
    client, srv = await server.connect()
    n, size = 64, 64 << 10
    bufs = [pattern(size, seed=i) for i in range(n)]
    sends = [asyncio.ensure_future(client.send(b, tag=7)) for b in bufs]
    await wait_for_condition(lambda: engine_stats()[4] > 0, "sends held back", timeout=GPU_TIMEOUT)
    assert engine_stats()[3] <= 1 << 20
    out = cp.empty(size, dtype=cp.uint8)
    for i in range(n):
        await asyncio.wait_for(srv.recv(out, tag=7), GPU_TIMEOUT)
        assert bool(cp.array_equal(out, bufs[i])), f"buffer {i}"
    await asyncio.wait_for(asyncio.gather(*sends), GPU_TIMEOUT)
    assert engine_stats()[3:] == (0, 0)


async def test_device_memory_returned_after_1000_receives(gpu_peer):
    pool = cp.get_default_memory_pool()
    frame = pattern(1 << 20, 5)

    async def round_trip():
        await gpu_peer.send(np.array([ECHO_MULTI, 0], dtype="<u8"))
        await gpu_peer.send_multi([frame])
        got = await gpu_peer.recv_multi()
        assert isinstance(got[0], ucxx_go.CudaFrame)

    for _ in range(20):  # warm up: UCX's registration caches, CUDA IPC mappings
        await asyncio.wait_for(round_trip(), GPU_TIMEOUT)
    gc.collect()
    pool.free_all_blocks()
    free_before, _ = cp.cuda.runtime.memGetInfo()
    for _ in range(1000):
        await asyncio.wait_for(round_trip(), GPU_TIMEOUT)
    gc.collect()  # the dropped CudaFrames are freed now: cuMemFree does not return before
    pool.free_all_blocks()
    free_after, _ = cp.cuda.runtime.memGetInfo()
    grown = free_before - free_after
    assert grown < 32 << 20, f"device memory use grew by {grown / 2**20:.1f} MiB over 1000 receives"


async def test_cuda_array_checks():
    strided = cp.arange(100, dtype=cp.uint8)[::2]
    server = ucxx_go.create_listener(lambda ep: None)
    try:
        ep = await ucxx_go.create_endpoint("127.0.0.1", server.port)
        with pytest.raises(ValueError, match="contiguous"):
            await ep.send(strided)
        ep.abort()
    finally:
        server.close()


def test_info_shows_gpus():
    info = ucxx_go.info()
    assert len(info["gpus"]) >= 1
    g = info["gpus"][0]
    assert g["name"] and g["memory_bytes"] > 0


def test_cupy_arrays_read_as_their_interface_says():
    """buffer_info reads CuPy arrays from the array itself (a fast path): the address,
    size and stream it gives equal __cuda_array_interface__'s, on the null stream and
    on another; a strided array is still refused through the interface."""
    from ucxx_go._buffers import MEMORY_CUDA, buffer_info, cuda_array_info

    base = cp.arange(64, dtype=cp.float32)
    buffer_info(base, True)  # the first CuPy array seen turns the fast path on
    import ucxx_go._buffers as buffers

    assert buffers._cupy_array is cp.ndarray, "the CuPy fast path stayed off"
    for stream in (cp.cuda.Stream.null, cp.cuda.Stream(non_blocking=True)):
        with stream:
            for a in (base, base[3:17], cp.zeros((4, 5), cp.int8), cp.empty(0, cp.float64)):
                addr, n, keep, mem, s = buffer_info(a, True)
                assert (addr, n, s) == cuda_array_info(a.__cuda_array_interface__, True), (a.shape, stream)
                assert keep is a and mem == MEMORY_CUDA
            with pytest.raises(ValueError, match="C-contiguous"):
                buffer_info(base[::2], False)
