"""Connection set-up: connect, echo 8 bytes once, close; N times, per library.

    python benchmarks/connect_bench.py -n 50 --rounds 3 [--python-ucxx /path/to/venv/bin/python]
        [--warm-up] [--include-start]

Each library runs an echo server in one process and a client in another, both fresh
each round. A connection is timed from the call that opens it until its first 8-byte
echo came back (ucxx_go and RAPIDS ucxx: create_endpoint, send, recv; asyncio:
open_connection, write, readexactly); closing is not timed. The UCX libraries' start
(their init(): the UCX context and worker) is timed apart, before the first
connection; with --include-start it is not called first, so the first create_endpoint
starts the library and its time counts in that connection (this script's measure
before the start was split off). With --warm-up, ucxx_go's server starts with
init(warm_up=True) and its client awaits ucxx_go.warm_up() after init, before the
first connection (with --include-start only the server warms up). Rounds alternate the libraries' order. Reported, in milliseconds:
the start (median over rounds), the first connection of each client (median and max
over rounds), median, p90 and maximum over all connections of all rounds, the
maximum over the later ones, and each library's median over asyncio's.
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time

from _bench_common import emit_markdown, percentile

HERE = os.path.abspath(__file__)
MODULES = {"ucxx-go": "ucxx_go", "ucxx-async": "ucxx"}


async def _serve_ucx(module, warm_up):
    ucx = __import__(module)
    if warm_up:
        ucx.init(warm_up=True)

    async def echo(ep):
        buf = bytearray(8)
        try:
            await ep.recv(buf)
            await ep.send(buf)
        except Exception:  # a client that went away: its next connection is a new one
            pass

    lf = ucx.create_listener(echo)
    print(lf.port, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the driver closes stdin
    lf.close()


async def _serve_asyncio():
    async def echo(reader, writer):
        try:
            writer.write(await reader.readexactly(8))
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    server.close()


async def _client_ucx(module, port, n, include_start, warm_up):
    ucx = __import__(module)
    start = None
    if not include_start:
        t0 = time.perf_counter()
        ucx.init()
        start = time.perf_counter() - t0
        if warm_up:
            await ucx.warm_up()
    times = []
    msg, back = bytearray(b"12345678"), bytearray(8)
    for _ in range(n):
        t0 = time.perf_counter()
        ep = await ucx.create_endpoint("127.0.0.1", port)
        await ep.send(msg)
        await ep.recv(back)
        times.append(time.perf_counter() - t0)
        await ep.close()
    return {"start": start, "times": times}


async def _client_asyncio(port, n):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"12345678")
        await reader.readexactly(8)
        times.append(time.perf_counter() - t0)
        writer.close()
        await writer.wait_closed()
    return {"start": None, "times": times}


def _role(args):
    if args.role == "server":
        coro = _serve_asyncio() if args.backend == "asyncio" else _serve_ucx(MODULES[args.backend], args.warm_up)
        asyncio.run(coro)
        return 0
    if args.backend == "asyncio":
        times = asyncio.run(_client_asyncio(args.port, args.n))
    else:
        times = asyncio.run(_client_ucx(MODULES[args.backend], args.port, args.n, args.include_start, args.warm_up))
    print(json.dumps(times))
    return 0


def run_backend(python, backend, n, env, flags=()):
    """One round of backend: a fresh server and a fresh client making n connections.
    Returns the client's {"start": seconds or None, "times": [seconds per connection]}."""
    server = subprocess.Popen([python, HERE, "--role", "server", "--backend", backend, *flags], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = server.stdout.readline()
        while line and not line.strip().isdigit():  # UCX may print warnings to stdout first
            line = server.stdout.readline()
        port = int(line)
        out = subprocess.run([python, HERE, "--role", "client", "--backend", backend, "--port", str(port),
                              "-n", str(n), *flags], capture_output=True, text=True, env=env, timeout=600, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--role", choices=("driver", "server", "client"), default="driver")
    p.add_argument("--backend", choices=("ucxx-go", "ucxx-async", "asyncio"))
    p.add_argument("--port", type=int)
    p.add_argument("-n", type=int, default=50, help="connections per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--python-ucxx", help="interpreter with RAPIDS ucxx (left out without it)")
    p.add_argument("--warm-up", action="store_true",
                   help="ucxx_go's server and client warm up before the first connection (only the server with --include-start)")
    p.add_argument("--include-start", action="store_true",
                   help="no init() first: the first connection starts the library and counts its start")
    p.add_argument("--out", help="also write the Markdown here")
    args = p.parse_args(argv)
    if args.role != "driver":
        return _role(args)
    env = dict(os.environ)
    env.setdefault("UCX_NET_DEVICES", "lo")
    pythons = {"ucxx-go": sys.executable, "asyncio": sys.executable}
    if args.python_ucxx:
        pythons["ucxx-async"] = args.python_ucxx
    order = list(pythons)
    runs = {b: [] for b in order}
    for r in range(args.rounds):
        for b in (order if r % 2 == 0 else order[::-1]):
            flags = []
            if b == "ucxx-go" and args.warm_up:
                flags.append("--warm-up")
            if b != "asyncio" and args.include_start:
                flags.append("--include-start")
            runs[b].append(run_backend(pythons[b], b, args.n, env, flags))
    base = statistics.median(t for run in runs["asyncio"] for t in run["times"])
    how = ("the first connection starts the library (--include-start)" if args.include_start
           else "each UCX library's init() timed apart, before the first connection")
    warm = "; ucxx_go warms up first (--warm-up)" if args.warm_up else ""
    flags = (" --warm-up" if args.warm_up else "") + (" --include-start" if args.include_start else "")
    lines = [
        f"Connect + first 8-byte echo, {args.n} connections x {args.rounds} rounds per library "
        f"(`python benchmarks/connect_bench.py -n {args.n} --rounds {args.rounds}{flags}`), loopback, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the end; {how}{warm}; "
        "UCX_* as in the environment.",
        "",
        "| library | start (ms) | first (ms, median / max) | median (ms) | p90 (ms) | max (ms) | later max (ms) "
        "| median / asyncio |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for b in order:
        t = sorted(x for run in runs[b] for x in run["times"])
        firsts = [run["times"][0] for run in runs[b]]
        later = [x for run in runs[b] for x in run["times"][1:]]
        starts = [run["start"] for run in runs[b] if run["start"] is not None]
        start = f"{statistics.median(starts) * 1e3:.1f}" if starts else "-"
        med = statistics.median(t)
        p90 = percentile(t, 90)
        lines.append(f"| {b} | {start} | {statistics.median(firsts) * 1e3:.2f} / {max(firsts) * 1e3:.2f} "
                     f"| {med * 1e3:.2f} | {p90 * 1e3:.2f} | {t[-1] * 1e3:.2f} "
                     f"| {max(later) * 1e3 if later else float('nan'):.2f} | {med / base:.2f} |")
    emit_markdown(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
