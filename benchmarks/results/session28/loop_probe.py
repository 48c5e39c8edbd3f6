"""Session 28: what an ordinary device call does behind a busy stream, seen from the
event loop: the spin's launch time, whether the stream is busy at the call, the await's
time, the ticks a 10 ms task counted meanwhile, and whether the call left its crossing
(a ticket). Two ranks, one GPU each."""
import asyncio, os, sys, time, cupy as cp, ucxx_go
import ucxx_go._communicator as cm
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests", "gpu"))
from _cuda_spin import Gate, spin_on

hops = 0
_rest = cm._rest
def counting(ticket, keep):
    global hops
    hops += 1
    return _rest(ticket, keep)
cm._rest = counting

async def main():
    comm = await ucxx_go.Communicator.init(timeout=60)
    r = comm.rank
    cp.cuda.Device(r).use()
    print("rank", r, "ClockRate kHz", cp.cuda.Device().attributes["ClockRate"], flush=True)
    s = cp.cuda.Stream(non_blocking=True)
    x = cp.full(1 << 16, 1, cp.float32)
    await comm.allreduce(cp.zeros_like(x))
    cp.cuda.Device().synchronize()
    ticks = 0
    async def tick():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1
    t = asyncio.ensure_future(tick())
    await asyncio.sleep(0.05)
    t0 = time.perf_counter()
    with s:
        spin_on(s, 1.0)
        t1 = time.perf_counter()
        x += 1
        busy = not s.done
        k0 = ticks
        await comm.allreduce(x)
        t2 = time.perf_counter()
    s.synchronize()
    t3 = time.perf_counter()
    t.cancel()
    # The same behind a gate a task opens after 200 ms, and s.done right after a spin.
    with s:
        spin_on(s, 0.5)
        spun = s.done
    s.synchronize()
    gate = Gate()
    async def open_later():
        await asyncio.sleep(0.2)
        gate.open()
    t = asyncio.ensure_future(tick())
    with s:
        gate.close_on(s)
        x += 1
        gated = s.done
        k1 = ticks
        opener = asyncio.ensure_future(open_later())
        t4 = time.perf_counter()
        await comm.allreduce(x)
        t5 = time.perf_counter()
    await opener
    t.cancel()
    print(f"rank {r}: s.done after a 0.5 s spin {spun}, after the gate {gated}; gated await {1e3*(t5-t4):.1f} ms, "
          f"ticks {ticks-k1}, hops {hops}, x {float(x[0])}", flush=True)
    print(f"rank {r}: spin launch {1e3*(t1-t0):.1f} ms, busy at call {busy}, await {1e3*(t2-t1):.1f} ms, "
          f"then stream {1e3*(t3-t2):.1f} ms, ticks {ticks-k0}, hops {hops}, x {float(x[0])}", flush=True)
    comm.close()

asyncio.run(main())
