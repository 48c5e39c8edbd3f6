"""Helpers shared by the tests: the timeouts every module bounds its waits with, a
listener that hands over its endpoints, spawned peers, the Go engine's counts, and
bounded waits. Fixtures built on them live in conftest.py.

How a test waits for something: await the thing itself (a Future, a task, an
asyncio.Event set by a callback, a queue a peer writes to). Only state with nothing to
await (the Go engine's counts, a probe match, a file appearing) is polled, with
wait_for_condition, which is bounded in time and in polls.
"""

import asyncio
import inspect
import math
import multiprocessing
import os
import sys
import textwrap
import time
import weakref

import numpy as np
import pytest

import ucxx_go

TIMEOUT = 10.0  # bound on any await that a bug could leave hanging
STARTUP = 30.0  # a spawned interpreter imports numpy and ucxx_go before it answers
PROMPT = 5.0  # bound on a failure that must be reported promptly (a peer gone, a close)
SETTLE = 2.0  # bound on Go-side state catching up with what Python saw complete
# Every await in a spawned peer (_peers.py, _api_peers.py, _multi_peers.py): a peer whose
# parent is gone must not linger.
PEER_DEADLINE = 30.0
# The GPU tests (tests/gpu/) and their peer: CUDA's start-up and transfers of up to 1 GiB.
GPU_TIMEOUT = 120.0

MiB = 1 << 20

mp = multiprocessing.get_context("spawn")


# -- bounded waits -------------------------------------------------------------------------


async def wait_for_condition(predicate, what, timeout=PROMPT, interval=0.005):
    """Poll `predicate()` until it returns something true, and return that; fail the test
    with "`what`: not within `timeout` s" otherwise.

    Only for state with nothing to await. The first poll is immediate, the second after
    one turn of the event loop, then every `interval` s; the loop ends at the deadline or
    after as many polls as fit in it, whichever comes first. `what` may be a callable
    giving the message (for one that shows the last state polled).
    """
    deadline = time.monotonic() + timeout
    for poll in range(math.ceil(timeout / interval) + 2):
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0 if poll == 0 else interval)
    pytest.fail(f"{what() if callable(what) else what}: not within {timeout} s")


def block_until(predicate, what, timeout=TIMEOUT, interval=0.001):
    """wait_for_condition without running the event loop (so without draining
    completions): for a test that must see Go finish before Python hears of it."""
    deadline = time.monotonic() + timeout
    for _ in range(math.ceil(timeout / interval) + 1):
        if predicate():
            return
        if time.monotonic() > deadline:
            break
        time.sleep(interval)
    pytest.fail(f"{what}: not within {timeout} s")


async def started(*coros):
    """Start each coroutine as a task, in this order, and return the tasks once every one
    has run up to its first suspension.

    A ucxx_go operation submits its request to the engine before it first suspends, and
    the engine's progress thread takes submissions in order: what a test does after this
    comes after those requests. (Nothing signals that a task has started; its
    coroutine's state says so.)
    """
    tasks = [asyncio.ensure_future(c) for c in coros]

    def all_started():
        return all(t.done() or inspect.getcoroutinestate(t.get_coro()) != inspect.CORO_CREATED for t in tasks)

    await wait_for_condition(all_started, f"{len(tasks)} tasks starting", timeout=TIMEOUT)
    return tasks


# -- the Go engine's counts ----------------------------------------------------------------


def engine_stats():
    """What the Go engine holds: (requests in flight, endpoints, listeners, bytes of held
    unexpected messages, sends flow control holds back). The call runs on the progress
    thread, after every submission made before it."""
    return tuple(int(x) for x in ucxx_go._bridge.ext.pybridge_Stats().split())


def in_flight():
    """The number of requests the Go engine holds."""
    return engine_stats()[0]


async def wait_stats(in_flight=None, endpoints=None, listeners=None, timeout=SETTLE):
    """Wait until the engine holds what is expected (None leaves a count unchecked)."""
    want = (in_flight, endpoints, listeners)
    got = None

    def matches():
        nonlocal got
        got = engine_stats()
        return all(w is None or w == g for w, g in zip(want, got))

    await wait_for_condition(
        matches, lambda: f"the engine's (in flight, endpoints, listeners): {got}, expected {want}", timeout
    )


async def wait_in_flight(expected, timeout=SETTLE):
    """Wait until the engine holds `expected` requests."""
    await wait_stats(in_flight=expected, timeout=timeout)


# -- connections ---------------------------------------------------------------------------


# How listeners and endpoints connect (UCXGO_CONNECT, read once by the Go core):
# "address" (the default) or "manager" (UCX's connection manager). `make test` runs the
# tests of the manager's own rules in a second pytest with UCXGO_CONNECT=manager.
CONNECT_VIA = os.environ.get("UCXGO_CONNECT") or "address"
needs_manager = pytest.mark.skipif(CONNECT_VIA != "manager", reason="UCX's connection manager's rule (UCXGO_CONNECT=manager)")
by_address = pytest.mark.skipif(CONNECT_VIA == "manager", reason="connections by address exchange (UCXGO_CONNECT=address)")


