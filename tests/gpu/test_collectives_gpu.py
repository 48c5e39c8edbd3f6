"""Collectives on device memory: ranks as processes sharing the GPU (or one GPU each
where there are several) run every built-in collective on CuPy arrays and MSCCL++'s
own plans, against numpy; LL plans are refused on device memory. Each runs with the
lanes' ops as device programs (one kernel a lane, the default for small calls), as
driver calls one by one (UCXGO_DEVICE_PROGRAMS=0), and with every call sliced
(UCXGO_SLICED_MIN_BYTES=1: programs of many blocks, each on its slice of every op,
the default for large calls; odd sizes leave blocks empty or with short tails).
Skipped where cupy or a GPU is missing."""

import os
import pathlib
import subprocess

import pytest

from _support import cupy_gpus

cp, _GPUS = cupy_gpus()

from _support import LAUNCH, rank_script  # noqa: E402

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "core" / "plan" / "testdata" / "mscclpp-v0.9.0"


def run_ranks(tmp_path, n, body, timeout=300, env=None):
    s = rank_script(tmp_path, body)
    r = subprocess.run(LAUNCH + ["-n", str(n), "--timeout", str(timeout - 20), s], timeout=timeout,
                       capture_output=True, text=True, env=None if env is None else {**os.environ, **env})
    assert r.returncode == 0, (r.returncode, r.stdout[-3000:], r.stderr[:6000])
    return r.stdout


