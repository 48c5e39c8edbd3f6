"""Where the time of one small ucxx_go collective goes (per-call overhead breakdown).

    python -m ucxx_go.launch -n 2 benchmarks/collectives/overhead.py [--bytes 8] [--iters 2000] [--json FILE]

Every rank runs the same phases, a barrier between them; each phase is `iters` calls
timed one by one (perf_counter_ns), and the table gives rank 0's median and the max
of the ranks' medians (µs):

- full: ``await comm.allreduce(x, out)``, as a user writes it;
- crossing, spin 200: the one gopy call the coroutine makes
  (``ext.pybridge_CommCollective(..., SPIN_US)``), made synchronously, and
  ``CommWait`` on the same thread when it returned a ticket (the call outlived
  200 µs): no asyncio, no thread hop; `hops` is the share that outlived 200 µs;
- crossing, spin 10 s: the same call, never handed off: the Go side's own time
  (executor, transport, the goroutine and timer of the hand-off machinery);
- python prep: what the coroutine does before the crossing (buffer_info of both
  buffers, dtype_code, op_code), no crossing;
- python prep + crossing: the two above in one function, as the coroutine runs them
  (not always their sum: see RESULTS.md);
- 5 µs busy, then crossing: the crossing after 5 µs of pure Python work (no objects
  made), to tell apart what prep costs itself from what a gap between calls costs the
  Go side (its idle threads park; the next call wakes them);
- empty crossing: ``ext.pybridge_ConsumeWake(0)``, a gopy call that does almost
  nothing (cgo's transition and gopy's argument handling);
- executor hop: ``await loop.run_in_executor(None, int)``, what a call that
  outlives SPIN_US pays on top of its Go time.

So full ≈ prep + crossing(spin 10 s) + asyncio's coroutine cost, plus an executor hop
for the calls that outlive SPIN_US; "crossing, spin 10 s" minus "empty crossing" is
the executor and transport inside Go.
"""

import argparse
import asyncio
import json
import os
import statistics
import time

import numpy as np

import ucxx_go
from ucxx_go import _communicator as C
from ucxx_go._buffers import buffer_info
from ucxx_go._bridge import call, ext
from ucxx_go._collective_args import dtype_code, op_code


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bytes", type=int, default=8)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=10, help="phases interleaved, this many times")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    comm = await ucxx_go.Communicator.init(timeout=120)
    loop = asyncio.get_running_loop()
    n = max(1, a.bytes // 4)
    x = np.full(n, comm.rank + 1, np.float32)
    out = np.zeros(n, np.float32)
    pc = time.perf_counter_ns
    res = {}

    sa, sn, _, sm, _ = buffer_info(x, writable=False)
    ra, rn, _, rm, _ = buffer_info(out, writable=True)
    code, opc = dtype_code(x, None), op_code("sum")
    h = comm._h

    phases = []  # (name, body, is_async)

    def crossing(spin, count=True):
        def f():
            t = call(ext.pybridge_CommCollective, h, "allreduce", 0, sa, sn, sm, 0, ra, rn, rm, 0, code, opc, False, spin)
            if t:
                hops[spin] += count
                call(ext.pybridge_CommWait, t)
        return f

    def prep():
        s_addr, s_n, s_keep, s_mem, _ = buffer_info(x, writable=False)
        r_addr, r_n, r_keep, r_mem, _ = buffer_info(out, writable=True)
        dtype_code(x, None)
        op_code("sum")

    def prep_and_crossing():
        s_addr, s_n, s_keep, s_mem, _ = buffer_info(x, writable=False)
        r_addr, r_n, r_keep, r_mem, _ = buffer_info(out, writable=True)
        t = call(ext.pybridge_CommCollective, h, "allreduce", 0, s_addr, s_n, s_mem, 0, r_addr, r_n, r_mem, 0,
                 dtype_code(x, None), op_code("sum"), False, C.SPIN_US)
        if t:
            call(ext.pybridge_CommWait, t)

    quiet_crossing = crossing(C.SPIN_US, count=False)

    def busy_then_crossing():
        t = pc()
        while pc() - t < 5000:
            pass
        quiet_crossing()

    async def coro():
        return None

    hops = {C.SPIN_US: 0, 10_000_000: 0}
    phases = [
        ("full: await comm.allreduce(x, out)", lambda: comm.allreduce(x, out), True),
        (f"crossing, spin {C.SPIN_US} µs (sync)", crossing(C.SPIN_US), False),
        ("crossing, spin 10 s (sync)", crossing(10_000_000), False),
        ("python prep (buffer_info x2, dtype_code, op_code)", prep, False),
        ("python prep + crossing, spin 200 µs (sync)", prep_and_crossing, False),
        ("5 µs of Python busy-wait, then crossing, spin 200 µs (sync)", busy_then_crossing, False),
        ("empty crossing (ConsumeWake)", lambda: ext.pybridge_ConsumeWake(0), False),
        ("executor hop (run_in_executor(None, int))", lambda: loop.run_in_executor(None, int), True),
        ("asyncio: await of an empty coroutine", coro, True),
    ]
    samples = {name: [] for name, _, _ in phases}
    per_round = max(1, a.iters // a.rounds)
    # Rounds: every phase in turn, `rounds` times, so that drift in the machine's load
    # touches them all alike; warm-up calls before each.
    for _ in range(a.rounds):
        for name, body, is_async in phases:
            await comm.barrier()
            for _ in range(max(5, per_round // 10)):
                await body() if is_async else body()
            ts = samples[name]
            if is_async:
                for _ in range(per_round):
                    t0 = pc()
                    await body()
                    ts.append(pc() - t0)
            else:
                for _ in range(per_round):
                    t0 = pc()
                    body()
                    ts.append(pc() - t0)
    for name, ts in samples.items():
        res[name] = statistics.median(ts) / 1000
        if name.startswith("crossing"):
            spin = C.SPIN_US if str(C.SPIN_US) + " µs" in name else 10_000_000
            calls = a.rounds * (per_round + max(5, per_round // 10))
            res[f"share of calls outliving the spin ({name.split(',')[1].strip().split(' (')[0]})"] = hops[spin] / calls
    await comm.barrier()

    mine = {"rank": comm.rank, "ranks": comm.size, "bytes": x.nbytes, "iters": a.iters, "us": res}
    path = (a.json or "/tmp/overhead") + f".rank{comm.rank}.json"
    with open(path, "w") as f:
        json.dump(mine, f)
    await comm.barrier()
    if comm.rank == 0:
        all_ = [json.load(open((a.json or "/tmp/overhead") + f".rank{r}.json")) for r in range(comm.size)]
        print(f"ucxx_go per-call breakdown, allreduce of {x.nbytes} B float32 sum, {comm.size} ranks, "
              f"{a.iters} calls a phase, median µs\n")
        print("| phase | rank 0 | max over ranks |\n| --- | ---: | ---: |")
        for k, v in res.items():
            if k.startswith("share"):
                print(f"| {k} | {v:.0%} | {max(d['us'][k] for d in all_):.0%} |")
            else:
                print(f"| {k} | {v:.2f} | {max(d['us'][k] for d in all_):.2f} |")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"ranks": all_}, f, indent=1)
        for r in range(comm.size):
            os.unlink((a.json or "/tmp/overhead") + f".rank{r}.json")
    comm.close()


if __name__ == "__main__":
    asyncio.run(main())
