"""The benchmark suite runs and its output parses (CI runs it at tiny sizes; speed is
never asserted here: benchmarks/RESULTS.md holds the numbers)."""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(os.path.dirname(HERE), "benchmarks")
ENV = dict(os.environ, UCX_NET_DEVICES="lo")


def run(*args, timeout=120):
    res = subprocess.run([sys.executable, *args], cwd=BENCH, env=ENV, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, f"{args} exited {res.returncode}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}"
    return res.stdout


@pytest.mark.parametrize("backend", ["ucxx-go", "asyncio"])
@pytest.mark.parametrize("shape", [["-n", "8", "--n-iter", "20"], ["-n", "64KiB", "-x", "4", "--n-iter", "5"]], ids=["8B", "4x64KiB"])
def test_send_recv_runs_and_reports(tmp_path, backend, shape):
    out = tmp_path / "r.json"
    text = run("send_recv.py", "-l", backend, *shape, "--n-warmup-iter", "2", "--no-detailed-report", "--json", str(out))
    assert "Bandwidth" in text
    res = json.loads(out.read_text())["results"]
    for key in ("bandwidth_avg_Bps", "bandwidth_median_Bps", "rtt_p50_us", "rtt_p90_us", "rtt_p99_us"):
        assert res[key] > 0, (key, res)
    assert res["rtt_p50_us"] <= res["rtt_p90_us"] <= res["rtt_p99_us"]


def test_compare_quick_writes_report(tmp_path):
    md = tmp_path / "RESULTS.md"
    run("compare.py", "--quick", "--no-floor", "--backends", "ucxx-go,asyncio", "--out", str(md), timeout=240)
    text = md.read_text()
    assert "ucxx-go" in text and "|" in text
    assert list(tmp_path.glob("results/*.json")), "raw JSON not written beside the report"


def test_ucx_floor_runs(tmp_path):
    out = tmp_path / "floor.json"
    run("ucx_floor.py", "--sizes", "8,64KiB", "--iters", "50", "--json", str(out), timeout=120)
    res = json.loads(out.read_text())
    assert res["tag_lat_us"]["8"] > 0 and res["tag_bw_MBps"]["65536"] > 0
