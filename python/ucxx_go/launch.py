"""Start N local ranks of a Python script, as torchrun and mpirun do.

    python -m ucxx_go.launch -n 4 script.py [script args...]
    python -m ucxx_go.launch -n 4 -m package.module [args...]

Each rank is a process with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
MASTER_ADDR and MASTER_PORT set (torchrun's names) and UCXGO_COMM_SECRET (a fresh
random value, unless the environment has one), which
``ucxx_go.Communicator.init()`` reads. The launcher picks a free port for the root
unless --master-port is given, forwards SIGINT and SIGTERM to the ranks, and when one
rank fails it stops the others (SIGTERM, then SIGKILL after --grace seconds) and exits
with the failing rank's code. With --timeout, ranks still running after that many
seconds are stopped and the launcher exits with 124.
"""

import argparse
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import time


def _free_port(host):
    """A port nothing listens on at host, below the kernel's ephemeral range where it
    can: a port the kernel picked (binding port 0) and this process let go may be
    handed to some outgoing connection before the root listens there."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    pick = random.SystemRandom()
    for _ in range(64 if low > 10001 else 0):
        port = pick.randrange(10000, low)
        with socket.socket(family) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(family) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _stop(procs, grace):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + grace
    for p in procs:
        left = deadline - time.monotonic()
        try:
            p.wait(timeout=max(left, 0))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m ucxx_go.launch", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--nproc", type=int, required=True, help="number of ranks to start")
    ap.add_argument("--master-addr", default="127.0.0.1")
    ap.add_argument("--master-port", type=int, default=0, help="0: a free port")
    ap.add_argument("--timeout", type=float, default=None, help="stop the ranks after this many seconds (exit 124)")
    ap.add_argument("--grace", type=float, default=5.0, help="seconds between SIGTERM and SIGKILL when stopping ranks")
    ap.add_argument("-m", dest="module", action="store_true", help="run the target as a module (python -m)")
    ap.add_argument("target", help="script path, or module name with -m")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    if a.nproc < 1:
        ap.error("-n must be at least 1")
    port = a.master_port or _free_port(a.master_addr)
    cmd = [sys.executable] + (["-m", a.target] if a.module else [a.target]) + a.args
    procs = []
    secret = os.environ.get("UCXGO_COMM_SECRET") or secrets.token_hex(16)
    for r in range(a.nproc):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(a.nproc),
                   LOCAL_WORLD_SIZE=str(a.nproc), MASTER_ADDR=a.master_addr, MASTER_PORT=str(port),
                   UCXGO_COMM_SECRET=secret)
        procs.append(subprocess.Popen(cmd, env=env))

    def forward(signum, _frame):
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    deadline = None if a.timeout is None else time.monotonic() + a.timeout
    while True:
        codes = [p.poll() for p in procs]
        failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            rank, code = failed[0]
            print(f"ucxx_go.launch: rank {rank} exited with {code}; stopping the others", file=sys.stderr)
            _stop(procs, a.grace)
            return code if code > 0 else 128 - code
        if all(c == 0 for c in codes):
            return 0
        if deadline is not None and time.monotonic() > deadline:
            print(f"ucxx_go.launch: ranks still running after {a.timeout} s; stopping them", file=sys.stderr)
            _stop(procs, a.grace)
            return 124
        try:
            procs[[c is None for c in codes].index(True)].wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            pass


if __name__ == "__main__":
    sys.exit(main())
