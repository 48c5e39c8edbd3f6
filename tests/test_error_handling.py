"""endpoint_error_handling=False: UCX may use shared memory; close and abort still work.

With UCXX's default, endpoint_error_handling=True, UCX only uses transports that can
detect a failed peer, so two processes on one host talk TCP over loopback. Without it,
UCX may use shared memory (posix, sysv, cma), and a peer that closes or dies is not
detected: our close() and abort() must end things on their own.

A connection through a listener needs tcp in UCX_TLS either way (UCX's connection
manager); with "sm,self,tcp" the data itself goes over shared memory. The Go tests
(core/errhandling_test.go, ucxx TestErrHandlingModes) check the transports UCX picks.
"""

import asyncio
import time

import numpy as np
import pytest

import ucxx_go
from _peers import echo_messages, echo_server
from _support import (PROMPT, TIMEOUT, Server, by_address, close_or_abort, exchange, join, mp, needs_manager, queue_get,
                      start, wait_in_flight)

SHM_TLS = "sm,self,tcp"  # tcp only for the listener's connection manager
SIZES = (8, 1 << 20)


def payload(size):
    return np.random.default_rng(size).integers(0, 256, size, dtype="u1")


async def echo_once(ep, msg):
    """Send `msg` (announced by its 8-byte size) and check it comes back."""
    out = np.zeros_like(msg)
    await asyncio.wait_for(ep.send(np.array([msg.size], dtype="<u8")), TIMEOUT)
    await asyncio.wait_for(ep.send(msg), TIMEOUT)
    n = await asyncio.wait_for(ep.recv(out), TIMEOUT)
    assert n == msg.size
    np.testing.assert_array_equal(out, msg)


# The other side of echo_once, `count` times, then close.
serve_echo = echo_messages


@pytest.fixture
async def accepted():
    """Endpoints without error handling on both sides, over SHM_TLS."""
    ucxx_go.init(options={"TLS": SHM_TLS})
    a = Server(endpoint_error_handling=False)
    yield a
    a.close()


async def test_echo_without_error_handling():
    ucxx_go.init(options={"TLS": SHM_TLS})
    done = asyncio.Queue()

    async def handler(ep):
        try:
            await serve_echo(ep, len(SIZES))
        finally:
            done.put_nowait(None)

    listener = ucxx_go.create_listener(handler, endpoint_error_handling=False)
    assert listener.endpoint_error_handling is False
    try:
        ep = await asyncio.wait_for(
            ucxx_go.create_endpoint("127.0.0.1", listener.port, endpoint_error_handling=False), TIMEOUT
        )
        for size in SIZES:
            await echo_once(ep, payload(size))
        await asyncio.wait_for(done.get(), TIMEOUT)
        await asyncio.wait_for(ep.close(), TIMEOUT)
        assert ep.closed
    finally:
        listener.close()


@pytest.mark.parametrize("how", ["close", "abort"])
async def test_close_and_abort_cancel_pending_recv(accepted, how):
    client, srv = await accepted.connect(endpoint_error_handling=False)
    await echo_pair(client, srv)
    task = asyncio.ensure_future(client.recv(bytearray(16)))
    await wait_in_flight(1)  # posted before the close
    t0 = time.monotonic()
    await close_or_abort(client, how)
    with pytest.raises(ucxx_go.UCXCanceledError):
        await asyncio.wait_for(task, PROMPT)
    assert time.monotonic() - t0 < PROMPT
    assert client.closed
    with pytest.raises(ucxx_go.UCXCloseError):
        await asyncio.wait_for(client.send(b"late"), TIMEOUT)
    # A second close or abort is harmless.
    await asyncio.wait_for(client.close(), 1.0)
    client.abort()


async def echo_pair(a, b):
    """One message each way between connected endpoints `a` and `b`."""
    for src, dst in ((a, b), (b, a)):
        out = bytearray(5)
        await asyncio.wait_for(asyncio.gather(dst.recv(out), src.send(b"hello")), TIMEOUT)
        assert out == b"hello"


