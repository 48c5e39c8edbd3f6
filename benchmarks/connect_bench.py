"""Connection set-up: connect, echo 8 bytes once, close; N times, per library.

    python benchmarks/connect_bench.py -n 50 --rounds 3 [--python-ucxx /path/to/venv/bin/python]

Each library runs an echo server in one process and a client in another. A connection
is timed from the call that opens it until its first 8-byte echo came back (ucxx_go and
RAPIDS ucxx: create_endpoint, send, recv; asyncio: open_connection, write, readexactly);
closing is not timed. Rounds alternate the libraries' order. Reported: median, p90 and
maximum in milliseconds over all connections of all rounds, and each library's median
over asyncio's.
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


async def _serve_ucx(module):
    ucx = __import__(module)

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


async def _client_ucx(module, port, n):
    ucx = __import__(module)
    times = []
    msg, back = bytearray(b"12345678"), bytearray(8)
    for _ in range(n):
        t0 = time.perf_counter()
        ep = await ucx.create_endpoint("127.0.0.1", port)
        await ep.send(msg)
        await ep.recv(back)
        times.append(time.perf_counter() - t0)
        await ep.close()
    return times


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
    return times


def _role(args):
    if args.role == "server":
        coro = _serve_asyncio() if args.backend == "asyncio" else _serve_ucx(MODULES[args.backend])
        asyncio.run(coro)
        return 0
    if args.backend == "asyncio":
        times = asyncio.run(_client_asyncio(args.port, args.n))
    else:
        times = asyncio.run(_client_ucx(MODULES[args.backend], args.port, args.n))
    print(json.dumps(times))
    return 0


def run_backend(python, backend, n, env):
    server = subprocess.Popen([python, HERE, "--role", "server", "--backend", backend], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = server.stdout.readline()
        while line and not line.strip().isdigit():  # UCX may print warnings to stdout first
            line = server.stdout.readline()
        port = int(line)
        out = subprocess.run([python, HERE, "--role", "client", "--backend", backend, "--port", str(port),
                              "-n", str(n)], capture_output=True, text=True, env=env, timeout=600, check=True)
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
    times = {b: [] for b in order}
    for r in range(args.rounds):
        for b in (order if r % 2 == 0 else order[::-1]):
            times[b] += run_backend(pythons[b], b, args.n, env)
    base = statistics.median(times["asyncio"])
    lines = [
        f"Connect + first 8-byte echo, {args.n} connections x {args.rounds} rounds per library "
        f"(`python benchmarks/connect_bench.py -n {args.n} --rounds {args.rounds}`), loopback, "
        f"{os.cpu_count()} CPUs; UCX_* as in the environment.",
        "",
        "| library | median (ms) | p90 (ms) | max (ms) | median / asyncio |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for b in order:
        t = sorted(times[b])
        med = statistics.median(t)
        p90 = percentile(t, 90)
        lines.append(f"| {b} | {med * 1e3:.2f} | {p90 * 1e3:.2f} | {t[-1] * 1e3:.2f} | {med / base:.2f} |")
    emit_markdown(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
