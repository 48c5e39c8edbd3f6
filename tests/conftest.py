"""Shared set-up: UCX on loopback only, and a clean ucxx_go context around every test."""

import gc
import os

# Before ucxx_go (and UCX) is imported: UCX's TCP must never leave the machine.
os.environ.setdefault("UCX_NET_DEVICES", "lo")

import pytest  # noqa: E402

import ucxx_go  # noqa: E402
from _peers import echo_messages  # noqa: E402
from _support import TIMEOUT, Server  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_context():
    """Each test starts without a context and must leave nothing open behind."""
    ucxx_go.reset()
    yield
    gc.collect()  # endpoints a test dropped are aborted by their finalizers
    ucxx_go.reset()


@pytest.fixture
def one_sided(monkeypatch):
    """One-sided transfers on (they are off by default): for the engine the test starts
    and for the processes it starts."""
    monkeypatch.setenv("UCXGO_ONE_SIDED", "1")


@pytest.fixture
def echo_listener():
    """A listener whose handler echoes one message of the size it is told, then closes.

    Protocol (_peers.echo_messages): the client sends 8 bytes (little-endian size), then
    the message; the server sends the message back.
    """
    listener = ucxx_go.create_listener(lambda ep: echo_messages(ep, 1))
    yield listener
    listener.close()


@pytest.fixture
async def server():
    """A listener whose accepted endpoints the test takes with `await server.connect()`."""
    s = Server()
    yield s
    s.close()


@pytest.fixture
async def pair(server):
    """A connected (client, server) pair of endpoints, aborted at the end."""
    client, srv = await server.connect()
    yield client, srv
    client.abort()


@pytest.fixture
def processes():
    """Processes started by the test; any still running at the end are killed."""
    started = []
    yield started
    for p in started:
        if p.is_alive():
            p.kill()
        p.join(TIMEOUT)
