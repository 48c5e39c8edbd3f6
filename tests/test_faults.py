"""Faults: misuse, errors from UCX, cancellation, closing and peers that go away.

Each test checks the failure itself and then that the process is still fine: the same
endpoint (or a new one) still carries a message, and nothing is left in flight.
"""

import asyncio
import gc
import logging
import socket
import time

import numpy as np
import pytest

import ucxx_go
from _support import (
    PROMPT,
    TIMEOUT,
    CloseCallback,
    Server,
    broken_by_peer,
    close_or_abort,
    exchange,
    in_flight,
    refuse_submissions,
    wait_in_flight,
    wait_stats,
)


async def round_trip(a, b, size=1000):
    """A message each way between endpoints `a` and `b`."""
    payload = np.random.default_rng(size).integers(0, 256, size, dtype="u1")
    await exchange(a, b, payload)
    await exchange(b, a, payload[::-1].copy())


@pytest.fixture
def no_submission(monkeypatch):
    """Fail the test if a send or recv reaches the Go engine."""
    refuse_submissions(monkeypatch, "pybridge_TagSend", "pybridge_TagRecv")
    return monkeypatch


# -- 1, 2: buffers the engine must never see ---------------------------------------------


def _read_only_array():
    a = np.zeros(16, dtype="u1")
    a.flags.writeable = False
    return a


@pytest.mark.parametrize(
    "make", [lambda: bytes(16), _read_only_array, lambda: memoryview(bytes(16))],
    ids=["bytes", "readonly-numpy", "readonly-memoryview"],
)
async def test_recv_into_read_only_buffer(pair, no_submission, make):
    client, srv = pair
    with pytest.raises(TypeError, match="read-only"):
        await asyncio.wait_for(client.recv(make()), TIMEOUT)
    no_submission.undo()
    assert client.alive
    await round_trip(client, srv)
    await wait_in_flight(0)


@pytest.mark.parametrize("op", ["send", "recv"])
async def test_strided_buffer_is_refused(pair, no_submission, op):
    client, srv = pair
    strided = np.arange(32, dtype="u1")[::2]
    with pytest.raises(ValueError, match="contiguous"):
        await asyncio.wait_for(getattr(client, op)(strided), TIMEOUT)
    # A 2-D slice whose rows are not adjacent in memory.
    with pytest.raises(ValueError, match="contiguous"):
        await asyncio.wait_for(getattr(client, op)(np.zeros((4, 8), dtype="u1")[:, :4]), TIMEOUT)
    no_submission.undo()
    await round_trip(client, srv)


@pytest.mark.parametrize("op", ["send", "recv"])
@pytest.mark.parametrize("obj", [object(), {"a": 1}, 42, "text", None], ids=["object", "dict", "int", "str", "None"])
async def test_object_without_buffer_protocol_is_refused(pair, no_submission, op, obj):
    client, srv = pair
    with pytest.raises(TypeError, match="buffer protocol"):
        await asyncio.wait_for(getattr(client, op)(obj), TIMEOUT)
    no_submission.undo()
    await round_trip(client, srv)


# -- 3: truncation -------------------------------------------------------------------------


@pytest.mark.parametrize("size", [100, 1 << 20], ids=["eager", "rendezvous"])
async def test_message_larger_than_receive_buffer(pair, size):
    client, srv = pair
    assert ucxx_go.exceptions.UCXMsgTruncated is ucxx_go.UCXMessageTruncatedError
    small = np.zeros(10, dtype="u1")
    send = asyncio.ensure_future(srv.send(np.ones(size, dtype="u1")))
    with pytest.raises(ucxx_go.UCXMessageTruncatedError) as info:
        await asyncio.wait_for(client.recv(small), TIMEOUT)
    assert isinstance(info.value, ucxx_go.UCXError)
    assert isinstance(info.value, ucxx_go.exceptions.UCXMsgTruncated)
    assert info.value.status == -9
    # The sender is not left waiting for a receiver that gave up.
    await asyncio.wait_for(send, TIMEOUT)
    assert client.alive and srv.alive
    await round_trip(client, srv)
    await wait_in_flight(0)


# -- 4: closed endpoints -------------------------------------------------------------------


