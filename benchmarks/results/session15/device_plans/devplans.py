"""Device allreduce/allgather/reduce_scatter: the registry's choice against built-in plan variants run through
execute(), one rank per GPU; per call (call + device synchronize), median of iterations, slowest rank."""
import asyncio, json, os, statistics, sys, time
import numpy as np, ucxx_go
if os.environ.get('HOST'):
    import numpy as cp
    class _D:
        def __init__(self, *a): pass
        def use(self): pass
        def synchronize(self): pass
    class _C: pass
    cp.cuda = _C(); cp.cuda.Device = _D; cp.cuda.runtime = _C(); cp.cuda.runtime.getDeviceCount = lambda: 1
else:
    import cupy as cp

PLANS = ".devkit/s15/plans"

async def main():
    comm = await ucxx_go.Communicator.init(timeout=30)
    r, n = comm.rank, comm.size
    cp.cuda.Device(r % cp.cuda.runtime.getDeviceCount()).use()
    budget = float(os.environ.get("BUDGET", "60"))
    t_end = time.time() + budget
    rows = []
    variants = {"allreduce": ["registry", "direct", "allpairs", "allpairs_ppl1", "allpairs_l2", "allpairs_l4", "ring", "ring_l2"],
                "allgather": ["registry", "allpairs", "allpairs_ppl1"],
                "reducescatter": ["registry", "allpairs", "allpairs_ppl1"]}
    sizes = [8, 2048, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20]
    plans = {}
    for coll, vs in variants.items():
        for v in vs:
            if v != "registry":
                plans[(coll, v)] = ucxx_go.ExecutionPlan.load(f"{PLANS}/{coll}.{v}.n{n}.json")
    for nbytes in sizes:
        for coll, vs in variants.items():
            count = max(nbytes // 4, n)
            count = count // n * n
            for v in vs:
                if coll == "allreduce":
                    x = cp.ones(count, cp.float32); send, recv = x, None
                elif coll == "allgather":
                    send = cp.ones(count // n, cp.float32); recv = cp.empty(count, cp.float32)
                else:
                    send = cp.ones(count, cp.float32); recv = cp.empty(count // n, cp.float32)
                async def once():
                    if v == "registry":
                        if coll == "allreduce":
                            await comm.allreduce(send)
                        elif coll == "allgather":
                            await comm.allgather(send, recv)
                        else:
                            await comm.reduce_scatter(send, recv)
                    else:
                        await comm.execute(plans[(coll, v)], send, recv)
                try:
                    for _ in range(3):
                        await once()
                    cp.cuda.Device().synchronize()
                    ts = []
                    iters = 20 if nbytes < (16 << 20) else 8
                    for _ in range(iters):
                        await comm.barrier()
                        t0 = time.perf_counter()
                        await once()
                        cp.cuda.Device().synchronize()
                        ts.append(time.perf_counter() - t0)
                    med = statistics.median(ts) * 1e6
                except Exception as e:  # noqa: BLE001
                    med = float("nan")
                    if r == 0:
                        print("error", coll, v, nbytes, type(e).__name__, str(e)[:200], flush=True)
                rows.append((coll, v, nbytes, med))
        if time.time() > t_end:
            break
    # slowest rank: gather medians through an allreduce max on host memory
    arr = np.array([m for *_, m in rows], np.float64)
    await comm.allreduce(arr, op="max")
    if r == 0:
        cur = None
        for (coll, v, nbytes, _), m in zip(rows, arr):
            print(f"{coll:14s} {v:14s} {nbytes:>10d} {m:9.1f} us", flush=True)
        json.dump([[c, v, b, m] for (c, v, b, _), m in zip(rows, arr.tolist())], open(os.environ.get("OUTJ", "/tmp/devplans.json"), "w"))
    comm.close()

asyncio.run(main())
