"""Where a small device allreduce's time goes: per call awaited only, awaited + device synchronize, and a Go
execution trace of 300 awaited calls on rank 0 (one rank per GPU)."""
import asyncio, os, statistics, sys, time
import cupy as cp, ucxx_go, ucxx_go.debug

async def main():
    comm = await ucxx_go.Communicator.init(timeout=60)
    r, n = comm.rank, comm.size
    cp.cuda.Device(r % cp.cuda.runtime.getDeviceCount()).use()
    nbytes = int(os.environ.get("NBYTES", "8"))
    x = cp.ones(max(nbytes // 4, 1), cp.float32)
    for _ in range(50):
        await comm.allreduce(x)
    cp.cuda.Device().synchronize()
    a, b = [], []
    for _ in range(300):
        await comm.barrier()
        t = time.perf_counter(); await comm.allreduce(x); t1 = time.perf_counter()
        cp.cuda.Device().synchronize(); t2 = time.perf_counter()
        a.append(t1 - t); b.append(t2 - t)
    await comm.barrier()
    out = os.environ.get("TRACE", "/tmp/trace")
    if r == 0:
        with ucxx_go.debug.go_trace(out + ".rank0"):
            for _ in range(300):
                await comm.allreduce(x)
    else:
        for _ in range(300):
            await comm.allreduce(x)
    cp.cuda.Device().synchronize()
    print(f"rank {r}: {nbytes} B allreduce, {n} ranks: awaited {statistics.median(a)*1e6:.1f} us, awaited + synchronize "
          f"{statistics.median(b)*1e6:.1f} us (medians of 300)", flush=True)
    comm.close()

asyncio.run(main())
