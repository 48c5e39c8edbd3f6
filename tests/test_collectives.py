"""Collectives through execution plans: ranks started as processes by
python -m ucxx_go.launch run MSCCL++ 0.9's own plans (Communicator.execute) on numpy
buffers and get numpy's answers; calls that differ fail every rank before anything
moves; a rank that dies mid-run fails the others' call at once, naming it."""

import json
import os
import pathlib
import subprocess

import pytest

from _support import LAUNCH, rank_script

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "core" / "plan" / "testdata" / "mscclpp-v0.9.0"


def run_ranks(tmp_path, n, body, timeout=120):
    s = rank_script(tmp_path, body)
    r = subprocess.run(LAUNCH + ["-n", str(n), "--timeout", str(timeout - 20), s], timeout=timeout,
                       capture_output=True, text=True)
    assert r.returncode == 0, (r.returncode, r.stdout[-3000:], r.stderr[-3000:])
    return r.stdout


def test_mscclpp_plans_give_numpys_answers(tmp_path):
    out = run_ranks(tmp_path, 4, f"""
        import asyncio, os, numpy as np, ucxx_go
        FIX = {str(FIXTURES)!r}
        async def main():
            comm = await ucxx_go.Communicator.init(timeout=30)
            r, n = comm.rank, comm.size
            for name, sizes in [("single_node__allreduce.json", [128, 4096, 1 << 18]),
                                ("single_node__allreduce_pkt.json", [64, 4096]),
                                ("single_node__allreduce_nvls_zero_copy.json", [128, 1 << 16])]:
                plan = ucxx_go.ExecutionPlan.load(f"{{FIX}}/{{name}}")
                assert plan.in_place and plan.ranks == n and plan.collective == "allreduce"
                for count in sizes:
                    for dtype, op in [("float32", None), ("int32", "max"), ("float64", "min"), ("int64", "prod")]:
                        rng = np.random.default_rng(count + r)
                        x = rng.integers(1, 5, count).astype(dtype)
                        parts = [np.random.default_rng(count + q).integers(1, 5, count).astype(dtype) for q in range(n)]
                        want = {{None: np.sum, "max": np.max, "min": np.min, "prod": np.prod}}[op](parts, axis=0)
                        await comm.execute(plan, x, op=op)
                        assert np.array_equal(x, want), (name, count, dtype, op)
            # An out-of-place allgather-shaped check: alltoall, out of place.
            plan = ucxx_go.ExecutionPlan.load(f"{{FIX}}/single_node__alltoall__alltoall_ring_oop.json")
            x = np.arange(n * 1024, dtype=np.int32) + r * 100000
            y = np.zeros_like(x)
            await comm.execute(plan, x, y)
            want = np.concatenate([np.arange(n * 1024, dtype=np.int32)[r * 1024:(r + 1) * 1024] + q * 100000 for q in range(n)])
            assert np.array_equal(y, want)
            os.write(1, f"rank {{r}} ok\\n".encode())
            comm.close()
        asyncio.run(main())
    """)
    assert out.count(" ok") == 4


def test_a_rank_without_the_worlds_secret_is_kept_out(tmp_path):
    """ucxx_go.launch gives its ranks a fresh secret; a process claiming rank 1 with
    another (or none) is dropped by rank 0 and fails alone, and the world forms."""
    out = run_ranks(tmp_path, 2, """
        import asyncio, os, numpy as np, ucxx_go
        async def main():
            assert len(os.environ["UCXGO_COMM_SECRET"]) == 32
            if int(os.environ["RANK"]) == 1:
                for guess in ["a guess", b""]:
                    try:
                        await ucxx_go.Communicator.init(secret=guess, timeout=3)
                    except ucxx_go.UCXError as e:
                        os.write(1, f"impostor refused: {type(e).__name__}\\n".encode())
                    else:
                        raise AssertionError("a rank with another secret joined")
            comm = await ucxx_go.Communicator.init(timeout=30)
            x = np.full(16, comm.rank + 1, dtype=np.int32)
            await comm.allreduce(x)
            assert (x == 3).all()
            os.write(1, f"rank {comm.rank} ok\\n".encode())
            comm.close()
        asyncio.run(main())
    """)
    assert out.count(" ok") == 2 and out.count("impostor refused") == 2, out


