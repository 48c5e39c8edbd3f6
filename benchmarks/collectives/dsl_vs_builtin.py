"""The DSL-written allreduce against the built-in one, side by side in one run.

    python -m ucxx_go.launch -n N benchmarks/collectives/dsl_vs_builtin.py [--sizes 8,64K,1M,16M] [--iters 500]

For each size each rank builds, with the DSL (ucxx_go.language.builtins), the plan the
registry picks for an in-place float32 allreduce of that size (`comm.builtin_choice`
names it: the algorithm, its lanes and pipeline depth), loads it with ExecutionPlan.from_json and times
`await comm.execute(plan, x)` against `await comm.allreduce(x)` call by call,
interleaved (DSL, built-in, built-in, DSL, ...), so that both see the same moments of
the machine, --iters calls of each in each of --rounds rounds after a warm-up. Rank 0
prints a table: the median per call of each (the slowest rank's), and DSL / built-in
(1.00: the DSL costs nothing). Both results are checked against the sum.
"""

import argparse
import asyncio
import json
import statistics
import time

import numpy as np

import ucxx_go
from ucxx_go.language import builtins as dsl
from ucxx_go.language.builtins_common import Options

PIPELINE_CHUNKS, MAX_LANES = 4, 4  # the most pieces a block is cut into (sizes are rounded to them)


def size(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1]] if s[-1] in units else int(s)


def registry_plan(comm, nbytes):
    """The DSL's plan for the built-in the registry picks at nbytes (in place, float32),
    as the communicator names it (Communicator.builtin_choice): no copy of its rules."""
    c = comm.builtin_choice("allreduce", nbytes, in_place=True)
    if c["uneven"]:  # sizes are rounded to whole pieces: one plan covers the message
        raise SystemExit(f"{nbytes} B runs {c['uneven']}: not one plan to compare")
    key = "allreduce." + c["algorithm"]
    o = Options(inplace=True, chunks=c["chunks"], lanes=c["lanes"])
    return key, ucxx_go.ExecutionPlan.from_json(json.dumps(dsl.builtin_plan(key, comm.size, o)))


async def interleaved(comm, calls, iters):
    """Per-call times (µs) of each of calls [(name, call)], the calls made in turn,
    the order reversed every other turn."""
    times = {name: [] for name, _ in calls}
    await comm.barrier()
    for i in range(iters):
        for name, call in calls if i % 2 == 0 else calls[::-1]:
            t = time.perf_counter_ns()
            await call()
            times[name].append((time.perf_counter_ns() - t) / 1e3)
    return times


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="8,1K,64K,256K,1M,4M,16M")
    ap.add_argument("--iters", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    comm = await ucxx_go.Communicator.init(timeout=120)
    n, r = comm.size, comm.rank
    rows = []
    for nbytes in (size(s) for s in a.sizes.split(",")):
        count = max(1, nbytes // 4)
        while count * 4 % (n * 4 * PIPELINE_CHUNKS * MAX_LANES):  # whole chunks: no padded tail on either path
            count += 1
        key, plan = registry_plan(comm, count * 4)
        x = np.ones(count, np.float32)
        iters = max(5, min(a.iters, (256 << 20) // (count * 4)))
        for call in (lambda: comm.execute(plan, x), lambda: comm.allreduce(x)):
            x[:] = 1
            await call()
            if not np.all(x == n):
                raise SystemExit(f"rank {r}: wrong sum at {count * 4} B")
        times = {"dsl": [], "builtin": []}
        calls = [("dsl", lambda: comm.execute(plan, x)), ("builtin", lambda: comm.allreduce(x))]
        await interleaved(comm, calls, max(2, iters // 10))  # warm-up
        for _ in range(a.rounds):
            for name, ts in (await interleaved(comm, calls, iters)).items():
                times[name] += ts
        mine = {k: statistics.median(v) for k, v in times.items()}
        got = np.zeros(2 * n)
        np.copyto(got[2 * r:2 * r + 2], [mine["dsl"], mine["builtin"]])
        await comm.allreduce(got)  # every rank's medians, to take the slowest
        dsl_us, builtin_us = got[0::2].max(), got[1::2].max()
        rows.append((count * 4, key, dsl_us, builtin_us))
    if r == 0:
        print(f"allreduce, float32 sum, in place, {n} ranks; median µs per call (slowest rank), "
              f"{a.rounds} rounds of {a.iters} interleaved calls of each")
        print("| bytes | plan | DSL plan via execute | built-in via allreduce | DSL / built-in |")
        print("| ---: | --- | ---: | ---: | ---: |")
        for b, key, d, bi in rows:
            print(f"| {b} | {key} | {d:.1f} | {bi:.1f} | {d / bi:.3f} |")
    comm.close()


asyncio.run(main())
