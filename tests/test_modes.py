"""Every progress, submission and completion mode carries the same traffic."""

import asyncio

import numpy as np
import pytest

import ucxx_go
from ucxx_go import _context
import _peers  # tests/ is on sys.path (conftest.py's directory)
from _support import TIMEOUT, join, mp, queue_get, start

MODES = [
    dict(),
    dict(enable_delayed_submission=False),
    dict(progress_mode="thread-polling"),
    dict(progress_mode="polling"),
    dict(progress_mode="blocking"),
    dict(completion_mode="reader"),
    dict(completion_mode="reader", enable_delayed_submission=False),
    dict(engine_progress="loop"),
    dict(engine_progress="loop", enable_delayed_submission=False),
]


@pytest.mark.parametrize("kwargs", MODES, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()) or "default")
async def test_mode_echo(kwargs):
    ucxx_go.init(**kwargs)
    info = ucxx_go.info()
    if "enable_delayed_submission" in kwargs:
        assert info["delayed_submission"] is kwargs["enable_delayed_submission"]
    if "completion_mode" in kwargs:
        assert info["completion_mode"] == kwargs["completion_mode"]
    if "polling" in kwargs.get("progress_mode", ""):
        assert info["engine_wait"] == "polling"
    if kwargs.get("engine_progress") == "loop":
        assert info["engine_wait"] == "loop" and info["engine_progress"] == "loop"
        assert info["completion_mode"] == "reader"

    async def handler(ep):
        buf = np.empty(1 << 16, dtype="u1")
        for _ in range(20):
            await ep.recv(buf)
            await ep.send(buf)
        await ep.close()

    listener = ucxx_go.create_listener(handler)
    ep = await ucxx_go.create_endpoint("127.0.0.1", listener.port)
    out = np.empty(1 << 16, dtype="u1")
    for i in range(20):
        msg = np.full(1 << 16, i, dtype="u1")
        await asyncio.wait_for(ep.send(msg), TIMEOUT)
        await asyncio.wait_for(ep.recv(out), TIMEOUT)
        assert (out == i).all()
    await ep.close()
    listener.close()


def test_environment_selects_modes(monkeypatch):
    monkeypatch.setenv("UCXPY_ENABLE_DELAYED_SUBMISSION", "0")
    monkeypatch.setenv("UCXPY_PROGRESS_MODE", "thread-polling")
    monkeypatch.setenv("UCXGO_COMPLETION_MODE", "reader")
    ucxx_go.init()
    info = ucxx_go.info()
    assert info["delayed_submission"] is False
    assert info["engine_wait"] == "polling"
    assert info["completion_mode"] == "reader"
    assert ucxx_go.progress_mode() == "thread-polling"


@pytest.mark.parametrize("value, on", [("1", True), ("n", True), ("yes", True), ("0", False), ("off", False)])
def test_delayed_submission_read_as_ucxx_reads_it(monkeypatch, value, on):
    # UCXX turns it off only for "0" (application_context.py); "n" stays on there too.
    monkeypatch.setenv("UCXPY_ENABLE_DELAYED_SUBMISSION", value)
    ucxx_go.init()
    assert ucxx_go.info()["delayed_submission"] is on


@pytest.mark.parametrize("value", ["thread", "loop", "auto"])
def test_environment_selects_engine_progress(monkeypatch, value):
    monkeypatch.setenv("UCXGO_PROGRESS_MODE", value)
    ucxx_go.init()
    info = ucxx_go.info()
    want = _context.choose_engine_progress() if value == "auto" else value
    assert info["engine_progress"] == want
    assert (info["engine_wait"] == "loop") == (want == "loop")


async def echo_five_bytes(ep):
    """A listener's handler: echo one 5-byte message, then close."""
    buf = bytearray(5)
    await ep.recv(buf)
    await ep.send(buf)
    await ep.close()


async def test_loop_progress_serves_other_threads():
    """In loop mode a call from another thread (here: a thread pool's) is dispatched by
    the owner's event loop, through the submission pool."""
    ucxx_go.init(engine_progress="loop")

    listener = ucxx_go.create_listener(echo_five_bytes)
    loop = asyncio.get_running_loop()
    # Listen's twin off the owner thread: an onThread call the owner's loop serves.
    address = await asyncio.wait_for(loop.run_in_executor(None, ucxx_go.get_worker_address), TIMEOUT)
    assert address is not None
    ep = await ucxx_go.create_endpoint("127.0.0.1", listener.port)
    await asyncio.wait_for(ep.send(bytearray(b"hello")), TIMEOUT)
    out = bytearray(5)
    await asyncio.wait_for(ep.recv(out), TIMEOUT)
    assert out == b"hello"
    await ep.close()
    listener.close()