def test_calls_that_differ_fail_every_rank_and_leave_the_communicator_usable(tmp_path):
    out = run_ranks(tmp_path, 2, f"""
        import asyncio, os, numpy as np, ucxx_go
        async def main():
            comm = await ucxx_go.Communicator.init(timeout=30)
            plan = ucxx_go.ExecutionPlan.load({str(FIXTURES / "allreduce_2r_example.json")!r})
            x = np.ones(64 if comm.rank == 0 else 128, dtype=np.float32)
            try:
                await comm.execute(plan, x, np.empty_like(x))
                raise SystemExit("a mismatched call ran")
            except ucxx_go.CollectiveMismatchError as e:
                print("mismatch", comm.rank, e, flush=True)
            x = np.ones(64, dtype=np.float32)
            try:
                await comm.execute(plan, x, np.empty(64, dtype=np.float32), dtype="int32" if comm.rank else None)
                raise SystemExit("a call with another type ran")
            except ucxx_go.CollectiveMismatchError:
                pass
            y = np.empty_like(x)
            await comm.execute(plan, x, y)
            assert (y == 2).all()
            print("after", comm.rank, flush=True)
            comm.close()
        asyncio.run(main())
    """)
    assert out.count("mismatch") == 2 and out.count("after") == 2


def test_a_plan_that_does_not_fit_is_a_plan_error(tmp_path):
    out = run_ranks(tmp_path, 2, f"""
        import asyncio, os, numpy as np, ucxx_go
        async def main():
            comm = await ucxx_go.Communicator.init(timeout=30)
            plan = ucxx_go.ExecutionPlan.load({str(FIXTURES / "allreduce_2r_example.json")!r})
            x = np.ones(7, dtype=np.float32)  # 28 bytes: not 2 chunks of 16-byte units
            try:
                await comm.execute(plan, x, np.empty_like(x))
            except ucxx_go.PlanError as e:
                print("plan error", comm.rank, e, flush=True)
            comm.close()
        asyncio.run(main())
    """)
    assert out.count("plan error") == 2


def test_malformed_plans_raise_before_any_rank_runs():
    import pytest
    import ucxx_go
    with pytest.raises(ucxx_go.PlanError):
        ucxx_go.ExecutionPlan.from_json(b"{not json")
    p = json.loads((FIXTURES / "allreduce_2r_example.json").read_text())
    p["gpus"][0]["threadblocks"][0]["ops"][0]["name"] = "launch_missiles"
    with pytest.raises(ucxx_go.PlanError):
        ucxx_go.ExecutionPlan.from_json(p)
    plan = ucxx_go.ExecutionPlan.from_json((FIXTURES / "allreduce_2r_example.json").read_text())
    assert (plan.name, plan.collective, plan.ranks, plan.in_place) == ("allreduce_2r_example", "allreduce", 2, False)


# The call: a loaded plan (announced calls), or the registry's small allreduce, whose
# calls run unannounced once its context exists.
DEAD_RANK_CALLS = {
    "plan": "comm.execute(plan, x, np.empty_like(x))",
    "unannounced": "comm.allreduce(x)",
}


