"""Buffer adapters: the address, size and memory type of a user's buffer, without copying.

Anything with the buffer protocol works (bytes, bytearray, memoryview, numpy, array).
The caller keeps the returned keep-alive object referenced until the operation ends:
while a memoryview export exists the buffer cannot be resized or freed.
"""

import ctypes

MEMORY_HOST = 0  # UCS_MEMORY_TYPE_HOST

_c_char_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def host_buffer(obj, writable):
    """Return (address, nbytes, keepalive) for a contiguous host buffer.

    Raises
    ------
    TypeError
        `obj` lacks the buffer protocol (a CUDA array, say), or `writable` is asked of a
        read-only buffer.
    ValueError
        The buffer is not contiguous.
    """
    try:
        mv = memoryview(obj)
    except TypeError:
        if hasattr(obj, "__cuda_array_interface__"):
            raise TypeError(
                f"{type(obj).__name__} is CUDA memory; this build of ucxx_go moves host buffers only"
            ) from None
        raise TypeError(
            f"expected an object with the buffer protocol (bytes, bytearray, memoryview, numpy array), "
            f"got {type(obj).__name__}"
        ) from None
    if writable and mv.readonly:
        raise TypeError(f"cannot receive into a read-only buffer ({type(obj).__name__})")
    if not mv.contiguous:
        raise ValueError(f"buffer must be contiguous (got a strided {type(obj).__name__})")
    n = mv.nbytes
    if n == 0:
        return 0, 0, mv
    return _address(obj, mv), n, mv


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