@pytest.mark.parametrize("how", ["close", "abort"])
async def test_operations_on_closed_endpoint(pair, no_submission, how):
    client, _ = pair
    calls = []
    client.set_close_callback(calls.append, cb_args=("closed",))
    await close_or_abort(client, how)
    assert client.closed
    assert not client.alive
    assert calls == ["closed"]
    for op, buf in (("send", b"x" * 8), ("recv", bytearray(8))):
        with pytest.raises(ucxx_go.UCXCloseError) as info:
            await asyncio.wait_for(getattr(client, op)(buf), TIMEOUT)
        assert isinstance(info.value, ucxx_go.UCXError)
        assert f"Endpoint.{op}" in str(info.value)
    # A second close (or abort) is harmless, and returns at once.
    await asyncio.wait_for(client.close(), 1.0)
    client.abort()
    await asyncio.wait_for(client.close(), 1.0)
    assert client.closed and not client.alive
    assert calls == ["closed"]


@pytest.mark.parametrize("how", ["close", "abort"])
async def test_close_fails_pending_recv(pair, how):
    client, _ = pair
    task = asyncio.ensure_future(client.recv(bytearray(16)))
    await wait_in_flight(1)
    await close_or_abort(client, how)
    with pytest.raises(ucxx_go.UCXCanceledError):
        await asyncio.wait_for(task, PROMPT)
    await wait_in_flight(0)


async def test_concurrent_closes_both_finish(pair):
    client, _ = pair
    await asyncio.wait_for(asyncio.gather(client.close(), client.close()), TIMEOUT)
    assert client.closed


# -- 5, 6: cancellation --------------------------------------------------------------------


async def test_cancelled_recv_frees_its_request(pair):
    client, srv = pair
    await wait_in_flight(0)
    task = asyncio.ensure_future(client.recv(bytearray(16)))
    await wait_in_flight(1)  # the recv is submitted
    t0 = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, PROMPT)
    assert time.monotonic() - t0 < PROMPT
    assert task.cancelled()
    await wait_in_flight(0)
    # The cancelled recv took nothing: the next message goes to the next recv, whole.
    assert client.alive
    await exchange(srv, client, np.arange(16, dtype="u1"))
    await wait_in_flight(0)


async def test_recv_timeout_then_recv(pair):
    client, srv = pair
    buf = bytearray(16)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(client.recv(buf), 0.05)
    await wait_in_flight(0)
    await exchange(srv, client, np.arange(100, 116, dtype="u1"))
    await wait_in_flight(0)


async def test_many_cancelled_recvs_then_recv(pair):
    client, srv = pair
    tasks = [asyncio.ensure_future(client.recv(bytearray(8))) for _ in range(50)]
    await wait_in_flight(50)
    for t in tasks:
        t.cancel()
    done, pending = await asyncio.wait(tasks, timeout=PROMPT)
    assert not pending
    assert all(t.cancelled() for t in done)
    await wait_in_flight(0)
    await exchange(srv, client, np.arange(8, dtype="u1"))


# -- 7, 8: reset ---------------------------------------------------------------------------


async def test_reset_with_open_listener_closes_it():
    """A reset refused for what is open still resets (test_ucxx_compat has the
    endpoint case): the listener is closed in Go too, and a fresh context comes up."""
    listener = ucxx_go.create_listener(lambda ep: None)
    await wait_stats(listeners=1)
    with pytest.raises(ucxx_go.UCXError, match="not all Endpoints and/or Listeners are closed"):
        ucxx_go.reset()
    assert listener.closed
    listener.close()  # harmless
    ucxx_go.init()
    await wait_stats(listeners=0)
    assert in_flight() == 0


# -- 9: connecting to nobody ---------------------------------------------------------------


def _unused_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_connect_to_port_without_listener():
    port = _unused_port()
    t0 = time.monotonic()
    with pytest.raises(ucxx_go.UCXError):
        await asyncio.wait_for(ucxx_go.create_endpoint("127.0.0.1", port, connect_timeout=2), TIMEOUT)
    assert time.monotonic() - t0 < 2.0 + 1.0
    # The failed connection left nothing behind in the engine.
    await wait_stats(in_flight=0, endpoints=0, listeners=0)