@pytest.mark.parametrize("how", sorted(DEAD_RANK_CALLS))
def test_a_dead_rank_fails_the_others_promptly_naming_it(tmp_path, how):
    call = DEAD_RANK_CALLS[how]
    out = run_ranks(tmp_path, 2, f"""
        import asyncio, os, time, numpy as np, ucxx_go
        async def main():
            comm = await ucxx_go.Communicator.init(timeout=60)
            plan = ucxx_go.ExecutionPlan.load({str(FIXTURES / "allreduce_2r_example.json")!r})
            x = np.ones(1024, np.float32)
            await {call}
            await {call}
            if comm.rank == 1:
                os._exit(0)  # dies without a word
            t = time.monotonic()
            try:
                await {call}
                raise SystemExit("the call ran without rank 1")
            except ucxx_go.RankFailedError as e:
                took = time.monotonic() - t
                assert e.rank == 1 and took < 10, (e.rank, took)
                print("failed", e.rank, f"{{took:.3f}}", e, flush=True)
            try:
                await {call}
            except ucxx_go.CommunicatorBrokenError:
                print("broken", flush=True)
            comm.close()
        asyncio.run(main())
    """)
    assert "failed 1" in out and "broken" in out


COLLECTIVES_BODY = """
import asyncio, os, sys, numpy as np, ucxx_go
SIZES = [0, 1, 7, 1000, 12345]
TYPES = ["int8", "uint8", "int16", "int32", "uint32", "int64", "uint64", "float16", "bfloat16", "float32", "float64"]
OPS = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}

def data(q, count, dtype, op):
    rng = np.random.default_rng(1000 * q + count)
    lo, hi = (1, 3) if op == "prod" else (0, 9)
    v = rng.integers(lo, hi, count)
    if dtype == "bfloat16":  # bfloat16 bits of small integers (exact)
        return (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return v.astype(dtype)

def combine(parts, dtype, op):
    if dtype == "bfloat16":
        f = [(p.astype(np.uint32) << 16).view(np.float32) for p in parts]
        acc = f[0].copy()
        for p in f[1:]:
            acc = OPS[op](acc, p)
        return (acc.view(np.uint32) >> 16).astype(np.uint16)
    acc = parts[0].copy()
    for p in parts[1:]:
        acc = OPS[op](acc, p).astype(dtype)
    return acc

async def main():
    comm = await ucxx_go.Communicator.init(timeout=60)
    r, n = comm.rank, comm.size
    checks = 0
    for count in SIZES:
        for dtype in TYPES:
            for op in OPS:
                parts = [data(q, count, dtype, op) for q in range(n)]
                want = combine(parts, dtype, op)
                x = parts[r].copy()
                out = np.empty_like(x)
                await comm.allreduce(x, out, op=op) if dtype != "bfloat16" else await (comm._start("allreduce", x, out, op=op, dtype="bfloat16") or asyncio.sleep(0))
                assert np.array_equal(out, want), ("allreduce", count, dtype, op)
                if dtype != "bfloat16":
                    await comm.allreduce(x, op=op)  # in place
                    assert np.array_equal(x, want), ("allreduce in place", count, dtype, op)
                    x = parts[r].copy()
                    y = np.full_like(x, 77)
                    await comm.reduce(x, y, root=n - 1, op=op)
                    assert np.array_equal(y, want if r == n - 1 else np.full_like(x, 77)), ("reduce", count, dtype, op)
                    big = np.concatenate([data(q * 7 + r, count, dtype, op) for q in range(n)]) if count else np.empty(0, dtype)
                    blocks = [np.concatenate([data(q * 7 + s, count, dtype, op) for q in range(n)]) for s in range(n)]
                    want_rs = combine(blocks, dtype, op)[r * count:(r + 1) * count]
                    o = np.empty(count, dtype)
                    await comm.reduce_scatter(big, o, op=op)
                    assert np.array_equal(o, want_rs), ("reduce_scatter", count, dtype, op)
                checks += 1
            x = data(r, count, dtype, "sum")
            out = np.empty(n * count, x.dtype)
            await comm.allgather(x, out)
            assert np.array_equal(out, np.concatenate([data(q, count, dtype, "sum") for q in range(n)])), ("allgather", count, dtype)
            out2 = np.zeros(n * count, x.dtype)
            out2[r * count:(r + 1) * count] = x
            await comm.allgather(out2)
            assert np.array_equal(out2, out), ("allgather in place", count, dtype)
            b = data(5, count, dtype, "sum") if r == 1 % n else np.zeros(count, x.dtype)
            await comm.broadcast(b, root=1 % n)
            assert np.array_equal(b, data(5, count, dtype, "sum")), ("broadcast", count, dtype)
            a = np.concatenate([data(r * n + j, count, dtype, "sum") for j in range(n)]) if count else np.empty(0, x.dtype)
            o = np.empty_like(a)
            await comm.alltoall(a, o)
            want = np.concatenate([data(q * n + r, count, dtype, "sum") for q in range(n)]) if count else np.empty(0, x.dtype)
            assert np.array_equal(o, want), ("alltoall", count, dtype)
            await comm.alltoall(a)
            assert np.array_equal(a, want), ("alltoall in place", count, dtype)
    # large messages: the ring allreduce (pipelined past 4 MiB), the chain/tree broadcast
    # (from 4 MiB in 4 pieces; 4 MiB + 8 B in 2, the deepest pipeline that divides it)
    for count in [(1 << 20) + 3, (1 << 20) + 2, 16 << 20]:
        x = np.full(count, r + 1, np.float32)
        await comm.allreduce(x)
        assert (x == n * (n + 1) / 2).all(), ("allreduce", count)
        b = np.arange(count, dtype=np.float32) if r == 0 else np.zeros(count, np.float32)
        await comm.broadcast(b, root=0)
        assert np.array_equal(b, np.arange(count, dtype=np.float32)), ("broadcast", count)
    os.write(1, f"rank {r} ok {checks}\\n".encode())
    comm.close()

asyncio.run(main())
"""


