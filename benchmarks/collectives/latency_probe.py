"""Awaited 8-byte collective latency, quick:

    python -m ucxx_go.launch -n 2 benchmarks/collectives/latency_probe.py [allreduce|allgather]

Each rank times 2,000 awaited calls (allreduce, the default: of two float32 in place;
allgather: two float32 from each rank into an output array) after 200 of warm-up; rank
0 prints the median, 10th and 90th percentile in µs.
"""

import asyncio
import sys
import time

import numpy as np

import ucxx_go


async def main():
    op = sys.argv[1] if len(sys.argv) > 1 else "allreduce"
    comm = await ucxx_go.Communicator.init(timeout=30)
    x = np.ones(2, np.float32)
    out = np.empty(2 * comm.size, np.float32)
    call = {"allreduce": lambda: comm.allreduce(x), "allgather": lambda: comm.allgather(x, out)}[op]
    for _ in range(200):
        await call()
    await comm.barrier()
    ts = []
    for _ in range(2000):
        t = time.perf_counter()
        await call()
        ts.append(time.perf_counter() - t)
    ts.sort()
    if comm.rank == 0:
        print(f"8-byte {op}, {comm.size} ranks: median {ts[len(ts) // 2] * 1e6:.1f} us, "
              f"p10 {ts[len(ts) // 10] * 1e6:.1f} us, p90 {ts[9 * len(ts) // 10] * 1e6:.1f} us")
    comm.close()


asyncio.run(main())
