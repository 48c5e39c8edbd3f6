"""Session 29: the gate test's body with progress lines and, after 30 s, the Python
and Go stacks of every rank (where a call behind a closed gate waits)."""
import asyncio, faulthandler, os, sys, threading, time, cupy as cp, ucxx_go
from ucxx_go.debug import go_stacks
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests", "gpu"))
from _cuda_spin import Gate

out = os.environ.get("OUT", "/tmp")

def log(*a):
    print(f"[{time.monotonic():.3f}]", *a, file=sys.stderr, flush=True)

async def main():
    comm = await ucxx_go.Communicator.init(timeout=60)
    r, n = comm.rank, comm.size
    f = open(f"{out}/py_stacks_{os.environ.get('PROBE_WARM','0')}_{r}.txt", "w")
    faulthandler.dump_traceback_later(30, file=f)
    def dump():
        time.sleep(32)
        with open(f"{out}/go_stacks_{os.environ.get('PROBE_WARM','0')}_{r}.txt", "w") as g:
            g.write(go_stacks())
    threading.Thread(target=dump, daemon=True).start()
    cp.cuda.Device(r % cp.cuda.runtime.getDeviceCount()).use()
    s = cp.cuda.Stream(non_blocking=True)
    x = cp.full(1 << 16, r + 1, cp.float32)
    y = cp.full(1024, 1, cp.float32)
    await comm.allreduce(cp.zeros_like(x))
    if os.environ.get("PROBE_WARM") == "1":  # x and y used once before the gates
        await comm.allreduce(x)
        await comm.allreduce(y)
        x += 1  # cupy's add kernel loaded (lazily, CUDA's default) before a gate
        x[:] = r + 1
        y[:] = 1
    cp.cuda.Device().synchronize()
    gate = Gate()
    async def open_later():
        await asyncio.sleep(0.2)
        log(r, "opening")
        gate.open()
    with s:
        gate.close_on(s)
        x += 1
        opener = asyncio.ensure_future(open_later())
        log(r, "ordinary call")
        await comm.allreduce(x)
        log(r, "ordinary call done")
    await opener
    log(r, "x ok", bool((cp.asnumpy(x) == n * (n + 3) // 2).all()))
    await comm.barrier()
    log(r, "barrier")
    with s:
        gate.close_on(s)
        opener = asyncio.ensure_future(open_later())
        for i in range(80):
            if i > 60:
                log(r, "ordered", i)
            await comm.allreduce(y, stream_ordered=True)
    log(r, "80 queued")
    await opener
    await comm.synchronize()
    log(r, "y ok", bool((cp.asnumpy(y) == n ** 80).all()))
    await comm.barrier()
    faulthandler.cancel_dump_traceback_later()
    print(f"rank {r} ok", flush=True)
    comm.close()

asyncio.run(main())
