"""Per-vertex costs of the ExecutionContext.

overhead: N launches of a one-block kernel (``touch``: a[i] += 1 over 32 floats),
  timed from the first launch to the final synchronize, as a DAG (async and sync) and
  as plain CuPy launches. Two patterns: "chain" (every launch on one array: the DAG
  orders them on one stream; CuPy: one stream) and "independent" (round-robin over 8
  arrays: the DAG may use 8 streams; CuPy: 8 streams, no events). The per-vertex
  overhead is (t_dag - t_cupy) / N; "submit" is the host time of the N calls alone.
  Checked: every element of every array ends at exactly its number of launches.

memory: N launches that all wait behind one Python host function (held on an
  Event), so N vertices are active at once; the process's resident memory before and
  while they are pending, over N, and ctx.resources() while pending. Informative
  only: RSS also counts Python's and Go's allocator slack.
"""

import os
import threading
import time

import numpy as np

from backends import BenchError

TOUCH_N = 32
N_ARRAYS = 8


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def overhead(dag_ctxs, modules, launches, reps, warmup, log=print):
    import cupy as cp

    i32 = np.int32
    chain = cp.zeros(TOUCH_N, np.float32)
    ind = [cp.zeros(TOUCH_N, np.float32) for _ in range(N_ARRAYS)]
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(N_ARRAYS)]
    raw = modules.get("touch")
    out = {"launches": launches, "reps": reps}

    def reset():
        chain.fill(0)
        for a in ind:
            a.fill(0)
        cp.cuda.Device().synchronize()

    def check(pattern, label):
        if pattern == "chain":
            got, want = cp.asnumpy(chain), float(launches)
            if not np.all(got == want):
                raise BenchError(f"overhead {label} chain: a = {got[:4]}..., expected {want} everywhere")
        else:
            for j, a in enumerate(ind):
                want = float(len(range(j, launches, N_ARRAYS)))
                got = cp.asnumpy(a)
                if not np.all(got == want):
                    raise BenchError(f"overhead {label} independent: array {j} = {got[:4]}..., expected {want}")

    def cupy_run(pattern):
        if pattern == "chain":
            s = streams[0]
            for _ in range(launches):
                raw((1,), (TOUCH_N,), (chain, i32(TOUCH_N)), stream=s)
        else:
            for i in range(launches):
                j = i % N_ARRAYS
                raw((1,), (TOUCH_N,), (ind[j], i32(TOUCH_N)), stream=streams[j])
        t = time.perf_counter()
        for s in streams:
            s.synchronize()
        cp.cuda.Device().synchronize()
        return t

    def dag_runner(dagctx):
        ctx = dagctx.get()
        k = dagctx.kernel("touch")(1, TOUCH_N)
        wchain = ctx.wrap(chain)
        wind = [ctx.wrap(a) for a in ind]

        def run(pattern):
            if pattern == "chain":
                for _ in range(launches):
                    k(wchain, TOUCH_N)
            else:
                for i in range(launches):
                    k(wind[i % N_ARRAYS], TOUCH_N)
            t = time.perf_counter()
            ctx.synchronize_sync()
            cp.cuda.Device().synchronize()
            return t

        return run

    runners = {"cupy": cupy_run}
    for policy, dagctx in dag_ctxs.items():
        runners[f"dag-{policy}"] = dag_runner(dagctx)
    for pattern in ("chain", "independent"):
        res = {}
        for label, run in runners.items():
            totals, submits = [], []
            for r in range(warmup + reps):
                reset()
                t0 = time.perf_counter()
                ts = run(pattern)
                t1 = time.perf_counter()
                check(pattern, label)
                if r >= warmup:
                    totals.append(t1 - t0)
                    submits.append(ts - t0)
            res[label] = {"median_ms": float(np.median(totals)) * 1e3, "min_ms": min(totals) * 1e3,
                          "max_ms": max(totals) * 1e3, "submit_us_per_launch": float(np.median(submits)) / launches * 1e6}
        for label in runners:
            if label != "cupy":
                res[label]["overhead_us_per_vertex"] = (res[label]["median_ms"] - res["cupy"]["median_ms"]) * 1e3 / launches
        out[pattern] = res
        log(f"overhead {pattern}: " + ", ".join(
            f"{k} {v['median_ms']:.2f} ms ({v['submit_us_per_launch']:.1f} us/launch submit"
            + (f", {v['overhead_us_per_vertex']:+.1f} us/vertex vs cupy" if "overhead_us_per_vertex" in v else "") + ")"
            for k, v in res.items()))
    return out


