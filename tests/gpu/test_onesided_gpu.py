"""One-sided transfers of CUDA memory between two processes on one GPU (cuda_ipc):
the peer puts into this process's registered CUDA buffer, signals its semaphore, and
gets the buffer back; put_many and flush; puts bytes a busy stream writes
(put(stream=)); then a CUDA stream waits on the device for its next signal.
Skipped where cupy or a GPU is missing."""

import asyncio
import multiprocessing

import numpy as np
import pytest

from _support import cupy_gpus

cp, _GPUS = cupy_gpus()

import ucxx_go  # noqa: E402
from _gpu_peers import MANY_PUT_SIZE, MANY_PUT_VALUES, STREAM_PUT_SIZE, STREAM_PUT_VALUE, one_sided_peer  # noqa: E402
from _support import GPU_TIMEOUT, Server  # noqa: E402

SIZES = [8, 1 << 20, 64 << 20]

pytestmark = pytest.mark.usefixtures("one_sided")


async def test_put_get_signal_cuda_between_processes():
    server = Server()
    proc = multiprocessing.get_context("spawn").Process(target=one_sided_peer, args=(server.listener.port, SIZES),
                                                        daemon=True)
    proc.start()
    try:
        ep = await asyncio.wait_for(server.accepted.get(), GPU_TIMEOUT)
        target = cp.zeros(max(SIZES), dtype=cp.uint8)
        region = ucxx_go.register(target)
        sem = ep.semaphore()
        await ep.send_obj(region.pack())
        await ep.send_obj(sem.pack())
        for i, size in enumerate(SIZES):
            await asyncio.wait_for(sem.wait(i + 1), GPU_TIMEOUT)
            want = ((cp.arange(size, dtype=cp.int64) * 7 + i) % 251).astype(cp.uint8)
            assert bool(cp.array_equal(target[:size], want)), f"{size} B put not in place"
            target[:size] = want * 2
            cp.cuda.get_current_stream().synchronize()
            await ep.send(np.zeros(8, dtype="u1"))
            total = np.empty(1, dtype="<u8")
            await asyncio.wait_for(ep.recv(total), GPU_TIMEOUT)
            assert int(total[0]) == int((want * 2).astype(cp.uint64).sum()), f"{size} B get read other bytes"
        # put_many of two halves, then a flush: both land at their offsets.
        await asyncio.wait_for(sem.wait(len(SIZES) + 1), GPU_TIMEOUT)
        half = MANY_PUT_SIZE // 2
        for k in range(2):
            landed = target[k * half:(k + 1) * half]
            assert bool((landed == MANY_PUT_VALUES[k]).all()), f"put_many's part {k} not in place"
        # put(stream=): the peer's bytes were written on a stream still busy when it
        # called put; what lands is what that stream wrote.
        await asyncio.wait_for(sem.wait(len(SIZES) + 2), GPU_TIMEOUT)
        landed = target[MANY_PUT_SIZE:MANY_PUT_SIZE + STREAM_PUT_SIZE]
        assert bool((landed == STREAM_PUT_VALUE).all()), "put(stream=) moved bytes before the stream wrote them"
        # A stream waits on the device for the peer's next signal; the host does not.
        stream = cp.cuda.Stream(non_blocking=True)
        flag = cp.zeros(1, dtype=cp.int64)
        cp.cuda.get_current_stream().synchronize()
        assert await sem.wait(len(SIZES) + 3, stream=stream) is None
        try:
            with stream:
                flag += 1  # queued behind the wait
            await asyncio.sleep(0.2)
            ran_early = stream.done
        finally:
            await ep.send(np.zeros(8, dtype="u1"))  # the peer signals now (a stuck stream would hang the exit)
        assert not ran_early, "the stream ran past a wait whose value was not reached"
        await asyncio.get_running_loop().run_in_executor(None, stream.synchronize)
        assert int(flag.get()[0]) == 1
        await asyncio.get_running_loop().run_in_executor(None, proc.join, GPU_TIMEOUT)
        assert proc.exitcode == 0
    finally:
        if proc.is_alive():
            proc.kill()
        server.close()
