"""fork(): the Go runtime does not survive it, so importing ucxx_go must not start it, a
child forked before first use works, and a child forked after first use gets
UCXForkError at once instead of a hang.

Scenarios that need a process which has imported ucxx_go but never used it run in a
fresh interpreter (_fork_peers.py as a script): this test process has used it. The
others fork this process with multiprocessing's "fork" context; children are joined
with a timeout and their exit codes asserted.
"""

import asyncio
import json
import multiprocessing
import subprocess
import sys

import numpy as np
import pytest

import ucxx_go
from _support import TIMEOUT, exchange, queue_get

import _fork_peers

fork = multiprocessing.get_context("fork")

# A child forked after first use must fail this fast: no call into the Go runtime.
AT_ONCE = 1.0
# A scenario in a fresh interpreter: imports, a fork, an echo (each wait inside is
# bounded by _fork_peers.DEADLINE); well under pytest's timeout.
SCENARIO_TIMEOUT = 90.0


def run_scenario(name):
    """Run _fork_peers.<name>() in a fresh interpreter and return its report."""
    proc = subprocess.run(
        [sys.executable, _fork_peers.__file__, name],
        capture_output=True, text=True, timeout=SCENARIO_TIMEOUT,
    )
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout.splitlines()[-1])


async def join(p, timeout=TIMEOUT):
    await asyncio.get_running_loop().run_in_executor(None, p.join, timeout)
    assert not p.is_alive(), f"{p.name} did not exit within {timeout} s"


def test_import_loads_no_extension():
    r = run_scenario("import_only")
    assert r["loaded_after_import"] == [False, False], "import ucxx_go loaded the extension"
    assert r["threads_after_import"] == r["threads_before"], "import ucxx_go started threads"
    # The checks above can see a load: first use loads the extension and Go's threads.
    assert r["loaded_after_use"] == [True, True]
    assert r["threads_after_use"] > r["threads_after_import"]


# Three fresh tries: when both processes drew their endpoints' tags from Go's runtime
# source, seeded from the AT_RANDOM bytes a fork shares, one try in four failed.
@pytest.mark.parametrize("attempt", range(3))
def test_child_forked_before_first_use_works(attempt):
    r = run_scenario("fork_after_import")
    assert r["echo"] == "ok"
    assert r["child_exitcode"] == 0
    assert r["child_found_extension_loaded"] is False


class AfterUse:
    """This process uses ucxx_go (a listener, a connection, an exchange), then forks a
    child that tries to use it: _fork_peers.after_use_child, whose report is `report`.

    The listener, the client endpoint and a received frame live only in `objects`: the
    child takes them out of its copy, so that dropping them there runs their finalizers."""

    def __init__(self, processes):
        self.processes = processes
        self.accepted = asyncio.Queue()
        self.objects = {"listener": ucxx_go.create_listener(self.accepted.put_nowait)}
        self.server = None

    @property
    def listener(self):
        return self.objects["listener"]

    @property
    def client(self):
        return self.objects["endpoint"]

    async def fork(self, release=None):
        self.objects["endpoint"] = await asyncio.wait_for(
            ucxx_go.create_endpoint("127.0.0.1", self.listener.port), TIMEOUT)
        self.server = await asyncio.wait_for(self.accepted.get(), TIMEOUT)
        await exchange(self.client, self.server, np.arange(1 << 10, dtype="u1"))
        # A received frame of its own (the Go core lent it): the child drops its copy.
        frames, _ = await asyncio.wait_for(asyncio.gather(
            self.server.recv_multi(own_host_min=64 << 10), self.client.send_multi([np.ones(1 << 20, "u1")])), TIMEOUT)
        self.objects["frame"] = frames[0]
        del frames
        results = fork.Queue()
        self.child = fork.Process(
            target=_fork_peers.after_use_child, args=(self.objects, self.listener.port, results, release),
            daemon=True,
        )
        self.child.start()
        self.processes.append(self.child)
        self.report = await queue_get(results, TIMEOUT)

    def close(self):
        for ep in (self.objects.get("endpoint"), self.server):
            if ep is not None:
                ep.abort()
        self.listener.close()


@pytest.fixture
async def after_use(processes):
    a = AfterUse(processes)
    yield a
    a.close()


async def test_child_forked_after_use_gets_fork_error(after_use):
    await after_use.fork()
    await join(after_use.child)
    assert after_use.child.exitcode == 0
    report = after_use.report
    for use, outcome in report["uses"].items():
        assert outcome["type"] == "UCXForkError", f"{use}: {outcome}"
        assert outcome["is_ucx_error"], use
        assert outcome["seconds"] < AT_ONCE, f"{use} took {outcome['seconds']:.2f} s"
        for words in ("fork()", "'spawn'", "'forkserver'"):
            assert words in outcome["message"], f"{use}: {outcome['message']}"
    assert report["endpoint_collected"]
    assert report["unraisable"] == [], "errors in the inherited objects' finalizers"


def test_fork_error_is_exported():
    assert issubclass(ucxx_go.UCXForkError, ucxx_go.UCXError)
    assert ucxx_go.exceptions.UCXForkError is ucxx_go.UCXForkError
    assert "UCXForkError" in ucxx_go.__all__


async def test_parent_works_after_fork(after_use):
    release = fork.Event()
    await after_use.fork(release)
    assert after_use.report["uses"]["inherited Endpoint.send"]["type"] == "UCXForkError"
    client, server = after_use.client, after_use.server
    # While the child that tried (and closed what it inherited) is alive, and after it
    # exits, the connection made before the fork works both ways, and so do new ones.
    await exchange(client, server, np.arange(1 << 20, dtype="u1") % 251)
    await exchange(server, client, np.arange(1 << 10, dtype="u1"))
    release.set()
    await join(after_use.child)
    assert after_use.child.exitcode == 0
    await exchange(client, server, np.arange(4 << 20, dtype="u1") % 253)
    other = await asyncio.wait_for(ucxx_go.create_endpoint("127.0.0.1", after_use.listener.port), TIMEOUT)
    try:
        other_server = await asyncio.wait_for(after_use.accepted.get(), TIMEOUT)
        await exchange(other, other_server, np.arange(1 << 16, dtype="u1") % 7)
        await asyncio.wait_for(other_server.close(), TIMEOUT)
    finally:
        await asyncio.wait_for(other.close(), TIMEOUT)
