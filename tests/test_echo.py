"""Echo round trips of every size class and buffer type the issue names."""

import asyncio

import numpy as np
import pytest

import ucxx_go
from _support import TIMEOUT

SIZES = [0, 1, 8 << 10, 1 << 20, 64 << 20]
KINDS = ["bytes", "bytearray", "memoryview", "numpy"]


def make(kind, payload):
    if kind == "bytes":
        return payload.tobytes()
    if kind == "bytearray":
        return bytearray(payload.tobytes())
    if kind == "memoryview":
        return memoryview(bytearray(payload.tobytes()))
    return payload.copy()


def empty(kind, n):
    if kind == "numpy":
        return np.empty(n, dtype="u1")
    b = bytearray(n)
    return memoryview(b) if kind == "memoryview" else b


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s}B")
@pytest.mark.parametrize("kind", KINDS)
async def test_echo(echo_listener, kind, size):
    payload = np.random.default_rng(size).integers(0, 256, size, dtype="u1")
    ep = await ucxx_go.create_endpoint("127.0.0.1", echo_listener.port)
    msg = make(kind, payload)
    out = empty(kind, size)
    await asyncio.wait_for(ep.send(np.array([size], dtype="<u8")), TIMEOUT)
    await asyncio.wait_for(ep.send(msg), 30)
    got = await asyncio.wait_for(ep.recv(out), 30)
    assert got == size
    assert np.frombuffer(out, dtype="u1").tobytes() == payload.tobytes()
    await ep.close()


async def test_issue_example():
    """The example from the README and issue, verbatim in spirit."""

    async def handler(ep):
        buf = np.empty(1 << 20, dtype="u1")
        await ep.recv(buf)
        await ep.send(buf)
        await ep.close()

    listener = ucxx_go.create_listener(handler)
    ep = await ucxx_go.create_endpoint("127.0.0.1", listener.port)
    msg = np.arange(1 << 20, dtype="u1")
    out = np.empty_like(msg)
    await ep.send(msg)
    await ep.recv(out)
    assert (out == msg).all()
    await ep.close()
    listener.close()


async def test_send_obj_recv_obj():
    got = asyncio.get_running_loop().create_future()

    async def handler(ep):
        got.set_result(await ep.recv_obj())
        await ep.send_obj(b"pong" * 1000)
        await ep.close()

    listener = ucxx_go.create_listener(handler)
    ep = await ucxx_go.create_endpoint("127.0.0.1", listener.port)
    await ep.send_obj(b"ping" * 5000)
    assert await asyncio.wait_for(got, TIMEOUT) == bytearray(b"ping" * 5000)
    assert await asyncio.wait_for(ep.recv_obj(), TIMEOUT) == bytearray(b"pong" * 1000)
    await ep.close()
    listener.close()


async def test_short_message_into_larger_buffer():
    async def handler(ep):
        await ep.send(b"abc")
        await ep.close()

    listener = ucxx_go.create_listener(handler)
    ep = await ucxx_go.create_endpoint("127.0.0.1", listener.port)
    out = bytearray(10)
    assert await asyncio.wait_for(ep.recv(out), TIMEOUT) == 3
    assert out[:3] == b"abc"
    await ep.close()
    listener.close()


async def test_fortran_ordered_and_multidimensional_arrays(echo_listener):
    a = np.asfortranarray(np.arange(64 * 32, dtype="f8").reshape(64, 32))
    ep = await ucxx_go.create_endpoint("127.0.0.1", echo_listener.port)
    out = np.empty((32, 64), dtype="f8")  # C order: the same bytes as a.T
    await ep.send(np.array([a.nbytes], dtype="<u8"))
    await ep.send(a)
    await asyncio.wait_for(ep.recv(out), TIMEOUT)
    assert (out == a.T).all()
    await ep.close()
