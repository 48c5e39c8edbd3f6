"""GPU benchmark: cupy arrays between two processes, ucxx_go beside RAPIDS' ucxx (when
importable), beside the same-process device copy, in one run.

    python benchmarks/gpu_bench.py --json gpu.json [--sizes 1MiB,...,1GiB] [--gpus 0,1]

For each size the client sends `iters` messages, keeping `window` of them in flight
(1: each awaited directly before the next, as UCXX's send_recv benchmark does; more:
through asyncio.gather), and the server receives them into `window` preallocated cupy
arrays, then acknowledges with 8 bytes; bandwidth = iters * size / time, in MB/s (1e6
bytes). `--gpus C,S` puts the client
(sender) on GPU C and the server on GPU S (default 0,0). The copy baseline is
cudaMemcpyAsync device to device on one GPU, cudaMemcpyPeerAsync between two (peer
access enabled), on the null stream, timed with events. Both UCX
libraries run in their default configuration (progress thread, endpoint error
handling on: UCX still picks cuda_ipc) and report the transports they used where
they can.
"""

import argparse
import asyncio
import importlib
import json
import multiprocessing
import os
import platform
import sys
import time

from _bench_common import await_window, device_copy_MBps, parse_bytes

os.environ.setdefault("UCX_NET_DEVICES", "lo")

DEFAULT_SIZES = [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]
DEADLINE = 300.0


def iterations(size):
    # 16 GiB a size, 2,000 messages at most: at 1 MiB a window of four took ~15 ms over
    # 200 messages, where one stall moved a round's ratio by a third (RESULTS.md,
    # session 35).
    return max(5, min(2000, (16 << 30) // size))


def warm_ups(window):
    """Messages before the timed ones: 3, and at least one into each of the server's
    `window` buffers, whose first transfer sets up what later ones reuse (CUDA IPC
    handles, caches): the timed messages measure the steady state."""
    return max(3, window)


def _server(module, sizes, window, gpu, port_queue):
    import cupy as cp
    import numpy as np

    cp.cuda.Device(gpu).use()

    lib = importlib.import_module(module)

    async def main():
        done = asyncio.get_running_loop().create_future()

        async def handler(ep):
            try:
                for size in sizes:
                    bufs = [cp.empty(size, dtype=cp.uint8) for _ in range(window)]
                    ack = np.zeros(1, dtype="<u8")
                    for k in range(warm_ups(window)):  # each buffer once: its first use
                        await ep.recv(bufs[k % window])
                    n = iterations(size)
                    for i in range(0, n, window):
                        await await_window(lambda j: ep.recv(bufs[j]), min(window, n - i))
                    await ep.send(ack)
                    del bufs
                await ep.close()
                done.set_result(None)
            except BaseException as e:
                if not done.done():
                    done.set_exception(e)
                raise

        listener = lib.create_listener(handler)
        port_queue.put(listener.port)
        await asyncio.wait_for(done, DEADLINE)
        listener.close()

    asyncio.run(main())


async def _client(module, sizes, window, gpu, port):
    import cupy as cp
    import numpy as np

    cp.cuda.Device(gpu).use()

    lib = importlib.import_module(module)
    ep = await lib.create_endpoint("127.0.0.1", port)
    transports = None
    if hasattr(ep, "get_active_transports"):
        transports = ep.get_active_transports()
    results, warm_up_s = {}, {}
    for size in sizes:
        a = cp.arange(size, dtype=cp.uint8)
        ack = np.empty(1, dtype="<u8")
        cp.cuda.runtime.deviceSynchronize()
        t0 = time.perf_counter()
        for _ in range(warm_ups(window)):  # warm-up: registration, IPC handle caches
            await ep.send(a)
        warm_up_s[str(size)] = time.perf_counter() - t0
        n = iterations(size)
        t0 = time.perf_counter()
        for i in range(0, n, window):
            await await_window(lambda _: ep.send(a), min(window, n - i))
        await ep.recv(ack)
        dt = time.perf_counter() - t0
        results[str(size)] = n * size / dt / 1e6
    await ep.close()
    return {"MBps": results, "warm_ups": warm_ups(window), "warm_up_s": warm_up_s}, transports


def run_pair(module, sizes, window, gpus=(0, 0)):
    """Bandwidth per size from this process (on GPU gpus[0]) to a spawned server (on
    gpus[1]), with `module`."""
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_server, args=(module, sizes, window, gpus[1], q), daemon=True)
    p.start()
    try:
        port = q.get(timeout=120)
        return asyncio.run(asyncio.wait_for(_client(module, sizes, window, gpus[0], port), DEADLINE))
    finally:
        p.join(60)
        if p.is_alive():
            p.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(str(s) for s in DEFAULT_SIZES))
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--markdown", help="write a Markdown table here")
    ap.add_argument("--backends", default="ucxx_go,ucxx", help="modules to compare (ucxx skipped if missing)")
    ap.add_argument("--windows", default="1,4", help="messages in flight, one measurement each")
    ap.add_argument("--gpus", default="0,0", help="client (sender) GPU, server GPU")
    args = ap.parse_args()
    gpus = tuple(int(g) for g in args.gpus.split(","))
    sizes = [parse_bytes(s) for s in args.sizes.split(",")]
    import cupy as cp

    props = cp.cuda.runtime.getDeviceProperties(0)
    res = {
        "device": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
        "python": sys.version.split()[0],
        "host": platform.node(),
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "sizes": sizes,
        "gpus": list(gpus),
        "copy_MBps": {str(s): device_copy_MBps(gpus[0], gpus[1], s, iterations(s)) for s in sizes},
        "backends": {},
    }
    for window in (int(w) for w in args.windows.split(",")):
        for module in args.backends.split(","):
            name = f"{module} w{window}"
            try:
                importlib.import_module(module)
            except Exception as e:
                res["backends"][name] = {"skipped": f"{type(e).__name__}: {e}"}
                continue
            try:
                r, transports = run_pair(module, sizes, window, gpus)
                res["backends"][name] = r | {"transports": transports}
            except Exception as e:
                res["backends"][name] = {"error": f"{type(e).__name__}: {e}"}
    lines = [f"Device: {res['device']}; GPU {gpus[0]} to GPU {gpus[1]}; `{res['command']}`", "",
             "| size | copy MB/s | " + " | ".join(f"{m} MB/s | {m}/copy" for m in res["backends"]) + " |",
             "|---:|---:|" + "---:|---:|" * len(res["backends"])]
    for s in sizes:
        k = str(s)
        row = [f"{s / 2**20:g} MiB", f"{res['copy_MBps'][k]:.0f}"]
        for m, r in res["backends"].items():
            if "MBps" in r:
                row += [f"{r['MBps'][k]:.0f}", f"{r['MBps'][k] / res['copy_MBps'][k]:.2f}"]
            else:
                row += ["-", "-"]
        lines.append("| " + " | ".join(row) + " |")
    for m, r in res["backends"].items():
        if "MBps" in r:
            warm = ", ".join(f"{int(k) / 2**20:g} MiB {v * 1e3:.1f}" for k, v in r["warm_up_s"].items())
            lines.append(f"\n{m}: transports {r.get('transports')}; warm-up ms ({r['warm_ups']} messages): {warm}")
        else:
            lines.append(f"\n{m}: " + (r.get("skipped") or r.get("error")))
    table = "\n".join(lines)
    print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