@pytest.mark.parametrize("error_handling", [True, False], ids=["error-handling", "no-error-handling"])
async def test_peer_close_detected_only_with_error_handling(error_handling):
    """With error handling the peer's close fails our pending receive; without it
    nothing tells us, and the receive waits until we close."""
    ucxx_go.init(options={"TLS": SHM_TLS})
    a = Server(endpoint_error_handling=error_handling)
    try:
        client, srv = await a.connect(endpoint_error_handling=error_handling)
        await echo_pair(client, srv)
        task = asyncio.ensure_future(srv.recv(bytearray(16)))
        await wait_in_flight(1)  # posted before the peer closes
        await asyncio.wait_for(client.close(), TIMEOUT)
        if error_handling:
            with pytest.raises(ucxx_go.UCXError) as info:
                await asyncio.wait_for(task, PROMPT)
            assert not isinstance(info.value, ucxx_go.UCXCloseError), "closed by the peer, not by us"
        else:
            done, _ = await asyncio.wait([task], timeout=0.5)
            assert not done, "without error handling the peer's close is not detected"
            assert not srv.closed
            await asyncio.wait_for(srv.close(), TIMEOUT)
            with pytest.raises(ucxx_go.UCXCanceledError):
                await asyncio.wait_for(task, PROMPT)
    finally:
        a.close()


async def _exchange_over_worker_address(ep):
    for size in SIZES:
        msg = np.arange(size, dtype="u8").view("u1")[:size].copy()
        out = np.zeros_like(msg)
        n, _ = await asyncio.wait_for(
            asyncio.gather(ucxx_go.recv(out, 0x77), ep.send(msg, tag=0x77, force_tag=True)), TIMEOUT
        )
        assert n == size
        np.testing.assert_array_equal(out, msg)


async def test_shared_memory_with_error_handling_by_default():
    """ucxx_go turns on UCX's error handling for shared memory (MM_ERROR_HANDLING=y),
    so an endpoint with peer error handling may use it: UCX_TLS=sm,self connects."""
    ucxx_go.init(options={"TLS": "sm,self"})
    ep = await ucxx_go.create_endpoint_from_worker_address(ucxx_go.get_worker_address())
    try:
        assert any(t.endswith(":memory") for t in ep.get_active_transports())
        await _exchange_over_worker_address(ep)
    finally:
        await asyncio.wait_for(ep.close(), TIMEOUT)


async def test_worker_address_without_error_handling():
    # Shared memory only, and UCX's own MM_ERROR_HANDLING=n: error handling leaves no
    # transport at all.
    ucxx_go.init(options={"TLS": "sm,self", "MM_ERROR_HANDLING": "n"})
    address = ucxx_go.get_worker_address()
    with pytest.raises(ucxx_go.UCXUnreachableError):
        await ucxx_go.create_endpoint_from_worker_address(address)
    ep = await ucxx_go.create_endpoint_from_worker_address(address, endpoint_error_handling=False)
    try:
        await _exchange_over_worker_address(ep)
    finally:
        await asyncio.wait_for(ep.close(), TIMEOUT)


@needs_manager
async def test_listener_connection_needs_tcp():
    """UCX's connection manager needs a network device: UCX_TLS=sm,self cannot connect
    through a listener, with or without error handling, and says so at once."""
    ucxx_go.init(options={"TLS": "sm,self"})
    for error_handling in (True, False):
        listener = ucxx_go.create_listener(lambda ep: ep.abort(), endpoint_error_handling=error_handling)
        try:
            t0 = time.monotonic()
            with pytest.raises(ucxx_go.UCXUnreachableError):
                await ucxx_go.create_endpoint(
                    "127.0.0.1", listener.port, endpoint_error_handling=error_handling, connect_timeout=5.0
                )
            assert time.monotonic() - t0 < 5.0
        finally:
            listener.close()


