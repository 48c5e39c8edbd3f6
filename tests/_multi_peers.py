"""Peer processes and wire helpers for test_multi.py.

The targets run under multiprocessing's "spawn" in a fresh interpreter: each keeps UCX
on loopback before it imports ucxx_go, bounds everything it awaits, and reports through
the queue it is given.

`pack_header` builds a multi-buffer header by hand, from the layout documented at the
top of core/multiheader.go, so that tests can play a peer that does not follow it.
"""

import os

os.environ.setdefault("UCX_NET_DEVICES", "lo")

import asyncio  # noqa: E402
import struct  # noqa: E402

from _support import PEER_DEADLINE  # noqa: E402  (tests/ is on a spawned peer's sys.path)

# core.MultiTagBit: a plain send whose tag has it set lands on the peer's multi-buffer
# stream of that tag.
MULTI_BIT = 1 << 63
HEADER_MAGIC = 0x4d475855  # "UXGM"
HEADER_VERSION = 2
HEADER_MORE = 1  # flags bit 0: another header follows
HEADER_INLINE = 2  # flags bit 1: the small host frames follow the header in its message
GATHER_MAX_FRAME = 16 << 10  # host frames smaller than this are small: they travel together
FRAMES_PER_HEADER = 112


def pack_header(sizes, total=None, flags=0, types=None, count=None, magic=HEADER_MAGIC, version=HEADER_VERSION):
    """One header: magic u32, version u8, flags u8, count u16, total u64, then the
    sizes (u64 each) and the memory types (u8 each), little-endian.

    `count` and `total` default to len(sizes); `types` to host memory (0) for each frame.
    """
    count = len(sizes) if count is None else count
    total = len(sizes) if total is None else total
    types = bytes(len(sizes)) if types is None else bytes(types)
    return (
        struct.pack("<IBBHQ", magic, version, flags, count, total)
        + struct.pack(f"<{len(sizes)}Q", *sizes)
        + types
    )


def raw_tag(ep):
    """The tag on which a plain send from `ep` reaches the peer's default multi-buffer stream."""
    return ep._send_tag | MULTI_BIT


def connect_then_hang(port, ready_queue, partial, frame_size):
    """Connect to `port`; with `partial`, send the header of a message of two frames of
    `frame_size` bytes and not its frames (they would come as one gathered message).
    Then send a 1-byte plain message (a barrier: once the parent has it, it has what
    came before), put True on `ready_queue` and wait until killed.
    """
    import ucxx_go

    async def main():
        ep = await asyncio.wait_for(ucxx_go.create_endpoint("127.0.0.1", port), PEER_DEADLINE)
        if partial:
            tag = raw_tag(ep)
            header = pack_header([frame_size, frame_size])
            await asyncio.wait_for(ep.send(header, tag=tag, force_tag=True), PEER_DEADLINE)
        await asyncio.wait_for(ep.send(b"!"), PEER_DEADLINE)
        ready_queue.put(True)
        # Never set: the parent kills this process while it waits (the deadline only
        # bounds a peer whose parent went away).
        await asyncio.wait_for(asyncio.Event().wait(), PEER_DEADLINE)

    asyncio.run(main())
