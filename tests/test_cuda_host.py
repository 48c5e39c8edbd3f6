"""CUDA support seen from a machine without a GPU (CI): __cuda_array_interface__ is
parsed and checked before anything reaches Go, a CUDA buffer without a driver fails
clearly, and info() reports GPUs, topology and transports. The GPU machine runs
tests/gpu/."""

import pytest

import ucxx_go
from _support import started
from ucxx_go._buffers import MEMORY_CUDA, buffer_info
from ucxx_go._bridge import ext


class DeviceArray:
    """An object exposing a CUDA array interface (as cupy, numba or torch do)."""

    def __init__(self, ptr, shape, typestr="|u1", strides=None, readonly=False, version=3, stream=None):
        self.__cuda_array_interface__ = {
            "data": (ptr, readonly),
            "shape": shape,
            "typestr": typestr,
            "strides": strides,
            "version": version,
        }
        if stream is not None:
            self.__cuda_array_interface__["stream"] = stream


def test_cuda_array_interface_parsed():
    a = DeviceArray(0x7F0000000000, (4, 8), typestr="<f4", stream=7)
    addr, n, keep, mem, stream = buffer_info(a, writable=True)
    assert (addr, n, mem, stream) == (0x7F0000000000, 128, MEMORY_CUDA, 7)
    assert keep is a
    # C-contiguous strides given explicitly are fine; no stream key means no wait.
    addr, n, _, _, stream = buffer_info(DeviceArray(0x1000, (2, 3), "<i8", strides=(24, 8), version=2), False)
    assert (n, stream) == (48, 0)


@pytest.mark.parametrize(
    "array, writable, exc, match",
    [
        (DeviceArray(0x1000, (4, 4), strides=(1, 4)), False, ValueError, "C-contiguous"),
        (DeviceArray(0x1000, (8,), readonly=True), True, TypeError, "read-only"),
        (DeviceArray(0x1000, (8,), stream=0), False, ValueError, "stream 0"),
        (DeviceArray(0x1000, "not a shape"), False, ValueError, "malformed"),
    ],
)
def test_bad_cuda_arrays_rejected(array, writable, exc, match):
    with pytest.raises(exc, match=match):
        buffer_info(array, writable)


def test_neither_buffer_nor_cuda_array():
    with pytest.raises(TypeError, match="__cuda_array_interface__"):
        buffer_info(object(), False)


@pytest.mark.skipif(ucxx_go.info()["gpus"] != [], reason="a GPU is present: tests/gpu covers CUDA")
async def test_cuda_buffer_without_driver_fails_clearly(pair):
    client, _ = pair
    with pytest.raises(ucxx_go.exceptions.UCXError, match="CUDA"):
        await client.send(DeviceArray(0x1000, (8,)))
    # Nothing was queued: the endpoint still works.
    import numpy as np

    _, server = pair
    out = np.empty(4, dtype="u1")
    await __import__("asyncio").gather(client.send(np.arange(4, dtype="u1")), server.recv(out))
    assert list(out) == [0, 1, 2, 3]


async def test_info_reports_transports_and_progress_thread(pair):
    client, _ = pair
    ts = client.get_active_transports()
    assert ts and all(":" in t for t in ts), ts
    info = ucxx_go.info()
    assert info["transports"][client.uid] == ts
    assert info["progress_thread"]["cpus"]
    assert isinstance(info["gpu_topology"], list)


def test_free_cuda_without_driver_is_an_error():
    ucxx_go.info()  # initialised
    if ucxx_go.info()["gpus"]:
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError):
        ext.pybridge_FreeCUDA(0, 0x1000)


async def test_recv_multi_with_cuda_allocator_and_host_frames_only(pair):
    """A cuda_allocator is only asked for CUDA frames: a host-only message completes
    as usual, and a receive cancelled before anything came leaves the stream in step."""
    import asyncio

    import numpy as np

    client, server = pair
    asked = []

    def allocator(n):
        asked.append(n)
        raise AssertionError("no CUDA frame was sent")

    [waiting] = await started(server.recv_multi(cuda_allocator=allocator))  # posted, nothing came
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    frames = [np.arange(10, dtype="u1"), np.frombuffer(b"xyz", dtype="u1")]
    got, _ = await asyncio.gather(server.recv_multi(cuda_allocator=allocator), client.send_multi(frames))
    assert asked == []
    assert [bytes(f) for f in got] == [bytes(f) for f in frames]


async def test_transports_of_a_closed_endpoint_is_an_error(pair):
    client, _ = pair
    client.abort()
    with pytest.raises(ucxx_go.exceptions.UCXCloseError):
        client.get_active_transports()
