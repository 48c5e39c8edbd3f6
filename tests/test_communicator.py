"""Communicator: ranks started by python -m ucxx_go.launch form a world and pass
barriers; a rank that dies makes the others' barrier fail with a UCXError (today
within the communicator's timeout: the endpoints between ranks of one host are on
shared memory, whose peer failure this does not yet see at once)."""

import subprocess

from _support import LAUNCH, rank_script


def test_ranks_pass_barriers(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    s = rank_script(tmp_path, f"""
        import asyncio, os, ucxx_go
        async def main():
            comm = await ucxx_go.Communicator.init(timeout=30)
            for _ in range(5):
                await comm.barrier()
            open(os.path.join({str(out)!r}, str(comm.rank)), "w").write(f"{{comm.rank}} {{comm.size}}")
            comm.close()
            comm.close()
        asyncio.run(main())
    """)
    r = subprocess.run(LAUNCH + ["-n", "3", "--timeout", "90", s], timeout=120)
    assert r.returncode == 0
    assert sorted((out / f).read_text() for f in ("0", "1", "2")) == ["0 3", "1 3", "2 3"]


def test_a_dead_rank_fails_the_barrier(tmp_path):
    s = rank_script(tmp_path, """
        import asyncio, os, sys, ucxx_go
        async def main():
            comm = await ucxx_go.Communicator.init(timeout=20)
            await comm.barrier()
            if comm.rank == 2:
                os._exit(0)  # dies without a word
            try:
                await comm.barrier()
            except ucxx_go.UCXError as e:
                print(f"rank {comm.rank}: {type(e).__name__}: {e}", flush=True)
                sys.exit(7)
            sys.exit(1)  # the barrier passed without rank 2
        asyncio.run(main())
    """)
    r = subprocess.run(LAUNCH + ["-n", "3", "--timeout", "90", s], timeout=120, capture_output=True, text=True)
    assert r.returncode == 7, (r.returncode, r.stdout, r.stderr)
    assert "barrier" in r.stdout


def test_builtin_choice_names_the_registrys_plan(tmp_path):
    """builtin_choice answers from the registry: direct, then all-pairs, then the
    ring for host allreduces (pipelined only where the message has the pieces),
    direct then all-pairs on device memory; an unknown collective is an error."""
    s = rank_script(tmp_path, """
        import asyncio, ucxx_go
        async def main():
            comm = await ucxx_go.Communicator.init(timeout=30)
            pick = lambda *a, **k: comm.builtin_choice(*a, **k)["algorithm"]
            assert pick("allreduce", 8, in_place=True) == "direct"
            assert pick("allreduce", 256 << 10) == "allpairs"
            ring = comm.builtin_choice("allreduce", 16 << 20, in_place=True)
            assert ring["algorithm"] == "ring" and ring["chunks"] == 4, ring
            tail = comm.builtin_choice("allreduce", (16 << 20) + 4)
            assert tail["chunks"] == 1 and tail["uneven"] == "tail", tail
            padded = comm.builtin_choice("allreduce", 100004)  # 25,001 float32: all-pairs needs an even count
            assert padded == {"algorithm": "allpairs", "lanes": 1, "chunks": 1, "uneven": "padded"}, padded
            assert ring["uneven"] == ""
            assert pick("allreduce", 4 << 20, device=True) == "direct"
            assert pick("allreduce", 16 << 20, device=True) == "allpairs"
            assert pick("alltoall", 64) == "pairwise"
            try:
                comm.builtin_choice("allscatter", 8)
                raise SystemExit("an unknown collective was named")
            except ucxx_go.UCXError:
                pass
            await comm.barrier()
            comm.close()
        asyncio.run(main())
    """)
    r = subprocess.run(LAUNCH + ["-n", "2", "--timeout", "60", s], timeout=90)
    assert r.returncode == 0
