"""Awaited barrier latency: python -m ucxx_go.launch -n 2 benchmarks/collectives/barrier_probe.py

Each rank times 2,000 awaited barriers after 200 of warm-up; rank 0 prints the median
and 90th percentile in µs.
"""

import asyncio
import time

import ucxx_go


async def main():
    comm = await ucxx_go.Communicator.init(timeout=30)
    for _ in range(200):
        await comm.barrier()
    ts = []
    for _ in range(2000):
        t = time.perf_counter(); await comm.barrier(); ts.append(time.perf_counter() - t)
    ts.sort()
    if comm.rank == 0:
        print(f"barrier, {comm.size} ranks: median {ts[len(ts)//2]*1e6:.1f} us, p90 {ts[9*len(ts)//10]*1e6:.1f} us")
    comm.close()

asyncio.run(main())
