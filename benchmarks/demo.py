"""The main job: a loopback send/recv between two processes, ucxx_go beside asyncio TCP.

    python benchmarks/demo.py [--quick] [--tls TLS] [--json FILE]

A server process echoes (latency) or sinks (bandwidth) what the client sends; the
client measures, for each transport in one run:
  - the round-trip time of an 8-byte message (median and 99th percentile),
  - the bandwidth of 1 MiB and 64 MiB messages sent back to back,
each after an untimed warm-up. UCX stays on loopback (UCX_NET_DEVICES=lo unless already set).
"""

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import struct
import sys
import time

from _bench_common import serve_one_client

_PLAN = struct.Struct("<QQQ")  # kind (0 latency, 1 bandwidth), size, count


def _percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


# -- ucxx_go ------------------------------------------------------------------------


async def _ucx_server(q):
    import numpy as np

    import ucxx_go

    async def handler(ep):
        plan = bytearray(_PLAN.size)
        while True:
            try:
                await ep.recv(plan)
            except ucxx_go.UCXError:
                break
            kind, size, count = _PLAN.unpack(plan)
            buf = np.empty(max(size, 1), dtype="u1")[:size]
            if kind == 0:
                for _ in range(count):
                    await ep.recv(buf)
                    await ep.send(buf)
            else:
                for _ in range(count):
                    await ep.recv(buf)
                await ep.send(b"k")

    await serve_one_client(ucxx_go, handler, q)


async def _ucx_client(port, cases):
    import numpy as np

    import ucxx_go

    ep = await ucxx_go.create_endpoint("127.0.0.1", port)
    results = {}
    for name, kind, size, count in cases:
        buf = np.zeros(size, dtype="u1")
        ack = bytearray(1)
        await ep.send(_PLAN.pack(kind, size, count))
        if kind == 0:
            times = []
            for _ in range(count):
                t0 = time.perf_counter()
                await ep.send(buf)
                await ep.recv(buf)
                times.append(time.perf_counter() - t0)
            results[name] = times
        else:
            t0 = time.perf_counter()
            for _ in range(count):
                await ep.send(buf)
            await ep.recv(ack)
            results[name] = size * count / (time.perf_counter() - t0)
    await ep.close()
    return results


# -- asyncio TCP streams ------------------------------------------------------------


async def _tcp_server(q, stop):
    async def handler(reader, writer):
        while True:
            try:
                plan = await reader.readexactly(_PLAN.size)
            except asyncio.IncompleteReadError:
                break
            kind, size, count = _PLAN.unpack(plan)
            if kind == 0:
                for _ in range(count):
                    writer.write(await reader.readexactly(size))
                    await writer.drain()
            else:
                for _ in range(count):
                    await reader.readexactly(size)
                writer.write(b"k")
                await writer.drain()
        writer.close()
        stop.set()

    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    q.put(server.sockets[0].getsockname()[1])
    await stop.wait()
    server.close()


async def _tcp_client(port, cases):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    results = {}
    for name, kind, size, count in cases:
        buf = bytes(size)
        writer.write(_PLAN.pack(kind, size, count))
        if kind == 0:
            times = []
            for _ in range(count):
                t0 = time.perf_counter()
                writer.write(buf)
                await writer.drain()
                await reader.readexactly(size)
                times.append(time.perf_counter() - t0)
            results[name] = times
        else:
            t0 = time.perf_counter()
            for _ in range(count):
                writer.write(buf)
                await writer.drain()
            await reader.readexactly(1)
            results[name] = size * count / (time.perf_counter() - t0)
    writer.close()
    await writer.wait_closed()
    return results


# -- driver -------------------------------------------------------------------------


def _serve(which, q):
    async def main():
        if which == "ucxx_go":
            await _ucx_server(q)
        else:
            await _tcp_server(q, asyncio.Event())

    asyncio.run(main())


def _run(which, cases):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    server = ctx.Process(target=_serve, args=(which, q), daemon=True)
    server.start()
    try:
        port = q.get(timeout=30)
        client = _ucx_client if which == "ucxx_go" else _tcp_client
        return asyncio.run(asyncio.wait_for(client(port, cases), 600))
    finally:
        server.join(10)
        if server.is_alive():
            server.kill()


def _cases(quick):
    lat = 200 if quick else 2000
    return [
        ("rtt_8B", 0, 8, lat),
        ("bw_1MiB", 1, 1 << 20, 20 if quick else 200),
        ("bw_64MiB", 1, 64 << 20, 2 if quick else 16),
    ]


def main(argv=None):
    p = argparse.ArgumentParser(prog="python benchmarks/demo.py", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer iterations (a few seconds)")
    p.add_argument("--tls", help="UCX_TLS for ucxx_go (default: UCX's choice)")
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args(argv)
    os.environ.setdefault("UCX_NET_DEVICES", "lo")
    if args.tls:
        os.environ["UCX_TLS"] = args.tls
    cases = _cases(args.quick)
    # Untimed first: round trips, and one message of each bandwidth size (UCX selects
    # its protocol for a size at its first message: milliseconds, which a --quick run's
    # 20 messages of 1 MiB would otherwise carry).
    warm = [("warm", 0, 8, 20), ("warm_1MiB", 1, 1 << 20, 2), ("warm_64MiB", 1, 64 << 20, 1)]
    report = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
              "ucx_tls": os.environ.get("UCX_TLS", "(UCX default)"), "results": {}}
    for which in ("ucxx_go", "asyncio-tcp"):
        res = _run(which, warm + cases)
        for name, *_ in warm:
            res.pop(name)
        lat = res.pop("rtt_8B")
        report["results"][which] = {
            "rtt_8B_p50_us": statistics.median(lat) * 1e6,
            "rtt_8B_p99_us": _percentile(lat, 0.99) * 1e6,
            **{f"{k}_MBps": v / 1e6 for k, v in res.items()},
        }
    import ucxx_go

    report["ucx_version"] = ".".join(map(str, ucxx_go.get_ucx_version()))
    u, t = report["results"]["ucxx_go"], report["results"]["asyncio-tcp"]
    print(f"ucxx_go demo: loopback, two processes, UCX {report['ucx_version']}, UCX_TLS={report['ucx_tls']}")
    print(f"{'':22}{'ucxx_go':>14}{'asyncio TCP':>14}{'ratio':>10}")
    rows = [("8 B round trip p50", "rtt_8B_p50_us", "us"), ("8 B round trip p99", "rtt_8B_p99_us", "us"),
            ("1 MiB bandwidth", "bw_1MiB_MBps", "MB/s"), ("64 MiB bandwidth", "bw_64MiB_MBps", "MB/s")]
    for label, key, unit in rows:
        ratio = t[key] / u[key] if unit == "us" else u[key] / t[key]
        print(f"{label:22}{u[key]:>10.1f} {unit:<4}{t[key]:>10.1f} {unit:<4}{ratio:>8.2f}x")
    print("(ratio: how many times better ucxx_go is)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return report


if __name__ == "__main__":
    main()