class Server:
    """A listener that hands each accepted endpoint to the test, and at the end aborts
    them and the clients it connected that are still referenced (a test may drop one to
    see its finalizer abort it).

    The listener is made on first use (so a test may still call ucxx_go.init first);
    `listener_kwargs` go to ucxx_go.create_listener (port, ip, endpoint_error_handling, ...).
    """

    def __init__(self, handler=None, **listener_kwargs):
        self.accepted = asyncio.Queue()
        self.endpoints = []  # accepted
        self._clients = weakref.WeakSet()
        self._handler = handler
        self._listener_kwargs = listener_kwargs
        self._listener = None

    @property
    def listener(self):
        if self._listener is None:
            self._listener = ucxx_go.create_listener(self._on_accept, **self._listener_kwargs)
        return self._listener

    def _on_accept(self, ep):
        self.endpoints.append(ep)
        self.accepted.put_nowait(ep)
        if self._handler is not None:
            return self._handler(ep)

    async def accept(self):
        """The next endpoint the listener accepted."""
        return await asyncio.wait_for(self.accepted.get(), TIMEOUT)

    async def connect(self, host="127.0.0.1", **kwargs):
        """Connect a client to `host`; return (client endpoint, server endpoint)."""
        port = self.listener.port
        client = await asyncio.wait_for(ucxx_go.create_endpoint(host, port, **kwargs), TIMEOUT)
        self._clients.add(client)
        return client, await self.accept()

    def close(self):
        for ep in [*self.endpoints, *self._clients]:
            ep.abort()
        if self._listener is not None:
            self._listener.close()


async def exchange(sender, receiver, payload, **tags):
    """Send `payload` from `sender`, receive it on `receiver`, check it arrived whole."""
    out = np.zeros(len(payload), dtype="u1")
    n, _ = await asyncio.wait_for(asyncio.gather(receiver.recv(out, **tags), sender.send(payload, **tags)), TIMEOUT)
    assert n == len(payload)
    assert out.tobytes() == bytes(payload)


async def barrier(sender, receiver):
    """A 1-byte message from `sender` to `receiver` on a tag of its own, sent after
    everything `sender` submitted before the call: UCX delivers a connection's messages
    in order, so once it is in, so is all that (eager messages and frames, headers, the
    announcements of rendezvous ones)."""
    out = bytearray(1)
    await asyncio.wait_for(
        asyncio.gather(receiver.recv(out, tag="barrier"), sender.send(b"!", tag="barrier")), TIMEOUT
    )


async def close_or_abort(ep, how):
    """End `ep` as a test parametrized by `how` says: "close" (awaited) or "abort"."""
    if how == "close":
        await asyncio.wait_for(ep.close(), TIMEOUT)
    else:
        assert how == "abort", how
        ep.abort()


class CloseCallback:
    """`ep`'s close callback, set with `args` and `kwargs` for the endpoint to pass back:
    `calls` holds the (args, kwargs) of each call, and the asyncio.Event `called` is
    set at the first."""

    def __init__(self, ep, *args, **kwargs):
        self.calls = []
        self.called = asyncio.Event()
        ep.set_close_callback(self._on_close, cb_args=args, cb_kwargs=kwargs)

    def _on_close(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        self.called.set()

    async def wait(self, timeout=PROMPT):
        await asyncio.wait_for(self.called.wait(), timeout)


async def broken_by_peer(operation, since):
    """Await `operation`, pending when the peer closed or went away at `since` (a
    time.monotonic() reading): it must fail within PROMPT s with a UCXError other than
    UCXCloseError (broken by the peer, not closed by us). Returns the error."""
    with pytest.raises(ucxx_go.UCXError) as info:
        await asyncio.wait_for(operation, PROMPT)
    elapsed = time.monotonic() - since
    assert elapsed < PROMPT, f"the pending operation failed {elapsed:.2f} s after the peer went away"
    assert not isinstance(info.value, ucxx_go.UCXCloseError), "broken by the peer, not closed by us"
    return info.value


def refuse_submissions(monkeypatch, *names):
    """Make the named functions of the Go extension (pybridge_TagSend, pybridge_TagRecv,
    pybridge_SendMulti, pybridge_RecvMulti, ...) fail the test if called: what a check
    refuses must never reach the engine. `monkeypatch.undo()` lets them through again."""
    from ucxx_go._bridge import ext

    def refuse(*args):
        raise AssertionError("a request was submitted to the engine")

    for name in names:
        getattr(ext, name)  # loads the extension, so the patch is not undone by loading
        monkeypatch.setattr(ext, name, refuse)


# -- spawned peers -------------------------------------------------------------------------


def start(processes, target, *args):
    """Spawn a daemon process running target(*args); `processes` is conftest's fixture."""
    p = mp.Process(target=target, args=args, daemon=True)
    p.start()
    processes.append(p)
    return p


async def queue_get(q, timeout=STARTUP):
    """Get from a multiprocessing queue without blocking the event loop."""
    return await asyncio.get_running_loop().run_in_executor(None, q.get, True, timeout)


async def join(p, timeout=STARTUP):
    """Join process `p` without blocking the event loop; fail if it is still running."""
    await asyncio.get_running_loop().run_in_executor(None, p.join, timeout)
    assert not p.is_alive(), f"{p.name} did not exit within {timeout} s"


# python -m ucxx_go.launch, for tests that start ranks as processes.
LAUNCH = [sys.executable, "-m", "ucxx_go.launch"]


def rank_script(tmp_path, body):
    """Write body (dedented) as a script in tmp_path; its path."""
    p = tmp_path / "rank.py"
    p.write_text(textwrap.dedent(body))
    return str(p)


def cupy_gpus():
    """cupy and the number of CUDA GPUs it sees, for a tests/gpu module to call at its
    top: the module is skipped where cupy or a GPU is missing."""
    cp = pytest.importorskip("cupy")
    try:
        n = cp.cuda.runtime.getDeviceCount()
    except Exception:  # no driver: cupy imports, CUDA does not  # noqa: BLE001
        n = 0
    if n == 0:
        pytest.skip("no CUDA GPU", allow_module_level=True)
    return cp, n
