"""Host buffers as buffer_info sees them: NumPy arrays through their fast path (the
address and flags read from the array object) agree with the buffer protocol's
answer for every shape and flag that matters, and what the path does not take falls
back to the buffer protocol with the same errors."""

import ctypes

import numpy as np
import pytest

from ucxx_go import _buffers
from ucxx_go._buffers import MEMORY_HOST, NO_STREAM, buffer_info


def protocol_answer(obj, writable):
    """What the buffer protocol says of obj: (address, nbytes), or the error."""
    mv = memoryview(obj)
    if writable and mv.readonly:
        return TypeError
    if not mv.contiguous:
        return ValueError
    if mv.nbytes == 0:
        return 0, 0
    return np.asarray(mv).__array_interface__["data"][0], mv.nbytes


def arrays():
    base = np.arange(64, dtype=np.float64)
    read_only = np.arange(8, dtype=np.int32)
    read_only.flags.writeable = False
    return {
        "1-d": base,
        "2-d": base.reshape(8, 8),
        "slice inside": base[5:17],
        "row of 2-d": base.reshape(8, 8)[3],
        "zero size": base[:0],
        "one element": base[7:8],
        "from bytes (read-only)": np.frombuffer(b"0123456789abcdef", dtype=np.uint8),
        "made read-only": read_only,
        "strided": base[::2],
        "column": base.reshape(8, 8)[:, 1],
        "fortran order": np.asfortranarray(base.reshape(8, 8)),
        "transposed": base.reshape(8, 8).T,
        "0-d": np.array(3.5),
    }


def test_the_fast_path_is_on_for_numpy():
    buffer_info(np.zeros(3), writable=False)  # the first array turns it on
    assert _buffers._numpy_array is np.ndarray


@pytest.mark.parametrize("writable", [False, True])
@pytest.mark.parametrize("name", list(arrays()))
def test_numpy_arrays_agree_with_the_buffer_protocol(name, writable):
    a = arrays()[name]
    buffer_info(np.zeros(1), writable=False)
    want = protocol_answer(a, writable)
    if isinstance(want, type):
        with pytest.raises(want):
            buffer_info(a, writable)
        return
    addr, n, keep, mem, stream = buffer_info(a, writable)
    assert (addr, n) == want
    assert (mem, stream) == (MEMORY_HOST, NO_STREAM)
    assert keep is not None


def test_an_array_made_read_only_after_a_call_is_refused_for_writing():
    a = np.zeros(16, dtype=np.uint8)
    buffer_info(a, writable=True)
    a.flags.writeable = False
    with pytest.raises(TypeError, match="read-only"):
        buffer_info(a, writable=True)
    assert buffer_info(a, writable=False)[:2] == protocol_answer(a, False)


def test_the_keep_alive_stops_a_resize_in_place():
    a = np.zeros(16, dtype=np.uint8)
    _, _, keep, _, _ = buffer_info(a, writable=True)
    with pytest.raises(ValueError):
        a.resize(1 << 20)
    del keep


def test_subclasses_and_other_buffers_take_the_buffer_protocol():
    class Tagged(np.ndarray):
        pass

    t = np.arange(10, dtype=np.int16).view(Tagged)
    assert buffer_info(t, True)[:2] == protocol_answer(t, True)
    ba = bytearray(b"abcdef")
    addr, n, keep, _, _ = buffer_info(ba, True)
    assert (addr, n) == (ctypes.addressof(ctypes.c_char.from_buffer(ba)), 6)
    assert isinstance(keep, memoryview)
    with pytest.raises(TypeError, match="read-only"):
        buffer_info(b"abc", True)


@pytest.mark.parametrize("writable", [False, True])
def test_buffers_of_python_objects_are_refused(writable):
    """An object array's buffer holds PyObject pointers: receiving into it would
    corrupt the heap, sending it would hand out addresses. Refused, whether the array
    is plain or structured, through the fast path or a memoryview."""
    objects = np.array([1, "a", None], dtype=object)
    record = np.zeros(2, dtype=[("Orange", "i4"), ("b", "O")])
    for obj in (objects, record, memoryview(objects), objects[::-1].copy()):
        for _ in range(2):  # the second look would take the fast path if it were allowed
            with pytest.raises(TypeError, match="Python objects"):
                buffer_info(obj, writable)
    fine = np.zeros(2, dtype=[("Orange", "i4"), ("b", "f8")])  # an "O" in a field name only
    assert buffer_info(fine, writable)[:2] == protocol_answer(fine, writable)
