"""Several hosts on one machine: Linux network namespaces joined by a bridge.

`Hosts(n)` makes n namespaces, each with its own loopback and one veth into a bridge
that lives in a namespace of its own, with IPv4 10.<net>.0.<i+1>/24 and IPv6
fd<net>::<i+1>/64 (i = 0..n-1). `host.run(argv, ...)` starts a process in it. Needs
root and iproute2 (`ip`); `Hosts.unavailable()` says why they cannot be made, for a
skip message.

The namespaces share the machine, so UCX would still see one host and move data over
shared memory between them (ucxx_go's own connections go over the network there, as
README.md says; UCX's connection manager's do not); processes started here therefore
get UCX_TLS=^sm (TCP, as between machines, whichever way they connect), and
UCX_NET_DEVICES unset (every interface of their host).
"""

import os
import shutil
import subprocess
import sys

HOST_ENV_DROP = ("UCX_NET_DEVICES",)
HOST_ENV = {"UCX_TLS": "^sm"}


def _ip(*args, check=True):
    return subprocess.run(("ip",) + args, check=check, capture_output=True, text=True, timeout=30)


class Host:
    def __init__(self, ns, ipv4, ipv6, device):
        self.ns, self.ipv4, self.ipv6, self.device = ns, ipv4, ipv6, device

    def env(self, **extra):
        env = {k: v for k, v in os.environ.items() if k not in HOST_ENV_DROP}
        env.update(HOST_ENV)
        env.update(extra)
        return env

    def run(self, argv, **kwargs):
        """Start argv in this host's namespace (a subprocess.Popen)."""
        kwargs.setdefault("env", self.env())
        return subprocess.Popen(("ip", "netns", "exec", self.ns) + tuple(argv), **kwargs)

    def __repr__(self):
        return f"<Host {self.ns} {self.ipv4} {self.ipv6}>"


class Hosts:
    def __init__(self, n, net=78):
        tag = f"ux{os.getpid() % 100000}"
        self.switch = f"{tag}sw"
        self.hosts = []
        self._made = []
        try:
            self._add_ns(self.switch)
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "br0", "up")
            for i in range(n):
                ns, dev = f"{tag}h{i}", f"eth{i}"
                self._add_ns(ns)
                _ip("link", "add", f"{tag}a{i}", "type", "veth", "peer", "name", f"{tag}b{i}")
                _ip("link", "set", f"{tag}a{i}", "netns", ns, "name", dev)
                _ip("link", "set", f"{tag}b{i}", "netns", self.switch)
                _ip("-n", self.switch, "link", "set", f"{tag}b{i}", "master", "br0", "up")
                ipv4, ipv6 = f"10.{net}.0.{i + 1}", f"fd{net}::{i + 1}"
                _ip("-n", ns, "addr", "add", f"{ipv4}/24", "dev", dev)
                _ip("-n", ns, "addr", "add", f"{ipv6}/64", "dev", dev, "nodad")
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "link", "set", dev, "up")
                self.hosts.append(Host(ns, ipv4, ipv6, dev))
        except BaseException:
            self.close()
            raise

    def _add_ns(self, ns):
        _ip("netns", "add", ns)
        self._made.append(ns)

    def close(self):
        for ns in reversed(self._made):
            _ip("netns", "del", ns, check=False)
        self._made = []

    def __getitem__(self, i):
        return self.hosts[i]

    @staticmethod
    def unavailable():
        """Why namespaces cannot be made here, or None."""
        if not sys.platform.startswith("linux"):
            return "network namespaces are Linux's"
        if shutil.which("ip") is None:
            return "no `ip` command (iproute2)"
        if os.geteuid() != 0:
            return "making network namespaces needs root"
        probe = f"ux{os.getpid() % 100000}probe"
        r = _ip("netns", "add", probe, check=False)
        if r.returncode != 0:
            return f"`ip netns add` failed: {r.stderr.strip()}"
        _ip("netns", "del", probe, check=False)
        return None