def test_every_collective_type_and_operator_against_numpy(tmp_path):
    for n in (2, 3, 5):
        out = run_ranks(tmp_path, n, COLLECTIVES_BODY, timeout=600)
        assert out.count(" ok") == n, out


def test_alltoallv_moves_every_block_and_checks_the_counts(tmp_path):
    out = run_ranks(tmp_path, 3, """
        import asyncio, os, numpy as np, ucxx_go
        async def main():
            comm = await ucxx_go.Communicator.init(timeout=30)
            r, n = comm.rank, comm.size
            for seed in range(4):
                counts = np.random.default_rng(seed).integers(0, 50, (n, n))  # counts[i][j]: i sends to j
                x = np.concatenate([np.full(counts[r][j], 1000 * r + j, np.int32) for j in range(n)])
                out = np.full(int(counts[:, r].sum()) + 3, -1, np.int32)
                await comm.alltoallv(x, counts[r], out, counts[:, r])
                want = np.concatenate([np.full(counts[i][r], 1000 * i + r, np.int32) for i in range(n)] + [np.full(3, -1, np.int32)])
                assert np.array_equal(out, want), (seed, out, want)
            # displacements with gaps, in float64
            x = np.arange(10, dtype=np.float64) + 100 * r
            out = np.zeros(3 * n, np.float64)
            await comm.alltoallv(x, [1] * n, out, [1] * n, send_displs=[2 * j for j in range(n)], recv_displs=[3 * i for i in range(n)])
            assert [out[3 * i] for i in range(n)] == [100 * i + 2 * r for i in range(n)]
            # counts that disagree: every rank fails before anything moves, and the communicator stays usable
            bad = [1] * n
            if r == 0:
                bad[1] = 2
            try:
                await comm.alltoallv(np.zeros(2 * n, np.int32), bad, np.zeros(2 * n, np.int32), [1] * n)
                raise SystemExit("mismatched counts ran")
            except ucxx_go.CollectiveMismatchError:
                pass
            await comm.alltoallv(np.ones(n, np.int32), [1] * n, np.zeros(n, np.int32), [1] * n)
            os.write(1, f"rank {r} ok\\n".encode())
            comm.close()
        asyncio.run(main())
    """)
    assert out.count(" ok") == 3


