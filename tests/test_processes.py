"""Peers in other OS processes: echo across processes, a peer killed mid-recv, and
string tags that must match whatever each process's PYTHONHASHSEED.

Peers are spawned (never forked: UCX state does not survive a fork) from targets in
_peers.py; ports travel through multiprocessing queues; every peer is joined with a
timeout and its exit code asserted.
"""

import asyncio
import os
import signal
import time

import numpy as np

import ucxx_go
from _support import TIMEOUT, CloseCallback, broken_by_peer, join, mp, queue_get, start, wait_in_flight

import _peers  # tests/ is on sys.path: conftest.py's directory, rootdir "prepend" import mode


async def test_echo_with_server_process(processes):
    connections, sizes = 3, (1 << 10, 4 << 20)
    port_queue = mp.Queue()
    server = start(processes, _peers.echo_server, port_queue, connections, len(sizes))
    port = await queue_get(port_queue)
    rng = np.random.default_rng(7)
    for i in range(connections):
        ep = await asyncio.wait_for(ucxx_go.create_endpoint("127.0.0.1", port), TIMEOUT)
        try:
            for size in sizes:
                msg = rng.integers(0, 256, size, dtype="u1")
                out = np.zeros_like(msg)
                await asyncio.wait_for(ep.send(np.array([size], dtype="<u8")), TIMEOUT)
                await asyncio.wait_for(ep.send(msg), TIMEOUT)
                n = await asyncio.wait_for(ep.recv(out), TIMEOUT)
                assert n == size
                np.testing.assert_array_equal(out, msg, err_msg=f"connection {i}, {size} bytes")
        finally:
            await asyncio.wait_for(ep.close(), TIMEOUT)
    await join(server, TIMEOUT)
    assert server.exitcode == 0


async def test_peer_killed_during_recv(processes, server):
    ready = mp.Queue()
    peer = start(processes, _peers.connect_and_hang, server.listener.port, ready)
    await queue_get(ready)
    ep = await server.accept()
    if "UCX_TLS" not in os.environ:
        # ucxx_go's defaults put the data on shared memory; the death is still noticed.
        assert any(t.endswith(":memory") for t in ep.get_active_transports()), ep.get_active_transports()
    closed = CloseCallback(ep, "peer gone")
    recv = asyncio.ensure_future(ep.recv(bytearray(64)))
    await wait_in_flight(1)  # the recv is posted before the peer dies
    assert not recv.done()
    t0 = time.monotonic()
    peer.kill()
    await broken_by_peer(recv, since=t0)
    await closed.wait()
    assert not ep.alive
    await join(peer, TIMEOUT)
    assert peer.exitcode == -signal.SIGKILL
    await asyncio.wait_for(ep.close(), TIMEOUT)
    assert closed.calls == [(("peer gone",), {})]


async def test_alive_turns_false_without_the_event_loop(processes, server):
    """As UCXX's: ``alive`` follows the progress thread, so it turns False once the peer
    died even while the event loop never runs (here it is blocked on purpose)."""
    ready = mp.Queue()
    peer = start(processes, _peers.connect_and_hang, server.listener.port, ready)
    await queue_get(ready)
    ep = await server.accept()
    assert ep.alive
    peer.kill()
    deadline = time.monotonic() + TIMEOUT
    while ep.alive and time.monotonic() < deadline:
        time.sleep(0.01)  # blocks the loop: nothing but the progress thread can tell
    assert not ep.alive, f"still alive {TIMEOUT} s after the peer was killed"
    await join(peer, TIMEOUT)
    ep.abort()


async def test_string_tags_match_across_hash_seeds(processes, server, monkeypatch):
    parent_seed = os.environ.get("PYTHONHASHSEED")
    child_seed = "12345" if parent_seed != "12345" else "54321"
    report = mp.Queue()
    payload, decoy = b"the frames payload", b"a decoy with another tag"
    # The spawned interpreter inherits the environment at start().
    monkeypatch.setenv("PYTHONHASHSEED", child_seed)
    peer = start(processes, _peers.send_tagged, server.listener.port, report, "frames", payload, decoy)
    monkeypatch.undo()
    child_hash = await queue_get(report)
    assert child_hash != hash("frames"), "the peer hashes strings as we do: the test proves nothing"
    ep = await server.accept()
    buf = bytearray(64)
    n = await asyncio.wait_for(ep.recv(buf, tag="frames"), TIMEOUT)
    assert bytes(buf[:n]) == payload
    await asyncio.wait_for(ep.send(b"!"), TIMEOUT)
    await join(peer, TIMEOUT)
    assert peer.exitcode == 0
    await asyncio.wait_for(ep.close(), TIMEOUT)
