"""The machine's memory-copy limit with N processes copying at once.

    python benchmarks/collectives/memcpy_bench.py -n 4 --sizes 8,1048576 --out FILE.json

N processes (multiprocessing, spawn: the same process count and placement as the
collectives' ranks, no pinning) each own a source and a destination buffer of the
size; every iteration they meet at a barrier and each does one np.copyto(dst, src),
noting when it started and ended (perf_counter_ns: CLOCK_MONOTONIC, one clock for all
processes of the host). An iteration's span runs from the first start to the last end
over all processes, so processes that cannot copy at once (more of them than CPUs)
count as they run, one after another, as a collective's ranks do. Per size: the median
span; GB/s per rank = bytes / span (bytes copied, not read plus written), total = N x
per rank. Also kept: the max over processes of each one's median own copy time (what
one process sees while it runs), as `own_*`.
"""

import argparse
import json
import multiprocessing as mp
import statistics
import time

import numpy as np


def iters_for(nbytes, a):
    it = max(a.min_iters, min(a.max_iters, a.iter_bytes // max(nbytes, 1)))
    warm = max(a.min_warmup, min(a.max_warmup, it // 5))
    return int(it), int(warm)


def worker(rank, a, sizes, barrier, q):
    pc = time.perf_counter_ns
    res = []
    for nbytes in sizes:
        src = np.ones(nbytes, dtype=np.uint8)
        dst = np.zeros(nbytes, dtype=np.uint8)
        it, warm = iters_for(nbytes, a)
        for _ in range(warm):
            barrier.wait()
            np.copyto(dst, src)
        ts = []
        for _ in range(it):
            barrier.wait()
            t0 = pc()
            np.copyto(dst, src)
            ts.append((t0, pc()))
        res.append((nbytes, it, warm, ts))
        del src, dst
    q.put((rank, res))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, required=True)
    ap.add_argument("--sizes", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--iter-bytes", type=int, default=256 << 20)
    ap.add_argument("--min-iters", type=int, default=5)
    ap.add_argument("--max-iters", type=int, default=200)
    ap.add_argument("--min-warmup", type=int, default=1)
    ap.add_argument("--max-warmup", type=int, default=20)
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    ctx = mp.get_context("spawn")
    barrier, q = ctx.Barrier(a.n), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, a, sizes, barrier, q)) for r in range(a.n)]
    for p in procs:
        p.start()
    got = dict(q.get() for _ in procs)
    for p in procs:
        p.join()
    rows = []
    for i, nbytes in enumerate(sizes):
        it = got[0][i][1]
        spans = [(max(got[r][i][3][k][1] for r in range(a.n)) - min(got[r][i][3][k][0] for r in range(a.n))) / 1000
                 for k in range(it)]
        t = statistics.median(spans)
        own = max(statistics.median((e - b) / 1000 for b, e in got[r][i][3]) for r in range(a.n))
        rows.append(dict(bytes=nbytes, iters=it, warmup=got[0][i][2], median_us=t, gbps_per_rank=nbytes / t / 1e3,
                         gbps_total=a.n * nbytes / t / 1e3, own_median_us=own, own_gbps_per_rank=nbytes / own / 1e3))
    with open(a.out, "w") as f:
        json.dump({"ranks": a.n, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
