"""Where a small GPU collective's time goes, from Python: awaited 8-byte allreduces on
host and device memory, with and without a device synchronize after each, a 16 KiB
allreduce, an 8-byte broadcast and the barrier (medians, p10 and p90 of 2,000 calls
after 200 of warm-up, rank 0's clock). One rank per GPU where there are several:

    TAG=defaults python -m ucxx_go.launch -n 2 benchmarks/gpu/latency_pieces.py OUTDIR

writes OUTDIR/probe_<TAG>.json; with TRACE=1 rank 0 also records a Go execution trace
of 300 more allreduces (OUTDIR/gpu8.trace: `go tool trace -d=parsed` lists each cgo
call's entry and exit as syscall transitions). UCXGO_DEVICE_PROGRAMS=0 for the lanes'
ops one driver call each."""

import asyncio
import json
import os
import sys
import time

import cupy as cp
import numpy as np

import ucxx_go


async def main():
    out = sys.argv[1]
    comm = await ucxx_go.Communicator.init(timeout=60)
    r = comm.rank
    cp.cuda.Device(r % cp.cuda.runtime.getDeviceCount()).use()
    res = {}
    async def timed(name, fn, iters=2000, sync=False):
        for _ in range(200):
            await fn()
        cp.cuda.Device().synchronize()
        await comm.barrier()
        ts = []
        for _ in range(iters):
            t = time.perf_counter()
            await fn()
            if sync:
                cp.cuda.Device().synchronize()
            ts.append(time.perf_counter() - t)
        ts.sort()
        res[name] = [ts[len(ts) // 2] * 1e6, ts[len(ts) // 10] * 1e6, ts[9 * len(ts) // 10] * 1e6]
    g = cp.ones(2, cp.float32)
    h = np.ones(2, np.float32)
    g16k = cp.ones(4096, cp.float32)
    await timed("host 8B allreduce", lambda: comm.allreduce(h))
    await timed("gpu 8B allreduce", lambda: comm.allreduce(g))
    await timed("gpu 8B allreduce + sync", lambda: comm.allreduce(g), sync=True)
    await timed("gpu 16KiB allreduce", lambda: comm.allreduce(g16k))
    await timed("gpu 8B broadcast", lambda: comm.broadcast(g, root=0))
    await timed("barrier", lambda: comm.barrier())
    if r == 0 and os.environ.get("TRACE"):
        with ucxx_go.debug.go_trace(f"{out}/gpu8.trace"):
            for _ in range(300):
                await comm.allreduce(g)
    else:
        for _ in range(300):
            await comm.allreduce(g)
    if r == 0:
        tag = os.environ.get("TAG", "")
        for k, v in res.items():
            print(f"{tag:8} {k:28} median {v[0]:7.1f} us  p10 {v[1]:7.1f}  p90 {v[2]:7.1f}", flush=True)
        json.dump(res, open(f"{out}/probe_{tag}.json", "w"))
    comm.close()


asyncio.run(main())