BODY = """
import asyncio, os, numpy as np, cupy as cp, ucxx_go
OPS = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}

def data(q, count, dtype, op="sum"):
    rng = np.random.default_rng(1000 * q + count)
    lo, hi = (1, 3) if op == "prod" else (0, 9)
    return rng.integers(lo, hi, count).astype(dtype)

def combine(parts, dtype, op):
    acc = parts[0].copy()
    for p in parts[1:]:
        acc = OPS[op](acc, p).astype(dtype)
    return acc

async def main():
    comm = await ucxx_go.Communicator.init(timeout=120)
    r, n = comm.rank, comm.size
    cp.cuda.Device(r % cp.cuda.runtime.getDeviceCount()).use()
    for count in [0, 1, 7, 1000, 12345, (1 << 20) + 3]:
        for dtype in ["int8", "int32", "int64", "uint8", "float16", "float32", "float64"]:
            print("rank", r, "at", count, dtype, flush=True)
            for op in ["sum", "prod", "min", "max"] if count < 100000 else ["sum"]:
                parts = [data(q, count, dtype, op) for q in range(n)]
                want = combine(parts, dtype, op)
                x = cp.asarray(parts[r])
                out = cp.empty_like(x)
                await comm.allreduce(x, out, op=op)
                assert np.array_equal(cp.asnumpy(out), want), ("allreduce", count, dtype, op)
                await comm.allreduce(x, op=op)
                assert np.array_equal(cp.asnumpy(x), want), ("allreduce in place", count, dtype, op)
                y = cp.full(count, 7, dtype)
                await comm.reduce(cp.asarray(parts[r]), y, root=n - 1, op=op)
                assert np.array_equal(cp.asnumpy(y), want if r == n - 1 else np.full(count, 7, dtype)), ("reduce", count, dtype, op)
                big = cp.asarray(np.concatenate([data(q * 7 + r, count, dtype, op) for q in range(n)]))
                want_rs = combine([np.concatenate([data(q * 7 + s, count, dtype, op) for q in range(n)]) for s in range(n)], dtype, op)
                o = cp.empty(count, dtype)
                await comm.reduce_scatter(big, o, op=op)
                assert np.array_equal(cp.asnumpy(o), want_rs[r * count:(r + 1) * count]), ("reduce_scatter", count, dtype, op)
            x = cp.asarray(data(r, count, dtype))
            out = cp.empty(n * count, dtype)
            await comm.allgather(x, out)
            assert np.array_equal(cp.asnumpy(out), np.concatenate([data(q, count, dtype) for q in range(n)])), ("allgather", count, dtype)
            b = cp.asarray(data(5, count, dtype)) if r == 1 % n else cp.zeros(count, dtype)
            await comm.broadcast(b, root=1 % n)
            assert np.array_equal(cp.asnumpy(b), data(5, count, dtype)), ("broadcast", count, dtype)
            a = cp.asarray(np.concatenate([data(r * n + j, count, dtype) for j in range(n)]) if count else np.empty(0, dtype))
            o = cp.empty_like(a)
            await comm.alltoall(a, o)
            want = np.concatenate([data(q * n + r, count, dtype) for q in range(n)]) if count else np.empty(0, dtype)
            assert np.array_equal(cp.asnumpy(o), want), ("alltoall", count, dtype)
    # Pipelined broadcasts (4 MiB up: 4 pieces; among more than 2 ranks 8 from 64 MiB,
    # fewer where 8 do not divide the message, and 32 from 256 MiB, sliced from 64 MiB),
    # in place and out of place, root n - 1.
    for count in [1 << 20, 1 << 24, (1 << 24) + 4, (1 << 24) + 2, 1 << 26]:
        want = cp.arange(count, dtype=cp.float32) % 251
        b = want.copy() if r == n - 1 else cp.zeros(count, cp.float32)
        await comm.broadcast(b, root=n - 1)
        assert bool((b == want).all()), ("pipelined broadcast in place", count)
        o = cp.zeros(count, cp.float32)
        await comm.broadcast(want if r == n - 1 else cp.zeros(count, cp.float32), root=n - 1, out=o)
        assert bool((o == want).all()), ("pipelined broadcast", count)
    # A kernel on CuPy's stream writes the input just before the call: the call waits for it.
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.full(1 << 22, r + 1, cp.float32)
        x *= 2
        await comm.allreduce(x)
    assert (cp.asnumpy(x) == n * (n + 1)).all(), "allreduce after work on the array's stream"
    # MSCCL++'s own plans, unchanged, on device memory (when the world fits them).
    FIX = @FIX@
    if n == 4:
        for name in ["single_node__allreduce.json", "single_node__allreduce_nvls_zero_copy.json"]:
            plan = ucxx_go.ExecutionPlan.load(f"{FIX}/{name}")
            for count in [128, 1 << 20]:
                x = cp.asarray(data(r, count, "float32"))
                await comm.execute(plan, x)
                assert np.array_equal(cp.asnumpy(x), combine([data(q, count, "float32") for q in range(n)], "float32", "sum")), (name, count)
        plan = ucxx_go.ExecutionPlan.load(f"{FIX}/single_node__allreduce_pkt.json")
        try:
            await comm.execute(plan, cp.ones(1024, cp.float32))
            raise SystemExit("an LL plan ran on device memory")
        except ucxx_go.CollectiveUnsupportedError:
            pass
    os.write(1, f"rank {r} ok\\n".encode())
    comm.close()

asyncio.run(main())
"""


# waits-only: every call past the programs' size records only its signals and waits
# (copies on the copy engines, reductions as kernels), the pipelined chains too (not
# sliced).
MODES = {"programs": {"UCXGO_DEVICE_PROGRAMS": "1"}, "driver-calls": {"UCXGO_DEVICE_PROGRAMS": "0"},
         "sliced": {"UCXGO_DEVICE_PROGRAMS": "1", "UCXGO_SLICED_MIN_BYTES": "1"},
         "waits-only": {"UCXGO_DEVICE_PROGRAMS": "1", "UCXGO_PROGRAM_WAITS_MIN_BYTES": "1", "UCXGO_SLICED_BLOCKS": "1"}}


@pytest.mark.parametrize("n,mode", [(n, m) for m in MODES for n in (2, 4)] + [(3, "sliced")])
def test_collectives_on_device_memory(tmp_path, n, mode):
    out = run_ranks(tmp_path, n, BODY.replace("@FIX@", repr(str(FIXTURES))), timeout=600, env=MODES[mode])
    assert out.count(" ok") == n, out
