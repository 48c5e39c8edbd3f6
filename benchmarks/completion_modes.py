"""Both completion modes side by side: the notifier thread ("thread") and the event
loop watching the completion queue's eventfd ("reader").

    python benchmarks/completion_modes.py [--rounds 3] [--quick] [--json FILE]

For each mode, in one run, alternating modes each round: the 8-byte round trip (p50),
1 MiB bandwidth, and the rate of 4-frame send_multi messages (frames of 64 KiB) between
two processes on loopback. Prints medians over rounds.
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


def _server(mode, q):
    os.environ["UCXGO_COMPLETION_MODE"] = mode
    import numpy as np

    import ucxx_go

    async def handler(ep):
        plan = np.empty(3, dtype="<u8")
        while True:
            try:
                await ep.recv(plan)
            except ucxx_go.UCXError:
                break
            kind, size, count = (int(x) for x in plan)
            if kind == 0:  # echo
                buf = np.empty(size, dtype="u1")
                for _ in range(count):
                    await ep.recv(buf)
                    await ep.send(buf)
            elif kind == 1:  # sink
                buf = np.empty(size, dtype="u1")
                for _ in range(count):
                    await ep.recv(buf)
                await ep.send(b"k")
            else:  # multi sink
                for _ in range(count):
                    await ep.recv_multi()
                await ep.send(b"k")

    asyncio.run(serve_one_client(ucxx_go, handler, q))


async def _client(port, n_lat, n_bw, n_multi):
    import numpy as np

    import ucxx_go

    ep = await ucxx_go.create_endpoint("127.0.0.1", port)
    ack = bytearray(1)
    out = {}
    buf = np.zeros(8, dtype="u1")
    await ep.send(np.array([0, 8, n_lat], dtype="<u8"))
    times = []
    for _ in range(n_lat):
        t0 = time.perf_counter()
        await ep.send(buf)
        await ep.recv(buf)
        times.append(time.perf_counter() - t0)
    out["rtt_8B_p50_us"] = statistics.median(times[len(times) // 10:]) * 1e6
    big = np.zeros(1 << 20, dtype="u1")
    await ep.send(np.array([1, 1 << 20, n_bw], dtype="<u8"))
    t0 = time.perf_counter()
    for _ in range(n_bw):
        await ep.send(big)
    await ep.recv(ack)
    out["bw_1MiB_MBps"] = (1 << 20) * n_bw / (time.perf_counter() - t0) / 1e6
    frames = [np.zeros(64 << 10, dtype="u1") for _ in range(4)]
    await ep.send(np.array([2, 0, n_multi], dtype="<u8"))
    t0 = time.perf_counter()
    for _ in range(n_multi):
        await ep.send_multi(frames)
    await ep.recv(ack)
    out["multi_4x64KiB_msgs_per_s"] = n_multi / (time.perf_counter() - t0)
    await ep.close()
    return out


def run_mode(mode, quick):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_server, args=(mode, q), daemon=True)
    p.start()
    try:
        port = q.get(timeout=30)
        code = (
            "import asyncio, json, os, sys; sys.path.insert(0, %r); os.environ['UCXGO_COMPLETION_MODE'] = %r; "
            "import completion_modes as m; print(json.dumps(asyncio.run(m._client(%d, %d, %d, %d))))"
        ) % (os.path.dirname(os.path.abspath(__file__)), mode, port,
             300 if quick else 3000, 20 if quick else 200, 100 if quick else 1000)
        import subprocess

        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        if res.returncode != 0:
            raise RuntimeError(res.stderr)
        return json.loads(res.stdout.strip().splitlines()[-1])
    finally:
        p.join(10)
        if p.is_alive():
            p.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    results = {"thread": [], "reader": []}
    for _ in range(args.rounds):
        for mode in ("thread", "reader"):
            results[mode].append(run_mode(mode, args.quick))
    keys = list(results["thread"][0])
    med = {m: {k: statistics.median(r[k] for r in rs) for k in keys} for m, rs in results.items()}
    print(f"completion modes, medians of {args.rounds} rounds (2 processes, loopback, UCX default transports)")
    print(f"{'':28}{'thread':>12}{'reader':>12}{'reader/thread':>15}")
    for k in keys:
        t, r = med["thread"][k], med["reader"][k]
        better = t / r if k.startswith("rtt") else r / t
        print(f"{k:28}{t:>12.1f}{r:>12.1f}{better:>14.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"medians": med, "runs": results}, f, indent=2)


if __name__ == "__main__":
    main()
