"""Frames of a received multi-buffer or active message: zero-copy arrays over memory the
Go core allocated (layout: core/block.go), freed when dropped.

Host frames live in one C allocation (malloc) holding a record and then the frames,
each BLOCK_ALIGN-aligned and disjoint from the others: frames share no memory, but one
host frame kept alive keeps the whole block; those the receive asked to own
(recv_multi's own_host_min, FRAME_OWN_FLAG) are allocations of their own that the Go
core lent, each given back (to its cache of received frames) when its last array is
dropped. CUDA frames are separate device allocations, each
returned as a CudaFrame and freed when it is dropped. Frames the application allocated
(recv_multi's allocators) are what it allocated.

This module is Python's one reader of the block's record (_record).
"""

import ctypes
import weakref

import numpy as np

from . import _constants as C
from ._bridge import call, ext
from ._completions import _memory_view
from .exceptions import UCXForkError

# A block is one C malloc (core/block.go): it goes back with free().
_free = ctypes.CDLL(None).free
_free.argtypes = (ctypes.c_void_p,)
_free.restype = None

_EMPTY = np.empty(0, dtype=np.uint8)

# A frame's memory type word: core.MemHost or core.MemCUDA in the bits below
# FRAME_DEVICE_SHIFT; for a CUDA frame the device's ordinal from there, or
# FRAME_USER_FLAG for one the application allocated (it is in `provided`).
_MEM_TYPE_MASK = (1 << C.FRAME_DEVICE_SHIFT) - 1

# The words of the record _record reads: a header of (frame count, block size), then
# (location, size, memory type word) per frame. Go names their sizes only: if those
# change, so must _record.
if (C.BLOCK_HEADER_WORDS, C.BLOCK_FRAME_RECORD_WORDS) != (2, 3):
    raise ImportError("ucxx_go._frames: core/block.go's record changed; update _frames._record")


def free_block(address):
    """Return a block the Go core allocated, and the frames it allocated outside it, to
    their allocators: the release of a request whose result is a block nobody took
    (_request.Request). Frames the application allocated are left to it."""
    for loc, _, kind in _record(address)[1]:
        if kind & C.FRAME_USER_FLAG or loc == 0:
            continue
        if kind & C.FRAME_OWN_FLAG:
            _release_host_frame(loc)
        elif kind & _MEM_TYPE_MASK == C.MEM_CUDA:
            _free_cuda(kind >> C.FRAME_DEVICE_SHIFT, loc)
    _free(address)


def _own_host_frame(address, n):
    """A writable uint8 array over the host frame of n bytes at `address`, lent by the
    Go core, which goes back to it once the array and every view of it are gone."""
    frame = np.frombuffer(_memory_view(address, n), dtype=np.uint8)
    weakref.finalize(frame, _release_host_frame, address)
    return frame


def _release_host_frame(address):
    try:
        ext.pybridge_ReleaseHostFrame(address)
    except UCXForkError:
        _free(address)  # a child forked after first use: its copy of the C malloc is its own
    except RuntimeError:
        pass  # the process is going away


def _free_cuda(device, ptr):
    try:
        ext.pybridge_FreeCUDA(device, ptr)
    except (RuntimeError, UCXForkError):
        pass  # the process is going away, or the context with it, or a forked child's Go runtime


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

    def copy_to_host(self, ary=None):
        """Copy the frame to host memory, as UCXX's received CUDA buffers do: into
        ``ary`` (anything writable of at least ``nbytes`` bytes) or a new numpy uint8
        array, which is returned."""
        if ary is None:
            ary = np.empty(self.nbytes, dtype=np.uint8)
        view = memoryview(ary).cast("B")
        if view.readonly or view.nbytes < self.nbytes:
            raise ValueError(f"copy_to_host needs a writable buffer of at least {self.nbytes} bytes")
        if self.nbytes:
            dst = np.frombuffer(view, dtype=np.uint8).__array_interface__["data"][0]
            call(ext.pybridge_CopyCUDAToHost, self.device, dst, self.ptr, self.nbytes)
        return ary

    def __repr__(self):
        return f"<ucxx_go.CudaFrame {self.nbytes} bytes on device {self.device} at {self.ptr:#x}>"


def _record(address):
    """Read the record at the start of the block at `address` (core/block.go).

    Returns (size of the block in bytes, [(location, size, memory type word) of each
    frame]).
    """
    head = _memory_view(address, C.BLOCK_HEADER_SIZE).cast("Q")
    count, size = head[0], head[1]
    head.release()
    if count == 0:
        return size, []
    words = _memory_view(address + C.BLOCK_HEADER_SIZE, C.BLOCK_FRAME_RECORD_SIZE * count).cast("Q")
    flat = words.tolist()
    words.release()
    # Each frame's BLOCK_FRAME_RECORD_WORDS words: location, size, memory type word.
    fields = iter(flat)
    return size, list(zip(fields, fields, fields))


def frames_to_provide(address):
    """The frames of the block at `address` that the application allocates, in order,
    as (size, core.MemHost or core.MemCUDA): what recv_multi's allocators must
    allocate once the header has arrived (core/frames.go)."""
    return [(n, kind & _MEM_TYPE_MASK) for loc, n, kind in _record(address)[1]
            if kind & C.FRAME_USER_FLAG and loc == 0]


def frames_from_block(address, provided=()):
    """Return the frames of the block at `address`: host frames as writable uint8 numpy
    arrays, CUDA frames as CudaFrame, or, where the application allocated them
    (recv_multi's allocators), the objects it allocated, taken from `provided` in
    order. The block is theirs from now on: freed with the last host frame in it, and
    each frame the engine allocated outside it with that frame."""
    size, record = _record(address)
    if not record:
        _free(address)
        return []
    provided = iter(provided)
    block = np.frombuffer(_memory_view(address, size), dtype=np.uint8)
    # The block's memory goes back to C once no host frame (view of `block`) is left.
    weakref.finalize(block, _free, address)
    frames = []
    for off, n, kind in record:
        if kind & C.FRAME_USER_FLAG:
            frames.append(next(provided))
        elif kind & C.FRAME_OWN_FLAG:
            frames.append(_own_host_frame(off, n))
        elif kind & _MEM_TYPE_MASK == C.MEM_CUDA:
            frames.append(CudaFrame(off, n, kind >> C.FRAME_DEVICE_SHIFT))
        else:
            frames.append(block[off:off + n] if n else _EMPTY.copy())
    return frames