def test_stream_ordered_calls_on_host_memory_run_as_ordinary_ones(tmp_path):
    """stream_ordered=True on host buffers (nothing to order on) returns once done;
    synchronize has nothing to wait for."""
    out = run_ranks(tmp_path, 2, """
        import asyncio, os, numpy as np, ucxx_go
        async def main():
            comm = await ucxx_go.Communicator.init(timeout=30)
            r, n = comm.rank, comm.size
            await comm.synchronize()
            x = np.full(1000, r + 1, np.float32)
            for _ in range(3):
                await comm.allreduce(x, stream_ordered=True)
            assert (x == 3 * 2 * 2).all(), x[:4]
            g = np.zeros(2 * 10, np.int64)
            await comm.allgather(np.full(10, r, np.int64), g, stream_ordered=True)
            assert (g == np.repeat([0, 1], 10)).all(), g
            await comm.synchronize()
            os.write(1, f"rank {r} ok\\n".encode())
            comm.close()
            try:
                await comm.synchronize()
                raise SystemExit("synchronize on a closed communicator")
            except ucxx_go.UCXCloseError:
                pass
        asyncio.run(main())
    """)
    assert out.count(" ok") == 2


def test_calls_made_together_pair_up_in_the_order_they_were_made(tmp_path):
    """Twelve same-shaped calls started together with asyncio.gather while the peer is
    late (so that most are handed to goroutines): every rank pairs call k with call k,
    so each sum is its own buffers'. Three rounds. (That a handed-off call is never
    overtaken, whatever the scheduling: core/executor's turns tests.)"""
    out = run_ranks(tmp_path, 2, """
        import asyncio, os, time, numpy as np, ucxx_go
        async def main():
            comm = await ucxx_go.Communicator.init(timeout=30)
            r = comm.rank
            await comm.barrier()
            for round in range(3):
                xs = [np.full(256, (k + 1) * (r + 1), np.float32) for k in range(12)]
                if r == 1:
                    time.sleep(0.05)  # late: rank 0's calls outlive their crossing
                await asyncio.gather(*(comm.allreduce(x) for x in xs))
                for k, x in enumerate(xs):
                    assert (x == 3 * (k + 1)).all(), (round, k, x[:4])
                await comm.barrier()
            os.write(1, f"rank {r} ok\\n".encode())
            comm.close()
        asyncio.run(main())
    """)
    assert out.count(" ok") == 2


def test_eight_ranks(tmp_path):
    body = (COLLECTIVES_BODY.replace("SIZES = [0, 1, 7, 1000, 12345]", "SIZES = [0, 7, 1000]")
            .replace('TYPES = ["int8", "uint8", "int16", "int32", "uint32", "int64", "uint64", "float16", "bfloat16", "float32", "float64"]',
                     'TYPES = ["int8", "float16", "int64", "float32"]')
            .replace("for count in [(1 << 20) + 3, 16 << 20]:", "for count in [(1 << 18) + 3]:"))
    assert body != COLLECTIVES_BODY
    out = run_ranks(tmp_path, 8, body, timeout=600)
    assert out.count(" ok") == 8, out


def test_split_forms_sub_communicators_beside_the_parent(tmp_path):
    out = run_ranks(tmp_path, 4, """
        import asyncio, os, numpy as np, ucxx_go
        async def main():
            comm = await ucxx_go.Communicator.init(timeout=30)
            r = comm.rank
            half = await comm.split(r % 2, key=-r)
            assert (half.rank, half.size) == ({0: 1, 1: 1, 2: 0, 3: 0}[r], 2), (half.rank, half.size)
            none = await comm.split(-1 if r == 3 else 0)
            assert (none is None) == (r == 3)
            x, y = np.full(100, r, np.int64), np.full(100, r, np.int64)
            await asyncio.gather(half.allreduce(x), comm.allreduce(y))
            assert (x == {0: 2, 1: 4}[r % 2]).all() and (y == 6).all()
            if none is not None:
                z = np.ones(3, np.int32)
                await none.allreduce(z)
                assert (z == 3).all()
                none.close()
            half.close()
            os.write(1, f"rank {r} ok\\n".encode())
            comm.close()
        asyncio.run(main())
    """)
    assert out.count(" ok") == 4