@by_address
@pytest.mark.parametrize("error_handling", [False, True], ids=["no-error-handling", "error-handling"])
async def test_listener_connection_over_shared_memory_only(error_handling):
    """Connections by address exchange need no network device of UCX's: with
    UCX_TLS=sm,self a listener's connection moves data over shared memory."""
    ucxx_go.init(options={"TLS": "sm,self"})
    listening = Server(endpoint_error_handling=error_handling)
    try:
        client, server = await listening.connect("127.0.0.1", endpoint_error_handling=error_handling)
        await exchange(client, server, np.arange(100_000, dtype="u1"))
        await exchange(server, client, np.arange(1000, dtype="u1"))
    finally:
        listening.close()


# -- another process: what shared memory is for -------------------------------------------


@pytest.mark.parametrize("error_handling", [False, True], ids=["no-error-handling", "error-handling"])
async def test_echo_with_server_process(processes, error_handling):
    ucxx_go.init(options={"TLS": SHM_TLS})
    repeats = 20
    port_queue = mp.Queue()
    server = start(processes, echo_server, port_queue, 1, len(SIZES) + repeats, SHM_TLS, error_handling)
    port = await queue_get(port_queue)
    ep = await asyncio.wait_for(
        ucxx_go.create_endpoint("127.0.0.1", port, endpoint_error_handling=error_handling), TIMEOUT
    )
    try:
        for size in SIZES:
            await echo_once(ep, payload(size))
        msg = payload(1 << 20)
        t0 = time.perf_counter()
        for _ in range(repeats):
            await echo_once(ep, msg)
        per_echo = (time.perf_counter() - t0) / repeats
        print(f"1 MiB echo across processes, error handling {error_handling}: {per_echo * 1e3:.2f} ms")
    finally:
        await asyncio.wait_for(ep.close(), TIMEOUT)
    await join(server, TIMEOUT)
    assert server.exitcode == 0


# -- dask: distributed.comm.ucxgo.endpoint-error-handling ----------------------------------


@pytest.mark.parametrize(
    "value, env, expected",
    [
        (None, None, True),  # the default
        (False, None, False),
        ("false", None, False),  # from YAML or the environment as text
        ("yes", None, True),
        (None, "False", False),
        (None, "True", True),
    ],
)
def test_dask_config_key(monkeypatch, value, env, expected):
    pytest.importorskip("distributed")
    import dask

    from ucxx_go import distributed_backend

    monkeypatch.delenv("DASK_DISTRIBUTED__COMM__UCXGO__ENDPOINT_ERROR_HANDLING", raising=False)
    if env is not None:
        monkeypatch.setenv("DASK_DISTRIBUTED__COMM__UCXGO__ENDPOINT_ERROR_HANDLING", env)
        # What dask does with the environment at import, into a config of our own.
        config = {}
        dask.config.update(config, dask.config.collect_env())
        with dask.config.set(config):
            assert distributed_backend._endpoint_error_handling() is expected
        return
    settings = {} if value is None else {"distributed.comm.ucxgo.endpoint-error-handling": value}
    with dask.config.set(settings):
        assert distributed_backend._endpoint_error_handling() is expected


async def test_dask_comm_without_error_handling():
    pytest.importorskip("distributed")
    import dask
    from distributed.comm import connect, listen

    ucxx_go.init(options={"TLS": SHM_TLS})
    accepted = asyncio.Queue()

    async def handle_comm(comm):
        await accepted.put(comm)

    with dask.config.set({"distributed.comm.ucxgo.endpoint-error-handling": False}):
        listener = listen("ucxgo://127.0.0.1:0", handle_comm)
        await asyncio.wait_for(listener.start(), TIMEOUT)
        try:
            client = await asyncio.wait_for(connect(listener.contact_address), TIMEOUT)
            server = await asyncio.wait_for(accepted.get(), TIMEOUT)
        finally:
            listener.stop()
        assert listener._listener.endpoint_error_handling is False
        msg = {"op": "ping", "data": np.arange(1 << 18)}
        try:
            _, got = await asyncio.wait_for(asyncio.gather(client.write(msg), server.read()), TIMEOUT)
            assert got["op"] == "ping"
            np.testing.assert_array_equal(got["data"], msg["data"])
        finally:
            for comm in (client, server):
                await asyncio.wait_for(comm.close(), TIMEOUT)
