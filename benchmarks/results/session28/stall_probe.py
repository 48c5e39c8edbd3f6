"""Session 28: where an ordered 16 MiB call's slow launches lose their time. One rank a
GPU; per op, 20 batches of ten stream-ordered calls then a synchronize: each await's
host time, how many calls left their crossing into Go for a worker thread (SPIN_US
passed: the ranks out of step), the batch's time a call. Rank 0 prints one line a batch.

    python -m ucxx_go.launch -n 2 benchmarks/results/session28/stall_probe.py [OPS] [MiB]

SPIN_US=N sets the crossing's patience (µs).
"""
import asyncio
import os
import statistics
import sys
import time

import cupy as cp

import ucxx_go
import ucxx_go._communicator as comm_mod

hops = 0
_rest = comm_mod._rest


def counting_rest(ticket, keep):
    global hops
    hops += 1
    return _rest(ticket, keep)


comm_mod._rest = counting_rest
if os.environ.get("SPIN_US"):
    comm_mod.SPIN_US = int(os.environ["SPIN_US"])  # the crossing's patience (ucxx_go's default 200)


async def main():
    global hops
    ops = (sys.argv[1] if len(sys.argv) > 1 else "allreduce,broadcast").split(",")
    mib = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    c = await ucxx_go.Communicator.init(timeout=120)
    cp.cuda.Device(c.rank % cp.cuda.runtime.getDeviceCount()).use()
    n = mib << 18
    x, out = cp.ones(n, cp.float32), cp.empty(n, cp.float32)
    for op in ops:
        def run():
            if op == "allreduce":
                return c.allreduce(x, out, stream_ordered=True)
            if op == "broadcast":
                return c.broadcast(x, root=0, stream_ordered=True)
            if op == "reduce_scatter":
                return c.reduce_scatter(x, out[: n // c.size], stream_ordered=True)
            return c.allgather(x[: n // c.size], out, stream_ordered=True)
        for _ in range(5):
            await run()
        cp.cuda.Device().synchronize()
        rows = []
        for b in range(20):
            await c.barrier()
            hops = 0
            awaits = []
            t0 = time.perf_counter()
            for _ in range(10):
                t = time.perf_counter()
                await run()
                awaits.append((time.perf_counter() - t) * 1e6)
            q = (time.perf_counter() - t0) * 1e5
            cp.cuda.Device().synchronize()
            rows.append(((time.perf_counter() - t0) * 1e5, q, hops, awaits))
        if c.rank == 0:
            for i, (fl, q, h, aw) in enumerate(rows):
                print(f"{op} {mib}M batch {i:2d}: {fl:7.1f} us a call in flight, queued {q:6.1f}, hops {h:2d}, awaits "
                      + " ".join(f"{a:.0f}" for a in aw), flush=True)
            print(f"{op} {mib}M median {statistics.median(r[0] for r in rows):.1f} us a call", flush=True)
    await c.synchronize()
    await c.barrier()
    c.close()


asyncio.run(main())