def test_element_types_come_from_the_buffer_and_byte_swapped_ones_are_refused():
    import numpy as np
    import pytest

    from ucxx_go import _constants as C
    from ucxx_go._collective_args import dtype_code

    for name in ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
                 "float64"]:
        want = getattr(C, "DTYPE_" + name.upper())
        for _ in range(2):  # the second through the cache of dtypes seen
            assert dtype_code(np.zeros(3, name)) == want
        assert dtype_code(np.zeros(3, "uint8"), dtype=name) == want
        assert dtype_code(np.zeros(3, "uint8"), dtype=np.zeros(6, name)) == want  # an array's type, as allgather's
    assert dtype_code(bytearray(4)) == C.DTYPE_UINT8
    assert dtype_code(np.zeros(3, "f4"), dtype=bytearray(4)) == C.DTYPE_UINT8
    for bad in [np.zeros(3, ">f4"), np.zeros(3, ">i8"), np.zeros(3, "complex64"), np.zeros(3, bool)]:
        for _ in range(2):
            with pytest.raises(TypeError):
                dtype_code(bad)
            with pytest.raises(TypeError):
                dtype_code(np.zeros(3, "f4"), dtype=bad)


@pytest.mark.parametrize("executor", ["free", "busy"])
def test_a_cancelled_collective_keeps_its_buffer_until_the_call_ends(tmp_path, executor):
    """A rank's await is cancelled while the call waits for a rank held back (on a
    fifo rank 0 opens): the call goes on in Go, so its buffer must stay alive
    (referenced) until the call ends, and the communicator works after. "busy": the
    event loop's default executor is busy when the call outlives its crossing, so the
    task is cancelled before any thread began waiting for the call."""
    go = tmp_path / "go"
    os.mkfifo(go)
    out = run_ranks(tmp_path, 2, f"""
        import asyncio, concurrent.futures, gc, threading, weakref, numpy as np, ucxx_go
        async def main():
            comm = await ucxx_go.Communicator.init(timeout=30)
            if comm.rank == 0:
                loop = asyncio.get_running_loop()
                if {executor == "busy"}:
                    loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(1))
                    freed = threading.Event()
                    occupied = loop.run_in_executor(None, freed.wait)  # the executor's one thread
                x = np.ones(1 << 20, np.float32)  # 4 MiB: outlives the crossing's spin
                alive = weakref.ref(x)
                task = asyncio.ensure_future(comm.allreduce(x))
                await asyncio.sleep(0)  # the task crosses into Go; rank 1 has not come
                assert not task.done()
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                if {executor == "busy"}:
                    freed.set()
                    await occupied
                    await loop.run_in_executor(None, int)  # whatever was queued before it is done
                del x, task
                gc.collect()
                assert alive() is not None, "freed while the call ran"
                with open({str(go)!r}, "w"):
                    pass  # rank 1 may come
                for _ in range(300):  # the call ends once rank 1 comes
                    gc.collect()
                    if alive() is None:
                        break
                    await asyncio.sleep(0.02)
                assert alive() is None, "never released"
            else:
                with open({str(go)!r}) as f:
                    f.read()
                await comm.allreduce(np.ones(1 << 20, np.float32))
            y = np.full(4, comm.rank + 1, np.float32)
            await comm.allreduce(y)
            assert (y == 3).all()
            print("ok", comm.rank, flush=True)
            comm.close()
        asyncio.run(main())
    """)
    assert out.count("ok") == 2
