"""Across hosts: ucxx_go endpoints and a Dask cluster over UCX's TCP between network
namespaces joined by a bridge (tests/_netns.py), IPv4 and IPv6, with
UCX_NET_DEVICES unset. Skipped, saying why, where namespaces cannot be made (they need
root and iproute2; CI runs as root and installs iproute2).
"""

import json
import os
import select
import subprocess
import sys
import time

import pytest

from _netns import Hosts

PEERS = os.path.join(os.path.dirname(__file__), "_multihost_peers.py")
TIMEOUT = 60.0  # one step of a peer: a connect, a cluster start, a computation

_why_not = Hosts.unavailable()
pytestmark = pytest.mark.skipif(_why_not is not None, reason=f"multi-host tests need network namespaces: {_why_not}")


@pytest.fixture(scope="module")
def hosts():
    hosts = Hosts(3)
    yield hosts
    hosts.close()


class Peer:
    """A process on one of the hosts; its JSON lines are its events, the rest its log."""

    def __init__(self, host, *argv, log, env=None):
        self.log_path = log
        self._log = open(log, "w")
        self.proc = host.run(argv, stdout=subprocess.PIPE, stderr=self._log, text=True, env=env or host.env())
        self.lines = []

    def event(self, key, timeout=TIMEOUT):
        """The next event carrying `key`; fails the test if none comes in time."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                pytest.fail(f"no {key!r} from {self.proc.args} within {timeout} s; log:\n{self.log()}")
            line = self.proc.stdout.readline()
            if not line:
                pytest.fail(f"{self.proc.args} exited ({self.proc.wait()}) before {key!r}; log:\n{self.log()}")
            self.lines.append(line)
            if line.startswith("{"):
                event = json.loads(line)
                if key in event:
                    return event[key]

    def exits_cleanly(self, timeout=TIMEOUT):
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail(f"{self.proc.args} still running after {timeout} s; log:\n{self.log()}")
        assert code == 0, f"{self.proc.args} exited with {code}; log:\n{self.log()}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(TIMEOUT)
        self._log.close()

    def log(self):
        self._log.flush()
        with open(self.log_path) as f:
            return f.read()[-4000:]


@pytest.fixture
def peers():
    started = []
    yield started
    for p in started:
        p.stop()


def start(peers, host, *argv, log, env=None):
    p = Peer(host, *argv, log=log, env=env)
    peers.append(p)
    return p


@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
def test_endpoints_across_hosts(hosts, peers, tmp_path, family):
    """A listener on one host, clients on two others: messages from 8 B to 4 MiB
    echoed over TCP on the hosts' own interfaces; then a listener restarted on the
    same port at once (its connections' sockets in TIME_WAIT) serves again."""
    server_host = hosts[0]
    ip = getattr(server_host, family)
    port = "40100"
    sizes = ("8", str(64 << 10), str(4 << 20))
    for round_ in range(2):
        server = start(peers, server_host, sys.executable, PEERS, "echo-server", ip, port, "2", log=tmp_path / f"server{round_}.log")
        assert server.event("ready") == int(port)
        clients = [
            start(peers, hosts[i], sys.executable, PEERS, "echo-client", ip, port, *sizes, log=tmp_path / f"client{i}-{round_}.log")
            for i in (1, 2)
        ]
        for i, client in zip((1, 2), clients):
            result = client.event("result")
            client.exits_cleanly()
            assert result["transports"] and all(t.startswith("tcp:") for t in result["transports"]), result
            assert f"tcp:{hosts[i].device}" in result["transports"], result
            assert result["peer"].rsplit(":", 1)[0] == ip, result
            assert result["local"].rsplit(":", 1)[0] == getattr(hosts[i], family), result
        for _ in clients:
            assert all(t.startswith("tcp:") for t in server.event("served"))
        server.exits_cleanly()


@pytest.mark.parametrize("mode", ["loop", "thread"])
def test_namespaces_of_one_machine_reach_each_other_by_the_network(hosts, peers, tmp_path, mode):
    """Processes on one machine in two network namespaces, with UCX's own transports
    (shared memory included, which UCX would take between them: its wake-ups cannot
    cross network namespaces): their endpoints go over TCP, and echoes after pauses,
    each side's progress asleep, come back at once (they took 1 s each in loop mode
    over shared memory, 18 ms in thread mode)."""
    env = {k: v for k, v in hosts[0].env(UCXGO_PROGRESS_MODE=mode).items() if k != "UCX_TLS"}
    ip, port = hosts[0].ipv4, "40150"
    server = start(peers, hosts[0], sys.executable, PEERS, "echo-server", ip, port, "1", log=tmp_path / "server.log", env=env)
    assert server.event("ready") == int(port)
    client = start(peers, hosts[1], sys.executable, PEERS, "paused-client", ip, port, "10", "20", log=tmp_path / "client.log", env=env)
    result = client.event("result")
    client.exits_cleanly()
    assert result["transports"] and all(t.startswith("tcp:") for t in result["transports"]), result
    assert all(t.startswith("tcp:") for t in server.event("served"))
    assert result["slowest_s"] < 0.5, result
    server.exits_cleanly()


def test_dask_cluster_across_hosts(hosts, peers, tmp_path):
    """A scheduler and a client on one host and a worker on each of two others, all
    over ucxgo://: a p2p rechunk (a shuffle between the workers) computes the right
    sum."""
    dask_exe = os.path.join(os.path.dirname(sys.executable), "dask")
    if not os.path.exists(dask_exe):
        pytest.skip(f"no dask command beside {sys.executable}")
    # Run by this interpreter, not the one its #! line names (a copied virtualenv's
    # scripts name the original's).
    dask_cmd = (sys.executable, dask_exe)
    address = f"ucxgo://{hosts[0].ipv4}:40200"
    scheduler = start(
        peers, hosts[0], *dask_cmd, "scheduler", "--protocol", "ucxgo", "--host", hosts[0].ipv4, "--port", "40200",
        "--no-dashboard", "--dashboard-address", ":0", log=tmp_path / "scheduler.log",
    )
    workers = [
        start(
            peers, hosts[i], *dask_cmd, "worker", address, "--host", hosts[i].ipv4, "--nthreads", "1",
            "--no-dashboard", "--no-nanny", "--memory-limit", "0", log=tmp_path / f"worker{i}.log",
        )
        for i in (1, 2)
    ]
    client = start(peers, hosts[0], sys.executable, PEERS, "dask-client", address, "2", log=tmp_path / "client.log")
    result = client.event("result", timeout=3 * TIMEOUT)
    client.exits_cleanly()
    worker_hosts = {w.split("://")[1].rsplit(":", 1)[0] for w in result["workers"]}
    assert worker_hosts == {hosts[1].ipv4, hosts[2].ipv4}, result
    assert all(w.startswith("ucxgo://") for w in result["workers"]), result
    for p in workers + [scheduler]:
        assert p.proc.poll() is None, f"{p.proc.args} died; log:\n{p.log()}"