def memory(dagctx, sizes, hold_s, log=print):
    """Memory per active vertex (see the module doc): for each N in `sizes` (ascending),
    N vertices pending behind a held host function; RSS while pending minus RSS before
    the first. bytes_per_active_vertex is the slope between the two largest valid N
    (fixed costs cancel), else the single valid point's ratio."""
    import cupy as cp

    ctx = dagctx.get()
    k = dagctx.kernel("touch")(1, TOUCH_N)
    a = cp.zeros(TOUCH_N, np.float32)
    cp.cuda.Device().synchronize()
    wa = ctx.wrap(a)
    # Warm up: the host-function threads, the stream, the kernel.
    ctx.host(lambda: None, writes=[wa]).wait(timeout=30)
    k(wa, TOUCH_N).wait(timeout=30)
    ctx.synchronize_sync()
    expect = 1.0
    base = _rss()
    points = []
    for n in sizes:
        gate = threading.Event()
        timer = threading.Timer(hold_s, gate.set)  # never held longer than hold_s

        def held():
            gate.wait(hold_s + 5)

        timer.start()
        try:
            res0 = ctx.resources()
            t0 = time.perf_counter()
            ctx.host(held, writes=[wa])
            for _ in range(n):
                k(wa, TOUCH_N)
            t_submit = time.perf_counter() - t0
            rss1, res1 = _rss(), ctx.resources()
            valid = not gate.is_set()
        finally:
            gate.set()
            timer.cancel()
        ctx.synchronize_sync()
        expect += n
        got = cp.asnumpy(a)
        if not np.all(got == expect):
            raise BenchError(f"memory: a = {got[:4]}..., expected {expect} everywhere")
        p = {"vertices": n, "submit_s": t_submit, "rss_pending_minus_base": rss1 - base, "resources_before": res0,
             "resources_pending": res1, "resources_after": ctx.resources(), "valid": valid}
        if not valid:
            p["note"] = (f"the submission of {n} vertices took {t_submit:.1f} s, past the hold ({hold_s} s): they were "
                         "not all pending at once (a bound on queued work?)")
        points.append(p)
        log(f"memory: {n} pending vertices: RSS +{(rss1 - base) / 2**20:.1f} MiB over the base "
            f"({(rss1 - base) / n:.0f} B/vertex), submitted in {t_submit * 1e3:.0f} ms, resources pending {res1}"
            + ("" if valid else " (NOT VALID: " + p["note"] + ")"))
        if not valid:
            break
    ok = [p for p in points if p["valid"]]
    out = {"points": points, "rss_base": base, "vertices": ok[-1]["vertices"] if ok else None,
           "resources_pending": ok[-1]["resources_pending"] if ok else None,
           "resources_after": points[-1]["resources_after"] if points else None, "valid": bool(ok)}
    if len(ok) >= 2:
        a1, a2 = ok[-2], ok[-1]
        out["bytes_per_active_vertex"] = ((a2["rss_pending_minus_base"] - a1["rss_pending_minus_base"])
                                          / (a2["vertices"] - a1["vertices"]))
        out["method"] = f"slope between {a1['vertices']} and {a2['vertices']} pending vertices"
    elif ok:
        out["bytes_per_active_vertex"] = ok[0]["rss_pending_minus_base"] / ok[0]["vertices"]
        out["method"] = f"RSS over the base / {ok[0]['vertices']}"
    else:
        out["note"] = points[0]["note"] if points else "nothing measured"
    return out
