"""Frames of a received multi-buffer message: zero-copy numpy arrays over the block the
Go core allocated (layout: core/multi.go), freed when the last of them is dropped.

The block is one C allocation (malloc) holding a record and then the frames, each
64-byte aligned and disjoint from the others: frames share no memory, but one frame
kept alive keeps the whole block.
"""

import weakref

import numpy as np

from ._completions import _memory_view
from ._completions import free_block as _free

_EMPTY = np.empty(0, dtype=np.uint8)


def frames_from_block(address):
    """Return the frames of the block at `address` as writable uint8 numpy arrays."""
    head = _memory_view(address, 16).cast("Q")
    count, size = head[0], head[1]
    head.release()
    if count == 0:
        _free(address)
        return []
    record = _memory_view(address + 16, 24 * count).cast("Q")
    block = np.frombuffer(_memory_view(address, size), dtype=np.uint8)
    # The block's memory goes back to C once no frame (view of `block`) is left.
    weakref.finalize(block, _free, address)
    frames = []
    for i in range(count):
        off, n = record[3 * i], record[3 * i + 1]
        frames.append(block[off:off + n] if n else _EMPTY.copy())
    record.release()
    return frames
