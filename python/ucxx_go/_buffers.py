"""Buffer adapters: the address, size and memory type of a user's buffer, without copying.

Host memory: anything with the buffer protocol (bytes, bytearray, memoryview, numpy,
array). CUDA memory: anything with ``__cuda_array_interface__`` (cupy, numba, torch),
version 2 or 3. The caller keeps the returned keep-alive object referenced until the
operation ends: while a memoryview export exists the buffer cannot be resized or freed,
and the CUDA array owns its device memory.
"""

import ctypes
import math
import re

from ._constants import UCS_MEMORY_TYPE_CUDA, UCS_MEMORY_TYPE_HOST

# A buffer's memory type as buffer_info returns it: UCX's (ucs_memory_type_t), what
# TagSend, TagRecv and AMSend take. (Frame descriptors and block records use the Go
# core's own, _constants.MEM_HOST and MEM_CUDA.)
MEMORY_HOST = UCS_MEMORY_TYPE_HOST
MEMORY_CUDA = UCS_MEMORY_TYPE_CUDA

# A CUDA buffer's stream, as __cuda_array_interface__ v3 gives it: NO_STREAM means its
# data is ready (no "stream" key, or None); 1 is the legacy default stream, 2 the
# per-thread default stream, anything else a cudaStream_t. The Go core waits for the
# stream's work (an event recorded on it) before UCX touches the memory.
NO_STREAM = 0

_c_char_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def buffer_info(obj, writable):
    """Return (address, nbytes, keepalive, memory type, stream) for a contiguous host
    or CUDA buffer.

    Raises
    ------
    TypeError
        `obj` is neither a buffer nor a CUDA array, or `writable` is asked of a
        read-only one.
    ValueError
        The buffer is not contiguous, or its CUDA array interface is malformed.
    """
    if type(obj) is _numpy_array:
        fields = _array_fields(_id(obj))
        flags = fields.flags
        if flags & _C_CONTIGUOUS and (flags & _WRITEABLE or not writable) and fields.descr in _plain_dtypes:
            n = obj.nbytes
            return (fields.data if n else 0), n, obj, MEMORY_HOST, NO_STREAM
    if type(obj) is _cupy_array and obj.flags.c_contiguous:
        n = obj.nbytes
        stream = _cupy_stream_ptr()
        return (obj.data.ptr if n else 0), n, obj, MEMORY_CUDA, stream if stream else _cupy_null_stream
    try:
        mv = memoryview(obj)
    except TypeError:
        cai = getattr(obj, "__cuda_array_interface__", None)
        if cai is None:
            raise TypeError(
                f"expected an object with the buffer protocol (bytes, bytearray, memoryview, numpy "
                f"array) or __cuda_array_interface__ (cupy, numba, torch), got {type(obj).__name__}"
            ) from None
        addr, n, stream = cuda_array_info(cai, writable, type(obj).__name__)
        if _cupy_array is None:
            _find_cupy_array(obj)
        return addr, n, obj, MEMORY_CUDA, stream
    addr, n, keep = _host(obj, mv, writable)
    if _numpy_array is None:
        _find_numpy_array(type(obj))
    if type(obj) is _numpy_array and len(_plain_dtypes) < _PLAIN_DTYPES_MAX:
        _plain_dtypes[_array_fields(id(obj)).descr] = obj.dtype  # _host refused Python objects
    return addr, n, keep, MEMORY_HOST, NO_STREAM


# NumPy arrays, the common case, skip the buffer protocol (a memoryview and a ctypes
# object a call, 1-1.4 µs): the address and flags are read from the array object
# itself, the head of NumPy's PyArrayObject_fields (numpy/ndarraytypes.h). That
# layout is NumPy's ABI: compiled extensions read it through PyArray_DATA and
# PyArray_FLAGS. The keep-alive is the array: while it is referenced NumPy refuses
# to resize it in place (the refcheck), so its memory stays. _find_numpy_array checks
# the layout against NumPy's own answers on first sight of an array and leaves the
# fast path off if they differ. Only numpy.ndarray itself takes it, not subclasses,
# and only for element types seen before through the buffer protocol (which refuses
# Python objects): _plain_dtypes maps the address of each such dtype to the dtype,
# kept alive so that the address stays its.
_C_CONTIGUOUS = 0x0001  # NPY_ARRAY_C_CONTIGUOUS
_WRITEABLE = 0x0400  # NPY_ARRAY_WRITEABLE
_numpy_array = None  # numpy.ndarray once checked; _NoArray if the check failed
_plain_dtypes = {}
_PLAIN_DTYPES_MAX = 256
_id = id