def test_bad_modes_are_refused():
    with pytest.raises(ValueError):
        ucxx_go.init(progress_mode="warp-speed")
    with pytest.raises(ValueError):
        ucxx_go.init(completion_mode="carrier-pigeon")
    ucxx_go.init()  # a refused init left nothing behind


def test_loop_progress_refuses_an_execution_context_with_transfers():
    """The DAG's waits would block the thread that progresses its transfers in loop
    mode: ExecutionContext(transfers=True) says so instead of hanging; without
    transfers it needs no engine and works."""
    ucxx_go.init(engine_progress="loop")
    with pytest.raises(ucxx_go.exceptions.UCXUnsupportedError, match="engine_progress"):
        ucxx_go.ExecutionContext(gpus=[], transfers=True)
    ucxx_go.ExecutionContext(gpus=[], transfers=False).close()


async def test_new_event_loop_after_reset_free_use():
    """A context used from one asyncio.run and then another (pytest's loops) keeps working."""
    listener = ucxx_go.create_listener(echo_five_bytes)
    ep = await ucxx_go.create_endpoint("127.0.0.1", listener.port)
    await ep.send(b"hello")
    out = bytearray(5)
    await asyncio.wait_for(ep.recv(out), TIMEOUT)
    assert out == b"hello"
    await ep.close()
    listener.close()


@pytest.mark.parametrize("completion_mode", ["reader", "thread"])
@pytest.mark.parametrize("progress_mode", ["thread", "thread-polling"])
async def test_many_small_round_trips(progress_mode, completion_mode):
    """Request/response traffic is where a lost wake-up hangs: each side waits for the
    other's one message. 500 round trips in each mode, each bounded in time."""
    ucxx_go.init(progress_mode=progress_mode, completion_mode=completion_mode)

    async def handler(ep):
        buf = bytearray(8)
        for _ in range(500):
            await ep.recv(buf)
            await ep.send(buf)
        await ep.close()

    listener = ucxx_go.create_listener(handler)
    ep = await ucxx_go.create_endpoint("127.0.0.1", listener.port)
    out = bytearray(8)
    for i in range(500):
        await asyncio.wait_for(ep.send(i.to_bytes(8, "little")), 5)
        await asyncio.wait_for(ep.recv(out), 5)
        assert int.from_bytes(out, "little") == i
    if completion_mode == "thread":
        # The notifier thread keeps the Future pool topped up off the loop's thread.
        assert len(ucxx_go._context.get().completions._pool) > 0
    await ep.close()
    listener.close()


async def test_loop_mode_large_frames_between_processes(processes):
    """Two processes in loop mode echo messages whose frames go every way the loop
    mode's UCX settings send them between processes of one host: eager (small),
    multi-fragment eager (to 4 MiB) and, from 4 MiB, CMA's rendezvous where the
    context has no CUDA memory (core.LoopUCXDefaults); every byte comes back."""
    ucxx_go.init(engine_progress="loop")
    sizes = [40, 100 << 10, 1 << 20, (4 << 20) - 1, 4 << 20, 24 << 20]
    ports = mp.Queue()
    peer = start(processes, _peers.loop_multi_echo_server, ports, 3)
    ep = await ucxx_go.create_endpoint("127.0.0.1", await queue_get(ports))
    rng = np.random.default_rng(7)
    for _ in range(3):
        frames = [rng.integers(0, 256, n, dtype=np.uint8) for n in sizes]
        await asyncio.wait_for(ep.send_multi(frames), TIMEOUT)
        back = await asyncio.wait_for(ep.recv_multi(own_host_min=64 << 10), TIMEOUT)
        assert [len(b) for b in back] == sizes
        for sent, got in zip(frames, back):
            assert np.array_equal(sent, np.asarray(got)), f"a frame of {sent.nbytes} bytes came back changed"
    await ep.close()
    await join(peer)
    assert peer.exitcode == 0
