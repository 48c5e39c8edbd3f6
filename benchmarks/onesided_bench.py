"""One-sided transfers beside two-sided send/recv, and registration cost, on one host.

    python benchmarks/onesided_bench.py [--sizes 8 64KiB 1MiB 16MiB] [--tls default tcp] [--json FILE]

A target process registers 64 MiB and hands its packed key to the client process,
which measures, for each size and each UCX_TLS setting (both processes):
  - put bandwidth: puts of one size back to back (8 in flight), then a flush;
  - get bandwidth: the same with gets;
  - send bandwidth: sends of the size the target receives (8 in flight), then an ack;
  - 8-byte latency: put then flush (the data is at the peer) beside send then the
    peer's 8-byte answer (a round trip), medians.
Registration (one process): 1,000 distinct 1 MiB buffers registered cold, then again
(cached: a lookup), per buffer. Medians over --rounds.
"""

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import sys
import time

from _bench_common import serve_one_client

os.environ.setdefault("UCX_NET_DEVICES", "lo")
os.environ.setdefault("UCXGO_ONE_SIDED", "1")  # one-sided transfers are off by default

MiB = 1 << 20
AREA = 64 * MiB
WINDOW = 8


def _size(s):
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for u, m in units.items():
        if s.endswith(u):
            return int(s[: -len(u)]) * m
    return int(s)


def _target(q, tls):
    if tls != "default":
        os.environ["UCX_TLS"] = tls
    import numpy as np

    import ucxx_go

    async def handler(ep):
        buf = np.zeros(AREA, dtype="u1")
        region = ucxx_go.register(buf)
        await ep.send_obj(region.pack())
        ack = np.zeros(8, dtype="u1")
        sink = np.empty(AREA, dtype="u1")
        try:
            while True:
                plan = np.zeros(2, dtype="<u8")
                await ep.recv(plan)
                size, count = int(plan[0]), int(plan[1])
                if size == 0:
                    break
                if count > 0:  # bandwidth: take count messages of size, then ack
                    for _ in range(count):
                        await ep.recv(sink[:size])
                    await ep.send(ack)
                    continue
                await ep.send(ack)  # latency: answer each of `size` 8-byte messages
                for _ in range(size):
                    await ep.recv(ack)
                    await ep.send(ack)
        except ucxx_go.UCXError:
            pass

    asyncio.run(serve_one_client(ucxx_go, handler, q))


async def _client(port, sizes, rounds):
    import numpy as np

    import ucxx_go

    ep = await ucxx_go.create_endpoint("127.0.0.1", port)
    remote = ep.unpack_remote(await ep.recv_obj())
    src = ucxx_go.register(np.ones(AREA, dtype="u1"))
    ack = np.zeros(8, dtype="u1")
    out = {}
    for size in sizes:
        count = max(WINDOW, min(512, (256 * MiB) // size))
        row = {}
        for name in ("put", "get", "send"):
            rates = []
            for _ in range(rounds):
                t0 = time.perf_counter()
                if name == "send":
                    await ep.send(np.array([size, count], dtype="<u8"))
                    for i in range(0, count, WINDOW):
                        await asyncio.gather(*(ep.send(src.buffer[:size]) for _ in range(min(WINDOW, count - i))))
                    await ep.recv(ack)
                else:
                    op = ep.put if name == "put" else ep.get
                    local = src if size == AREA else np.ones(size, dtype="u1")
                    for i in range(0, count, WINDOW):
                        await asyncio.gather(*(op(local, remote, offset=0) for _ in range(min(WINDOW, count - i))))
                    await ep.flush()
                rates.append(size * count / (time.perf_counter() - t0))
            row[name + "_MBps"] = statistics.median(rates) / 1e6
        out[size] = row
    # 8-byte latency: put + flush, beside a send and the peer's answer.
    eight = np.ones(8, dtype="u1")
    n = 2000
    lat = {"put_flush_us": [], "send_answer_us": []}
    for _ in range(n):
        t0 = time.perf_counter()
        await ep.put(eight, remote)
        await ep.flush()
        lat["put_flush_us"].append((time.perf_counter() - t0) * 1e6)
    await ep.send(np.array([n, 0], dtype="<u8"))
    await ep.recv(ack)
    for _ in range(n):
        t0 = time.perf_counter()
        await ep.send(eight)
        await ep.recv(ack)
        lat["send_answer_us"].append((time.perf_counter() - t0) * 1e6)
    out["latency"] = {k: statistics.median(v) for k, v in lat.items()}
    await ep.send(np.array([0, 0], dtype="<u8"))
    await ep.close()
    return out


def _registration():
    import numpy as np

    import ucxx_go

    ucxx_go.init()  # not timed: the context's start
    bufs = [np.ones(MiB, dtype="u1") for _ in range(1000)]
    t0 = time.perf_counter()
    regions = [ucxx_go.register(b) for b in bufs]
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = [ucxx_go.register(b) for b in bufs]
    cached = time.perf_counter() - t0
    del regions, again
    return {"cold_ms_per_1000": cold * 1e3, "cached_us_each": cached / len(bufs) * 1e6}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", nargs="+", default=["8", "64KiB", "1MiB", "16MiB"])
    p.add_argument("--tls", nargs="+", default=["default", "tcp"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json")
    args = p.parse_args()
    sizes = [_size(s) for s in args.sizes]
    result = {"registration": _registration()}
    ctx = mp.get_context("spawn")
    for tls in args.tls:
        q = ctx.Queue()
        target = ctx.Process(target=_target, args=(q, tls), daemon=True)
        target.start()
        port = q.get(timeout=60)
        if tls != "default":
            os.environ["UCX_TLS"] = tls
        code = (f"import asyncio, json, sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
                f"import onesided_bench as b; print(json.dumps(asyncio.run(b._client({port}, {sizes}, {args.rounds}))))")
        import subprocess

        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=os.environ)
        os.environ.pop("UCX_TLS", None)
        target.join(30)
        if res.returncode != 0:
            raise SystemExit(f"client ({tls}) failed:\n{res.stderr[-3000:]}")
        result[tls] = json.loads(res.stdout.strip().splitlines()[-1])
    reg = result["registration"]
    print(f"registration: 1,000 x 1 MiB cold {reg['cold_ms_per_1000']:.1f} ms, cached {reg['cached_us_each']:.2f} us each")
    for tls in args.tls:
        print(f"\nUCX_TLS={tls}")
        print(f"{'size':>10} {'put MB/s':>10} {'get MB/s':>10} {'send MB/s':>10}")
        for size in sizes:
            r = result[tls][str(size)] if str(size) in result[tls] else result[tls][size]
            print(f"{size:>10} {r['put_MBps']:>10.0f} {r['get_MBps']:>10.0f} {r['send_MBps']:>10.0f}")
        lat = result[tls]["latency"]
        print(f"8 B: put + flush {lat['put_flush_us']:.1f} us, send + answer {lat['send_answer_us']:.1f} us (medians)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
