"""Awaited 8-byte allreduce latency, quick: python -m ucxx_go.launch -n 2 benchmarks/collectives/latency_probe.py

Each rank times 2,000 awaited allreduces of two float32 after 200 of warm-up; rank 0
prints the median, 10th and 90th percentile in µs.
"""

import asyncio
import time

import numpy as np

import ucxx_go


async def main():
    comm = await ucxx_go.Communicator.init(timeout=30)
    x = np.ones(2, np.float32)
    for _ in range(200):
        await comm.allreduce(x)
    await comm.barrier()
    ts = []
    for _ in range(2000):
        t = time.perf_counter()
        await comm.allreduce(x)
        ts.append(time.perf_counter() - t)
    ts.sort()
    if comm.rank == 0:
        print(f"8-byte allreduce, {comm.size} ranks: median {ts[len(ts) // 2] * 1e6:.1f} us, "
              f"p10 {ts[len(ts) // 10] * 1e6:.1f} us, p90 {ts[9 * len(ts) // 10] * 1e6:.1f} us")
    comm.close()


asyncio.run(main())