class _ArrayFields(ctypes.Structure):
    _fields_ = [
        ("ob_head", ctypes.c_byte * object.__basicsize__),
        ("data", ctypes.c_void_p),
        ("nd", ctypes.c_int),
        ("dimensions", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("base", ctypes.c_void_p),
        ("descr", ctypes.c_void_p),
        ("flags", ctypes.c_int),
    ]


_array_fields = _ArrayFields.from_address


class _NoArray:
    """Matches no object's type: the fast path is off."""


def _find_numpy_array(t):
    """Turn the NumPy fast path on if t is numpy.ndarray and the array layout reads
    as NumPy says (off for good if not)."""
    global _numpy_array
    if t.__name__ != "ndarray" or t.__module__ != "numpy":
        return
    import numpy

    ok = True
    base = numpy.arange(16, dtype=numpy.uint8)
    for a in (base, base[2:10], base[::2], numpy.frombuffer(b"0123", dtype=numpy.uint8), numpy.zeros((3, 4)).T):
        fields = _array_fields(id(a))
        ok = ok and fields.data == a.__array_interface__["data"][0] and fields.nd == a.ndim and \
            bool(fields.flags & _C_CONTIGUOUS) == a.flags.c_contiguous and \
            bool(fields.flags & _WRITEABLE) == a.flags.writeable
    _numpy_array = numpy.ndarray if ok and t is numpy.ndarray else _NoArray


# CuPy arrays, the common CUDA case, skip __cuda_array_interface__ (a dict built per
# look, with the dtype's descr: 3-5 µs of a 40 µs small GPU collective): a C-contiguous
# cupy.ndarray's address, size and stream are read from the array and CuPy's current
# stream, as the interface (version 3) gives them: data.ptr, nbytes, and the current
# stream's handle, the null stream's being reported as the legacy (1) or per-thread
# (2) default stream, whichever the interface reports for it. _find_cupy_array turns
# the fast path on at the first CuPy array seen through the interface, if the fast
# answers equal the interface's for a few arrays on the null stream and another
# (an interface of version 2 has no stream: the answers differ, it stays off).
# CuPy arrays are always writable.
_cupy_array = None  # cupy.ndarray once checked; _NoArray if the check failed
_cupy_null_stream = NO_STREAM
_cupy_stream_ptr = None


def _find_cupy_array(obj):
    """Turn the CuPy fast path on if obj is a cupy.ndarray and the fast answers agree
    with the interface's (off for good if not; an empty obj, whose memory is no address,
    leaves the question for the next array). The arrays it asks about are views of
    obj's memory: nothing is allocated from CuPy's pool, and nothing is queued on the
    caller's stream (a kernel's first launch waits for the device, so a kernel here
    would make a stream-ordered call behind busy work wait for that work)."""
    global _cupy_array, _cupy_null_stream, _cupy_stream_ptr
    t = type(obj)
    if t.__name__ != "ndarray" or not t.__module__.startswith("cupy") or not obj.nbytes:
        return
    _cupy_array = _NoArray
    try:
        import cupy

        ptr = getattr(cupy.cuda.stream, "get_current_stream_ptr", None)
        if ptr is None:
            def ptr():
                return cupy.cuda.get_current_stream().ptr
        mem = obj.data
        base = cupy.ndarray((16,), cupy.uint8, memptr=mem)
        arrays = (base, base[2:10], cupy.ndarray((3, 4), cupy.float32, memptr=mem),
                  cupy.ndarray((0,), cupy.float64, memptr=mem))
        with cupy.cuda.Stream.null:
            null = cuda_array_info(base.__cuda_array_interface__, False)[2]
        ok = t is cupy.ndarray and null != NO_STREAM
        for stream in (cupy.cuda.Stream.null, cupy.cuda.Stream(non_blocking=True)):
            with stream:
                for a in arrays:
                    s = ptr()
                    fast = (a.data.ptr if a.nbytes else 0), a.nbytes, s if s else null
                    ok = ok and a.flags.c_contiguous and fast == cuda_array_info(a.__cuda_array_interface__, False)
    except Exception:
        return
    if ok:
        _cupy_null_stream, _cupy_stream_ptr, _cupy_array = null, ptr, t


def host_buffer(obj, writable):
    """Return (address, nbytes, keepalive) for a contiguous host buffer.

    Raises
    ------
    TypeError
        `obj` lacks the buffer protocol (a CUDA array where host memory is needed,
        say), or `writable` is asked of a read-only buffer.
    ValueError
        The buffer is not contiguous.
    """
    try:
        mv = memoryview(obj)
    except TypeError:
        if hasattr(obj, "__cuda_array_interface__"):
            raise TypeError(f"{type(obj).__name__} is CUDA memory; this operation takes host buffers only") from None
        raise TypeError(
            f"expected an object with the buffer protocol (bytes, bytearray, memoryview, numpy array), "
            f"got {type(obj).__name__}"
        ) from None
    return _host(obj, mv, writable)


def _host(obj, mv, writable):
    if _holds_objects(mv.format):
        raise TypeError(f"{type(obj).__name__} holds Python objects (format {mv.format!r}): only their "
                        "pointers are in the buffer, which cannot be sent or received")
    if writable and mv.readonly:
        raise TypeError(f"cannot receive into a read-only buffer ({type(obj).__name__})")
    if not mv.contiguous:
        raise ValueError(f"buffer must be contiguous (got a strided {type(obj).__name__})")
    n = mv.nbytes
    if n == 0:
        return 0, 0, mv
    return _address(obj, mv), n, mv


def cuda_array_info(cai, writable, what="CUDA array"):
    """Return (address, nbytes, stream) from a ``__cuda_array_interface__`` dict.

    Raises
    ------
    TypeError
        `writable` is asked of a read-only array.
    ValueError
        The array is not C-contiguous, or the interface is malformed.
    """
    try:
        ptr, readonly = cai["data"]
        shape = tuple(int(d) for d in cai["shape"])
        typestr = cai["typestr"]
        itemsize = int(typestr[2:])
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise ValueError(f"malformed __cuda_array_interface__ of {what}: {e!r}") from None
    if writable and readonly:
        raise TypeError(f"cannot receive into a read-only CUDA array ({what})")
    strides = cai.get("strides")
    if strides is not None and not _c_contiguous(shape, tuple(strides), itemsize):
        raise ValueError(f"CUDA array must be C-contiguous (got strides {tuple(strides)} for {what})")
    if cai.get("mask") is not None:
        raise ValueError(f"masked CUDA arrays are not supported ({what})")
    n = math.prod(shape) * itemsize
    stream = cai.get("stream") if cai.get("version", 0) >= 3 else None
    if stream is None:
        stream = NO_STREAM
    elif stream == 0:
        # The interface forbids 0: it cannot tell the legacy default stream from the
        # per-thread one.
        raise ValueError(f"__cuda_array_interface__ stream 0 is not allowed ({what})")
    return (int(ptr) if n else 0), n, int(stream)


def _holds_objects(fmt):
    """Whether a buffer format (struct syntax, PEP 3118) has Python objects ("O"),
    field names aside."""
    return "O" in (_FIELD_NAMES.sub("", fmt) if ":" in fmt else fmt)


_FIELD_NAMES = re.compile(r":[^:]*:")


def _c_contiguous(shape, strides, itemsize):
    expected = itemsize
    for dim, stride in zip(reversed(shape), reversed(strides)):
        if dim > 1 and stride != expected:
            return False
        expected *= dim
    return True


def _address(obj, mv):
    if not mv.readonly:
        try:
            return _addressof(_c_char_from_buffer(mv))
        except (TypeError, ValueError):
            pass  # a Fortran-ordered view: the buffer protocol hands out C order only
    ai = getattr(obj, "__array_interface__", None)
    if ai is not None:
        return ai["data"][0]
    if type(obj) is bytes:
        # c_char_p points at the bytes object's own storage: no copy.
        return ctypes.cast(ctypes.c_char_p(obj), ctypes.c_void_p).value
    import numpy

    return numpy.frombuffer(mv, dtype=numpy.uint8).__array_interface__["data"][0]
