"""One rank of the host-collective benchmark, for one library.

    python -m ucxx_go.launch -n N worker.py --lib ucxx_go --out DIR [...]
    mpiexec -n N python worker.py --lib mpi --out DIR [...]
    python -m ucxx_go.launch -n N worker.py --lib gloo --out DIR [...]

run.py starts it; see README.md. Every rank times each call on its own
(time.perf_counter_ns around the one call, back to back, after warm-up calls) and
writes DIR/<lib>.rank<r>.json with its median per (collective, size); run.py takes
the max over ranks (nccl-tests' definition: the slowest rank's time).

Buffers are float32, op sum, out of place where the library has it (gloo's
all_reduce, reduce and broadcast are in place only). `bytes` is what nccl-tests
counts: the buffer of the whole collective per rank (allgather: the output;
reduce_scatter: the input; alltoall: either). Counts are rounded down to a multiple
of the rank count for allgather, reduce_scatter and alltoall (at least one element a
rank), so the smallest sizes at 8 ranks move 32 B there. The first call of each size
is checked against the expected values before warm-up.
"""

import argparse
import json
import os
import socket
import statistics
import sys
import time

import numpy as np

COLLECTIVES = ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "alltoall")
ITEM = 4  # float32


def counts(coll, nbytes, n):
    """(elements of x, elements of out, bytes as nccl-tests counts them)."""
    c = max(1, nbytes // ITEM)
    if coll in ("allgather", "reduce_scatter", "alltoall"):
        c = max(n, c // n * n)
    if coll == "allgather":
        return c // n, c, c * ITEM
    if coll == "reduce_scatter":
        return c, c // n, c * ITEM
    return c, c, c * ITEM


def iters_for(nbytes, a):
    it = max(a.min_iters, min(a.max_iters, a.iter_bytes // max(nbytes, 1)))
    warm = max(a.min_warmup, min(a.max_warmup, it // 5))
    return int(it), int(warm)


def buffers(coll, nbytes, rank, n):
    cx, co, b = counts(coll, nbytes, n)
    x = np.full(cx, rank + 1, dtype=np.float32)
    out = np.zeros(co, dtype=np.float32)
    return x, out, b


def check(coll, x, out, rank, n, lib):
    s = n * (n + 1) / 2
    if coll == "allreduce":
        got, want = (x if lib == "gloo" else out), np.full(out.size, s, np.float32)
    elif coll == "allgather":
        got, want = out, np.repeat(np.arange(1, n + 1, dtype=np.float32), out.size // n)
    elif coll == "reduce_scatter":
        got, want = out, np.full(out.size, s, np.float32)
    elif coll == "broadcast":
        got, want = x, np.ones(x.size, np.float32)
    elif coll == "reduce":
        if rank != 0:
            return
        got, want = (x if lib == "gloo" else out), np.full(out.size, s, np.float32)
    elif coll == "alltoall":
        got, want = out, np.repeat(np.arange(1, n + 1, dtype=np.float32), out.size // n)
    if not np.array_equal(got, want):
        raise SystemExit(f"{lib} {coll} rank {rank}: wrong result (first {got[:4]}, want {want[:4]})")


def summarize(ts_ns):
    ts = sorted(t / 1000 for t in ts_ns)
    return {"median_us": statistics.median(ts), "min_us": ts[0], "p90_us": ts[int(0.9 * (len(ts) - 1))],
            "mean_us": sum(ts) / len(ts)}


# ---------------------------------------------------------------- ucxx_go


async def run_ucxx_go(a, sizes, record):
    import ucxx_go

    comm = await ucxx_go.Communicator.init(timeout=a.timeout)
    rank, n = comm.rank, comm.size
    pc = time.perf_counter_ns
    for coll in a.collectives:
        for nbytes in sizes:
            x, out, b = buffers(coll, nbytes, rank, n)
            if coll == "allreduce":
                fn, args = comm.allreduce, (x, out)
            elif coll == "allgather":
                fn, args = comm.allgather, (x, out)
            elif coll == "reduce_scatter":
                fn, args = comm.reduce_scatter, (x, out)
            elif coll == "broadcast":
                fn, args = comm.broadcast, (x, 0)
            elif coll == "reduce":
                fn, args = comm.reduce, (x, out, 0)
            else:
                fn, args = comm.alltoall, (x, out)
            it, warm = iters_for(b, a)
            await comm.barrier()
            await fn(*args)
            check(coll, x, out, rank, n, "ucxx_go")
            for _ in range(warm):
                await fn(*args)
            await comm.barrier()
            ts = []
            for _ in range(it):
                t0 = pc()
                await fn(*args)
                ts.append(pc() - t0)
            record(coll, nbytes, b, x.size, out.size, it, warm, ts)
            del x, out, args
    await comm.barrier()
    comm.close()
    return rank, n


# ---------------------------------------------------------------- MPI


def run_mpi(a, sizes, record):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, n = comm.Get_rank(), comm.Get_size()
    pc = time.perf_counter_ns
    for coll in a.collectives:
        for nbytes in sizes:
            x, out, b = buffers(coll, nbytes, rank, n)
            if coll == "allreduce":
                fn, args = comm.Allreduce, (x, out)
            elif coll == "allgather":
                fn, args = comm.Allgather, (x, out)
            elif coll == "reduce_scatter":
                fn, args = comm.Reduce_scatter_block, (x, out)
            elif coll == "broadcast":
                fn, args = comm.Bcast, (x, 0)
            elif coll == "reduce":
                fn, args = comm.Reduce, (x, out, MPI.SUM, 0)
            else:
                fn, args = comm.Alltoall, (x, out)
            it, warm = iters_for(b, a)
            comm.Barrier()
            fn(*args)
            check(coll, x, out, rank, n, "mpi")
            for _ in range(warm):
                fn(*args)
            comm.Barrier()
            ts = []
            for _ in range(it):
                t0 = pc()
                fn(*args)
                ts.append(pc() - t0)
            record(coll, nbytes, b, x.size, out.size, it, warm, ts)
            del x, out, args
    comm.Barrier()
    return rank, n


# ---------------------------------------------------------------- gloo


def run_gloo(a, sizes, record, variants):
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=__import__("datetime").timedelta(seconds=a.timeout))
    rank, n = dist.get_rank(), dist.get_world_size()
    pc = time.perf_counter_ns

    def pick(coll, x, out, tx, tout):
        """The call a user makes, and the fallback where gloo lacks the tensor form."""
        if coll == "allreduce":
            return [("all_reduce (in place)", dist.all_reduce, (tx,))]
        if coll == "allgather":
            return [("all_gather_into_tensor", dist.all_gather_into_tensor, (tout, tx)),
                    ("all_gather (list of views)", dist.all_gather, (list(tout.chunk(n)), tx))]
        if coll == "reduce_scatter":
            return [("reduce_scatter_tensor", dist.reduce_scatter_tensor, (tout, tx)),
                    ("reduce_scatter (list of views)", dist.reduce_scatter, (tout, list(tx.chunk(n))))]
        if coll == "broadcast":
            return [("broadcast (in place)", dist.broadcast, (tx, 0))]
        if coll == "reduce":
            return [("reduce (in place)", dist.reduce, (tx, 0))]
        return [("all_to_all_single", dist.all_to_all_single, (tout, tx))]

    for coll in a.collectives:
        chosen = None
        for nbytes in sizes:
            x, out, b = buffers(coll, nbytes, rank, n)
            tx, tout = torch.from_numpy(x), torch.from_numpy(out)
            cands = pick(coll, x, out, tx, tout)
            it, warm = iters_for(b, a)
            dist.barrier()
            if chosen is None:
                errors = []
                for name, fn, args in cands:
                    try:
                        fn(*args)
                        chosen = name
                        break
                    except (RuntimeError, NotImplementedError, ValueError) as e:
                        errors.append(f"{name}: {str(e).splitlines()[0][:200]}")
                        dist.barrier()
                if chosen is None:
                    variants[coll] = "unsupported: " + "; ".join(errors)
                    break
                variants[coll] = chosen
                name, fn, args = next(c for c in cands if c[0] == chosen)
            else:
                name, fn, args = next(c for c in cands if c[0] == chosen)
                fn(*args)
            check(coll, x, out, rank, n, "gloo")
            if coll in ("allreduce", "reduce"):
                x[:] = 0  # in place: keep the values finite over many calls
            for _ in range(warm):
                fn(*args)
            dist.barrier()
            ts = []
            for _ in range(it):
                t0 = pc()
                fn(*args)
                ts.append(pc() - t0)
            record(coll, nbytes, b, x.size, out.size, it, warm, ts)
            del x, out, tx, tout, args, cands
    dist.barrier()
    dist.destroy_process_group()
    return rank, n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True, choices=["ucxx_go", "mpi", "gloo"])
    ap.add_argument("--out", required=True, help="directory for <lib>.rank<r>.json")
    ap.add_argument("--sizes", required=True, help="comma-separated byte counts")
    ap.add_argument("--collectives", default=",".join(COLLECTIVES))
    ap.add_argument("--iter-bytes", type=int, default=256 << 20, help="iterations: this many bytes / size ...")
    ap.add_argument("--min-iters", type=int, default=5)
    ap.add_argument("--max-iters", type=int, default=200)
    ap.add_argument("--min-warmup", type=int, default=1)
    ap.add_argument("--max-warmup", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=600.0)
    a = ap.parse_args()
    a.collectives = [c for c in a.collectives.split(",") if c]
    sizes = [int(s) for s in a.sizes.split(",")]
    rows, variants = [], {}

    def record(coll, nominal, b, cx, co, it, warm, ts):
        rows.append(dict(collective=coll, nominal_bytes=nominal, bytes=b, count_in=cx, count_out=co, iters=it,
                         warmup=warm, **summarize(ts)))

    t0 = time.time()
    if a.lib == "ucxx_go":
        import asyncio
        rank, n = asyncio.run(run_ucxx_go(a, sizes, record))
    elif a.lib == "mpi":
        rank, n = run_mpi(a, sizes, record)
    else:
        rank, n = run_gloo(a, sizes, record, variants)
    info = {"lib": a.lib, "rank": rank, "ranks": n, "host": socket.gethostname(), "pid": os.getpid(),
            "python": sys.version.split()[0], "wall_s": time.time() - t0, "rows": rows, "variants": variants}
    try:
        info["affinity"] = sorted(os.sched_getaffinity(0))
    except AttributeError:
        pass
    if a.lib == "mpi":
        from mpi4py import MPI
        import mpi4py
        info["versions"] = {"mpi4py": mpi4py.__version__, "mpi": MPI.Get_library_version().replace("\x00", "").strip().splitlines()[0]}
    elif a.lib == "gloo":
        import torch
        info["versions"] = {"torch": torch.__version__}
    else:
        import ucxx_go
        info["versions"] = {"ucxx_go": getattr(ucxx_go, "__version__", "?"), "ucxx_go_path": os.path.dirname(ucxx_go.__file__)}
    with open(os.path.join(a.out, f"{a.lib}.rank{rank}.json"), "w") as f:
        json.dump(info, f)


if __name__ == "__main__":
    main()
