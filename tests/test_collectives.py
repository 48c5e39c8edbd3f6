"""Collectives through execution plans: ranks started as processes by
python -m ucxx_go.launch run MSCCL++ 0.9's own plans (Communicator.execute) on numpy
buffers and get numpy's answers; calls that differ fail every rank before anything
moves; a rank that dies mid-run fails the others' call at once, naming it."""

import json
import pathlib
import subprocess

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
        import asyncio, numpy as np, ucxx_go
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
            print("rank", r, "ok", flush=True)
            comm.close()
        asyncio.run(main())
    """)
    assert out.count(" ok") == 4


def test_calls_that_differ_fail_every_rank_and_leave_the_communicator_usable(tmp_path):
    out = run_ranks(tmp_path, 2, f"""
        import asyncio, numpy as np, ucxx_go
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
        import asyncio, numpy as np, ucxx_go
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


def test_a_dead_rank_fails_the_others_promptly_naming_it(tmp_path):
    out = run_ranks(tmp_path, 2, f"""
        import asyncio, os, time, numpy as np, ucxx_go
        async def main():
            comm = await ucxx_go.Communicator.init(timeout=60)
            plan = ucxx_go.ExecutionPlan.load({str(FIXTURES / "allreduce_2r_example.json")!r})
            x = np.ones(1024, np.float32)
            await comm.execute(plan, x, np.empty_like(x))
            if comm.rank == 1:
                os._exit(0)  # dies without a word
            t = time.monotonic()
            try:
                await comm.execute(plan, x, np.empty_like(x))
                raise SystemExit("the call ran without rank 1")
            except ucxx_go.RankFailedError as e:
                took = time.monotonic() - t
                assert e.rank == 1 and took < 10, (e.rank, took)
                print("failed", e.rank, f"{{took:.3f}}", e, flush=True)
            try:
                await comm.execute(plan, x, np.empty_like(x))
            except ucxx_go.CommunicatorBrokenError:
                print("broken", flush=True)
            comm.close()
        asyncio.run(main())
    """)
    assert "failed 1" in out and "broken" in out
