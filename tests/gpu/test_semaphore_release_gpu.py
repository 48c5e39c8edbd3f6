"""A semaphore released while GPU streams wait on it, or while a thread queues a stream
wait on it: a stream already waiting is let through (no hang), a stream wait after the
release is refused with UCXNoElemError and touches nothing, and the two racing each
other from two threads, many times, do either and never crash the process.
Skipped where cupy or a GPU is missing."""

import asyncio
import threading

import pytest

from _support import cupy_gpus

cp, _GPUS = cupy_gpus()

import ucxx_go  # noqa: E402
from ucxx_go.exceptions import UCXNoElemError  # noqa: E402
from _support import GPU_TIMEOUT, Server  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_sided")


async def _synchronize(stream):
    await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(None, stream.synchronize), 30)


async def test_release_lets_a_waiting_stream_through():
    server = Server()
    try:
        _, ep = await server.connect()
        sem = ep.semaphore()
        stream = cp.cuda.Stream(non_blocking=True)
        flag = cp.zeros(1, dtype=cp.int64)
        cp.cuda.get_current_stream().synchronize()
        assert await sem.wait(5, stream=stream) is None
        with stream:
            flag += 1  # queued behind the wait
        assert not stream.done, "the stream ran past a wait whose value was not reached"
        sem.release()  # the stream must not hang on a counter that is gone
        await _synchronize(stream)
        assert int(flag.get()[0]) == 1
    finally:
        server.close()


async def test_stream_wait_after_release_is_refused():
    server = Server()
    try:
        _, ep = await server.connect()
        sem = ep.semaphore()
        sem.release()
        stream = cp.cuda.Stream(non_blocking=True)
        with pytest.raises(UCXNoElemError):
            await sem.wait(1, stream=stream)
        with stream:
            cp.zeros(1) + 1  # the stream still works
        await _synchronize(stream)
    finally:
        server.close()


async def test_release_races_stream_waits_from_another_thread():
    server = Server()
    try:
        _, ep = await server.connect()
        streams = [cp.cuda.Stream(non_blocking=True) for _ in range(3)]
        outcomes = {"queued": 0, "refused": 0}
        failures = []
        for i in range(200):
            sem = ep.semaphore()
            go = threading.Event()

            def wait_on_stream(sem=sem, stream=streams[i % 3]):
                cp.cuda.Device(0).use()  # the stream's context current on this thread
                go.wait()
                try:
                    asyncio.run(sem.wait(1, stream=stream))
                    outcomes["queued"] += 1
                except UCXNoElemError:
                    outcomes["refused"] += 1
                except Exception as e:  # noqa: BLE001 - reported below
                    failures.append(e)

            t = threading.Thread(target=wait_on_stream)
            t.start()
            go.set()
            sem.release()
            t.join(GPU_TIMEOUT)
            assert not t.is_alive()
        assert not failures, failures
        for stream in streams:
            await _synchronize(stream)  # every wait that was queued was let through
        assert outcomes["queued"] + outcomes["refused"] == 200
    finally:
        server.close()
