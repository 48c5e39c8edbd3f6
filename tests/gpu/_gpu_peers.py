"""The GPU tests' peer process (a target for multiprocessing's "spawn"): a server that
echoes what it is sent, on the same GPU as the test.

Protocol, per request: the client sends a control message, two little-endian u64
(command, size); then
- ECHO_TAG: the client sends `size` bytes (CUDA); the server receives them into a new
  cupy array and sends them back;
- ECHO_MULTI: the client sends a multi-buffer message; the server sends back the
  frames recv_multi gave it (CUDA frames as they are, host frames as they are);
- QUIT: the server closes the endpoint and exits 0.
"""

import os

os.environ.setdefault("UCX_NET_DEVICES", "lo")

import asyncio  # noqa: E402

from _support import GPU_TIMEOUT  # noqa: E402  (tests/ is on a spawned peer's sys.path)

ECHO_TAG, ECHO_MULTI, QUIT = 1, 2, 3


def serve(port_queue):
    import cupy as cp
    import numpy as np

    import ucxx_go

    async def main():
        done = asyncio.get_running_loop().create_future()

        async def handler(ep):
            try:
                while True:
                    ctl = np.empty(2, dtype="<u8")
                    await asyncio.wait_for(ep.recv(ctl), GPU_TIMEOUT)
                    command, size = int(ctl[0]), int(ctl[1])
                    if command == ECHO_TAG:
                        buf = cp.empty(size, dtype=cp.uint8)
                        await asyncio.wait_for(ep.recv(buf), GPU_TIMEOUT)
                        await asyncio.wait_for(ep.send(buf), GPU_TIMEOUT)
                    elif command == ECHO_MULTI:
                        frames = await asyncio.wait_for(ep.recv_multi(), GPU_TIMEOUT)
                        await asyncio.wait_for(ep.send_multi(frames), GPU_TIMEOUT)
                    else:
                        break
                await ep.close()
                done.set_result(None)
            except BaseException as e:
                ep.abort()
                if not done.done():
                    done.set_exception(e)
                raise

        listener = ucxx_go.create_listener(handler)
        port_queue.put(listener.port)
        try:
            await asyncio.wait_for(done, GPU_TIMEOUT * 4)
        finally:
            listener.close()

    asyncio.run(main())


STREAM_PUT_SIZE = 1 << 20
STREAM_PUT_VALUE = 99
MANY_PUT_SIZE = 2 << 20
MANY_PUT_VALUES = (17, 34)


def one_sided_peer(port, sizes):
    """Connects to the test, receives the packed keys of its CUDA buffer and
    semaphore, then for each size: puts a pattern into the buffer (from its own CUDA
    memory), signals, and gets the test's answer back into CUDA memory, sending its
    sum; then put_many's two halves of MANY_PUT_SIZE bytes (MANY_PUT_VALUES) and a flush,
    and signals; then puts STREAM_PUT_SIZE bytes of STREAM_PUT_VALUE written on a busy
    stream (put(stream=)) after them, signals, and signals once more when the test asks. Exits 0."""
    import cupy as cp
    import numpy as np

    import ucxx_go

    async def main():
        ep = await asyncio.wait_for(ucxx_go.create_endpoint("127.0.0.1", port), GPU_TIMEOUT)
        remote = ep.unpack_remote(await asyncio.wait_for(ep.recv_obj(), GPU_TIMEOUT))
        rsem = ep.unpack_semaphore(await asyncio.wait_for(ep.recv_obj(), GPU_TIMEOUT))
        for i, size in enumerate(sizes):
            src = ((cp.arange(size, dtype=cp.int64) * 7 + i) % 251).astype(cp.uint8)
            cp.cuda.get_current_stream().synchronize()
            await asyncio.wait_for(ep.put(ucxx_go.register(src), remote), GPU_TIMEOUT)
            await asyncio.wait_for(rsem.signal(), GPU_TIMEOUT)
            # The test answers by doubling the data in place, then signals us by a send.
            await asyncio.wait_for(ep.recv(np.empty(8, dtype="u1")), GPU_TIMEOUT)
            back = cp.empty(size, dtype=cp.uint8)
            await asyncio.wait_for(ep.get(back, remote), GPU_TIMEOUT)
            await asyncio.wait_for(ep.send(np.array([int(back.astype(cp.uint64).sum())], dtype="<u8")), GPU_TIMEOUT)
        # put_many of CUDA memory: two halves at their offsets in one call, then flush.
        halves = [cp.full(MANY_PUT_SIZE // 2, MANY_PUT_VALUES[k], dtype=cp.uint8) for k in range(2)]
        cp.cuda.get_current_stream().synchronize()
        await asyncio.wait_for(
            ep.put_many([(halves[0], remote, 0), (halves[1], remote, MANY_PUT_SIZE // 2)]), GPU_TIMEOUT)
        await asyncio.wait_for(ep.flush(), GPU_TIMEOUT)
        await asyncio.wait_for(rsem.signal(), GPU_TIMEOUT)
        # A put ordered after a stream: the bytes it moves are written by work still
        # queued behind a busy kernel when put is called (no host synchronisation).
        from _cuda_spin import spin_on

        src = cp.zeros(STREAM_PUT_SIZE, dtype=cp.uint8)
        cp.cuda.get_current_stream().synchronize()
        stream = cp.cuda.Stream(non_blocking=True)
        spin_on(stream, 0.3)
        with stream:
            src.fill(STREAM_PUT_VALUE)
        await asyncio.wait_for(ep.put(src, remote, offset=MANY_PUT_SIZE, stream=stream), GPU_TIMEOUT)
        await asyncio.wait_for(rsem.signal(), GPU_TIMEOUT)
        # Last: one more signal once the test says its stream waits for it.
        await asyncio.wait_for(ep.recv(np.empty(8, dtype="u1")), GPU_TIMEOUT)
        await asyncio.wait_for(rsem.signal(), GPU_TIMEOUT)
        await ep.close()

    asyncio.run(main())
