"""Frames of a received multi-buffer message: zero-copy arrays over memory the Go core
allocated (layout: core/multi.go), freed when dropped.

Host frames live in one C allocation (malloc) holding a record and then the frames,
each 64-byte aligned and disjoint from the others: frames share no memory, but one
host frame kept alive keeps the whole block. CUDA frames are separate device
allocations, each returned as a CudaFrame and freed when it is dropped.
"""

import weakref

import numpy as np

from ._bridge import ext
from ._completions import _memory_view
from ._completions import free_block as _free

_EMPTY = np.empty(0, dtype=np.uint8)

# A frame's memory type word: core.MemHost or core.MemCUDA in the low byte, the CUDA
# device's ordinal above it.
_FRAME_CUDA = 1


def _free_cuda(device, ptr):
    try:
        ext.pybridge_FreeCUDA(device, ptr)
    except RuntimeError:
        pass  # the process is going away, or the context with it


class CudaFrame:
    """A received CUDA frame: ``nbytes`` bytes of device memory on ``device``, exposed
    through ``__cuda_array_interface__`` as a 1-D uint8 array (``cupy.asarray(frame)``
    wraps it without a copy). The memory is freed when the frame and every array
    wrapping it are gone."""

    __slots__ = ("ptr", "nbytes", "device", "_finalizer", "__weakref__")

    def __init__(self, ptr, nbytes, device):
        self.ptr = ptr
        self.nbytes = nbytes
        self.device = device
        self._finalizer = weakref.finalize(self, _free_cuda, device, ptr)

    @property
    def __cuda_array_interface__(self):
        return {
            "shape": (self.nbytes,),
            "typestr": "|u1",
            "data": (self.ptr if self.nbytes else 0, False),
            "strides": None,
            "version": 3,
            "stream": None,  # the data is complete: UCX finished writing it
        }

    def __len__(self):
        return self.nbytes

    def __repr__(self):
        return f"<ucxx_go.CudaFrame {self.nbytes} bytes on device {self.device} at {self.ptr:#x}>"


# A CUDA frame the application allocated (core.userFrameFlag): it is in `provided`.
_FRAME_USER = 1 << 16


def frames_from_block(address, provided=()):
    """Return the frames of the block at `address`: host frames as writable uint8 numpy
    arrays, CUDA frames as CudaFrame, or, where the application allocated them
    (recv_multi's cuda_allocator), the objects it allocated, taken from `provided`
    in order."""
    provided = iter(provided)
    head = _memory_view(address, 16).cast("Q")
    count, size = head[0], head[1]
    head.release()
    if count == 0:
        _free(address)
        return []
    record = _memory_view(address + 16, 24 * count).cast("Q")
    block = np.frombuffer(_memory_view(address, size), dtype=np.uint8)
    # The block's memory goes back to C once no host frame (view of `block`) is left.
    weakref.finalize(block, _free, address)
    frames = []
    for i in range(count):
        off, n, kind = record[3 * i], record[3 * i + 1], record[3 * i + 2]
        if kind & _FRAME_USER:
            frames.append(next(provided))
        elif kind & 0xFF == _FRAME_CUDA:
            frames.append(CudaFrame(off, n, kind >> 8))
        else:
            frames.append(block[off:off + n] if n else _EMPTY.copy())
    record.release()
    return frames
