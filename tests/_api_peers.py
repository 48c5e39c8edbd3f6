"""Peer processes for test_api_more.py: targets for multiprocessing's "spawn".

Each target runs in a fresh interpreter: it keeps UCX on loopback before it imports
ucxx_go, bounds everything it awaits, and exits 0 only when it did its part (an
exception or a wrong payload gives a non-zero exit code for the parent to assert).
"""

import os

os.environ.setdefault("UCX_NET_DEVICES", "lo")

import asyncio  # noqa: E402
import sys  # noqa: E402

from _support import PEER_DEADLINE  # noqa: E402  (tests/ is on a spawned peer's sys.path)

# Exit codes that say which check failed.
EXIT_WRONG_PAYLOAD = 3
EXIT_NOT_REJECTED = 4
EXIT_WRONG_ERROR = 5


def exit_with(main):
    """Run the coroutine function `main` and exit with the code it returns, once
    ucxx_go's context is reset."""
    import ucxx_go

    code = asyncio.run(main())
    ucxx_go.reset()
    sys.exit(code)


def worker_address_peer(in_queue, out_queue, to_parent_tag, from_parent_tag, payload, reply):
    """Talk to the parent by worker address, with no listener on either side.

    Gets the parent's UCXAddress (pickled) from `in_queue`, puts its own on
    `out_queue`, sends `payload` to the parent with ``tag=to_parent_tag,
    force_tag=True``, then receives the parent's `reply` with the worker-level
    ``ucxx_go.recv`` on `from_parent_tag`.
    """
    import numpy as np

    import ucxx_go

    async def main():
        parent = in_queue.get(timeout=PEER_DEADLINE)
        assert isinstance(parent, ucxx_go.UCXAddress), type(parent)
        out_queue.put(ucxx_go.get_worker_address())
        ep = await asyncio.wait_for(ucxx_go.create_endpoint_from_worker_address(parent), PEER_DEADLINE)
        try:
            await asyncio.wait_for(ep.send(payload, tag=to_parent_tag, force_tag=True), PEER_DEADLINE)
            buf = np.zeros(len(reply), dtype="u1")
            await asyncio.wait_for(ucxx_go.recv(buf, from_parent_tag), PEER_DEADLINE)
            if buf.tobytes() != reply:
                return EXIT_WRONG_PAYLOAD
        finally:
            await asyncio.wait_for(ep.close(), PEER_DEADLINE)
        return 0

    exit_with(main)


def connect_to_garbage_address(address):
    """create_endpoint_from_worker_address(`address`) must raise a UCXError: exit 0 when
    it does (the process survives and can still connect to its own worker)."""
    import ucxx_go

    async def main():
        try:
            ep = await asyncio.wait_for(ucxx_go.create_endpoint_from_worker_address(address), PEER_DEADLINE)
        except ucxx_go.UCXError:
            pass
        except Exception as e:  # rejected, but not the way the API documents
            print(f"wrong error: {type(e).__name__}: {e}", file=sys.stderr)
            return EXIT_WRONG_ERROR
        else:
            ep.abort()
            return EXIT_NOT_REJECTED
        # Still fine: an endpoint to our own worker carries a message.
        ep = await asyncio.wait_for(ucxx_go.create_endpoint_from_worker_address(ucxx_go.get_worker_address()), PEER_DEADLINE)
        try:
            buf = bytearray(4)
            await asyncio.wait_for(
                asyncio.gather(ucxx_go.recv(buf, 77), ep.send(b"live", tag=77, force_tag=True)), PEER_DEADLINE
            )
            if bytes(buf) != b"live":
                return EXIT_WRONG_PAYLOAD
        finally:
            await asyncio.wait_for(ep.close(), PEER_DEADLINE)
        return 0

    exit_with(main)
