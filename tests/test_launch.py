"""python -m ucxx_go.launch: N ranks with torchrun's variables; a failing rank stops
the others and gives its exit code; a timeout stops them all."""

import os
import subprocess

from _support import LAUNCH, rank_script


def test_ranks_get_their_variables(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    s = rank_script(tmp_path, f"""
        import os
        keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
        open(os.path.join({str(out)!r}, os.environ["RANK"]), "w").write(" ".join(os.environ[k] for k in keys))
    """)
    r = subprocess.run(LAUNCH + ["-n", "3", "--timeout", "60", s], timeout=90)
    assert r.returncode == 0
    seen = sorted((out / f).read_text().split() for f in os.listdir(out))
    assert [x[0] for x in seen] == ["0", "1", "2"]
    for rank, local, world, local_world, addr, port in seen:
        assert (local, world, local_world, addr) == (rank, "3", "3", "127.0.0.1")
        assert int(port) > 0
    assert len({x[5] for x in seen}) == 1


def test_a_failing_rank_stops_the_others(tmp_path):
    s = rank_script(tmp_path, """
        import os, sys, time
        if os.environ["RANK"] == "1":
            sys.exit(3)
        time.sleep(120)
    """)
    r = subprocess.run(LAUNCH + ["-n", "3", "--grace", "2", s], timeout=60)
    assert r.returncode == 3


def test_timeout_stops_the_ranks(tmp_path):
    s = rank_script(tmp_path, "import time; time.sleep(120)\n")
    r = subprocess.run(LAUNCH + ["-n", "2", "--timeout", "1", "--grace", "1", s], timeout=60)
    assert r.returncode == 124
