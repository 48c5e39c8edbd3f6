"""Peer processes for the multi-process tests: targets for multiprocessing's "spawn".

Each target runs in a fresh interpreter, so it keeps UCX on loopback before it imports
ucxx_go, bounds everything it awaits, and reports through the queues it is given. A
target's exit code is what the parent asserts: 0 when it did its part.
"""

import os

os.environ.setdefault("UCX_NET_DEVICES", "lo")

import asyncio  # noqa: E402
import struct  # noqa: E402

from _support import PEER_DEADLINE  # noqa: E402  (tests/ is on a spawned peer's sys.path)


async def echo_messages(ep, count):
    """Echo `count` messages, each announced by its 8-byte little-endian size."""
    import numpy as np

    for _ in range(count):
        size = np.empty(1, dtype="<u8")
        await ep.recv(size)
        buf = np.empty(int(size[0]), dtype="u1")
        await ep.recv(buf)
        await ep.send(buf)
    await ep.close()


def echo_server(port_queue, connections, messages, tls=None, error_handling=True):
    """Listen, put the port on `port_queue`, echo `messages` messages on each of
    `connections` connections, then exit 0.

    `tls`, when given, is UCX_TLS for this process; `error_handling` is the listener's
    endpoint_error_handling."""
    import ucxx_go

    async def main():
        if tls is not None:
            ucxx_go.init(options={"TLS": tls})
        done = asyncio.Queue()
        failures = []

        async def handler(ep):
            try:
                await echo_messages(ep, messages)
            except BaseException as e:
                failures.append(e)
                ep.abort()
                raise
            finally:
                done.put_nowait(None)

        listener = ucxx_go.create_listener(handler, endpoint_error_handling=error_handling)
        port_queue.put(listener.port)
        try:
            for _ in range(connections):
                await asyncio.wait_for(done.get(), PEER_DEADLINE)
        finally:
            listener.close()
        if failures:
            raise failures[0]

    asyncio.run(main())
    ucxx_go.reset()


def loop_multi_echo_server(port_queue, messages):
    """In loop mode (UCXGO_PROGRESS_MODE=loop, Dask's on few CPUs), listen, put the port
    on `port_queue`, echo `messages` multi-buffer messages (recv_multi as Dask's comm
    reads, send_multi back) on one connection, then exit 0."""
    import ucxx_go

    async def main():
        ucxx_go.init(engine_progress="loop")
        done = asyncio.get_running_loop().create_future()

        async def handler(ep):
            try:
                for _ in range(messages):
                    frames = await asyncio.wait_for(ep.recv_multi(own_host_min=64 << 10), PEER_DEADLINE)
                    await asyncio.wait_for(ep.send_multi(frames), PEER_DEADLINE)
                done.set_result(None)
            except BaseException as e:
                done.set_exception(e)
                ep.abort()
                raise

        listener = ucxx_go.create_listener(handler)
        port_queue.put(listener.port)
        try:
            await asyncio.wait_for(done, PEER_DEADLINE)
        finally:
            listener.close()

    asyncio.run(main())
    ucxx_go.reset()


def connect_and_hang(port, ready_queue):
    """Connect to `port`, say so on `ready_queue`, then wait until killed."""
    import ucxx_go

    async def main():
        ep = await asyncio.wait_for(ucxx_go.create_endpoint("127.0.0.1", port), PEER_DEADLINE)
        ready_queue.put(ep.local_address)
        # Never set: the parent kills this process while it waits (the deadline only
        # bounds a peer whose parent went away).
        await asyncio.wait_for(asyncio.Event().wait(), PEER_DEADLINE)

    asyncio.run(main())


def send_tagged(port, report_queue, tag, payload, decoy):
    """Connect to `port`, send `decoy` with a tag other than `tag` and then `payload`
    with `tag`; wait for the parent's 1-byte acknowledgement, close, exit 0.

    Puts hash(tag) on `report_queue` first, so the parent can check that this process's
    string hashing differs from its own.
    """
    import ucxx_go

    report_queue.put(hash(tag))

    async def main():
        ep = await asyncio.wait_for(ucxx_go.create_endpoint("127.0.0.1", port), PEER_DEADLINE)
        await asyncio.wait_for(ep.send(decoy, tag=(tag, "not-this-one")), PEER_DEADLINE)
        await asyncio.wait_for(ep.send(payload, tag=tag), PEER_DEADLINE)
        ack = bytearray(1)
        await asyncio.wait_for(ep.recv(ack), PEER_DEADLINE)
        await asyncio.wait_for(ep.close(), PEER_DEADLINE)

    asyncio.run(main())
    ucxx_go.reset()


def pack_size(n):
    """The 8-byte size header of the echo protocol."""
    return struct.pack("<Q", n)