async def test_cancelled_connects_leave_nothing_open(server):
    """create_endpoint cancelled at any point: a connection that completes later is aborted."""
    for delay in (0, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05):
        try:
            ep = await asyncio.wait_for(ucxx_go.create_endpoint("127.0.0.1", server.listener.port), delay)
        except TimeoutError:
            continue
        await asyncio.wait_for(ep.close(), TIMEOUT)
    # Every connection the server saw is broken by its client, and the engine drops it.
    await wait_stats(in_flight=0, endpoints=0, listeners=1, timeout=PROMPT)
    # The Python endpoints hear of it through the completion queue, maybe not yet: wait
    # for the close callback of each still open.
    for ep in server.endpoints:
        if ep.alive:
            await CloseCallback(ep).wait()
        assert not ep.alive


# -- 10, 13: the peer goes away ------------------------------------------------------------


async def test_peer_close_fails_pending_recv(pair):
    client, srv = pair
    closed = CloseCallback(client, "client")
    task = asyncio.ensure_future(client.recv(bytearray(16)))
    await wait_in_flight(1)
    await asyncio.wait_for(srv.close(), TIMEOUT)
    await broken_by_peer(task, since=time.monotonic())
    await closed.wait()
    assert not client.alive
    assert client.closed  # as in UCXX: an endpoint its peer closed reports closed
    with pytest.raises(ucxx_go.UCXError):
        await asyncio.wait_for(client.send(b"late"), TIMEOUT)
    await asyncio.wait_for(client.close(), TIMEOUT)
    assert closed.calls == [(("client",), {})]
    await wait_in_flight(0)


async def test_dropped_endpoint_is_aborted(server):
    client, srv = await server.connect()
    task = asyncio.ensure_future(srv.recv(bytearray(16)))
    await wait_in_flight(1)
    del client
    gc.collect()
    t0 = time.monotonic()
    with pytest.raises(ucxx_go.UCXError):
        await asyncio.wait_for(task, PROMPT)
    assert time.monotonic() - t0 < PROMPT
    assert not srv.alive
    await wait_stats(in_flight=0, endpoints=0)  # both are gone from the engine: aborted, and broken
    # The dropped endpoint counts as closed: reset is not refused because of it.
    await asyncio.wait_for(srv.close(), TIMEOUT)
    server.listener.close()
    ucxx_go.reset()


# -- 11: init ------------------------------------------------------------------------------


async def test_init_twice_and_bad_option():
    ucxx_go.init()
    with pytest.raises(RuntimeError, match="already initialised"):
        ucxx_go.init()
    ucxx_go.reset()
    with pytest.raises(ucxx_go.UCXConfigError) as info:
        ucxx_go.init(options={"NO_SUCH_OPTION": "x"})
    assert isinstance(info.value, ucxx_go.UCXError)
    assert "NO_SUCH_OPTION" in str(info.value)
    # The failed init left nothing behind: defaults work, and carry a message.
    ucxx_go.init()
    s = Server()
    try:
        client, srv = await s.connect()
        await round_trip(client, srv)
        await asyncio.wait_for(asyncio.gather(client.close(), srv.close()), TIMEOUT)
    finally:
        s.close()


# -- 12: a handler that raises -------------------------------------------------------------


class _Signal(logging.Handler):
    """A logging handler that sets an asyncio.Event on each record (emitted on the loop)."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.event = asyncio.Event()

    def emit(self, record):
        self.event.set()


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_listener_handler_that_raises(caplog, kind):
    caplog.set_level(logging.ERROR, logger="ucxx_go")
    signal = _Signal()
    logging.getLogger("ucxx_go").addHandler(signal)
    seen = []

    def plain(ep):
        seen.append(ep)
        if len(seen) == 1:
            raise RuntimeError("handler boom")

    async def coroutine(ep):
        seen.append(ep)
        if len(seen) == 1:
            raise RuntimeError("handler boom")

    s = Server(handler=plain if kind == "sync" else coroutine)
    try:
        first, _ = await s.connect()
        await asyncio.wait_for(signal.event.wait(), TIMEOUT)
        records = [r for r in caplog.records if "Uncaught listener callback error" in r.getMessage()]
        assert len(records) == 1
        assert records[0].exc_info is not None
        assert str(records[0].exc_info[1]) == "handler boom"
        # The listener goes on: a second connection is accepted and carries messages.
        second, srv = await s.connect()
        assert len(seen) == 2 and seen[1] is srv
        await round_trip(second, srv)
        assert len([r for r in caplog.records if "Uncaught listener callback error" in r.getMessage()]) == 1
        first.abort()
        second.abort()
    finally:
        logging.getLogger("ucxx_go").removeHandler(signal)
        s.close()
