"""Scratch (session 26): the first GPU reduction of a Communicator (the executor loads
kernels/reduce.ptx then: the driver compiles the PTX) against the next ones.

python -m ucxx_go.launch -n 4 first_call.py OUT.json
"""
import asyncio, json, sys, time

import cupy as cp


async def main():
    import ucxx_go
    comm = await ucxx_go.Communicator.init(timeout=300)
    x = cp.ones(16 << 20, cp.float32)
    out = cp.empty_like(x)
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(4):
        t0 = time.perf_counter()
        await comm.allreduce(x, out)
        cp.cuda.Device().synchronize()
        times.append(round((time.perf_counter() - t0) * 1e3, 2))
    assert float(out[0]) == comm.size
    if comm.rank == 0:
        json.dump({"ms": times}, open(sys.argv[1], "w"))
        print("first 64 MiB allreduce calls, ms:", times, flush=True)


asyncio.run(main())
