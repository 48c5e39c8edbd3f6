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


def _bench_module(name):
    sys.path.insert(0, BENCH)
    try:
        return __import__(name)
    finally:
        sys.path.remove(BENCH)


def test_parse_bytes_accepts_ucxx_spellings():
    parse_bytes = _bench_module("_bench_common").parse_bytes
    assert parse_bytes("8") == 8
    assert parse_bytes("1MiB") == 1 << 20
    assert parse_bytes("10 MB") == parse_bytes("10 Mb") == 10_000_000  # dask's reading, UCXX's default
    assert parse_bytes("1.5 KiB") == 1536
    with pytest.raises(ValueError):
        parse_bytes("ten")


def test_summarize_follows_ucxx_definitions():
    stats = _bench_module("_bench_common").summarize([1e-3, 2e-3, 3e-3], n_bytes=1000, n_buffers=2)
    assert stats["bandwidth_median_Bps"] == pytest.approx(2 * 1000 * 2 / 2e-3)
    assert stats["latency_median_ns"] == pytest.approx(1e6)  # UCXX's latency: half the round trip
    assert stats["rtt_p50_us"] == pytest.approx(2000)
    assert stats["rtt_p99_us"] == pytest.approx(3000)
    assert stats["msgs_per_s_median"] == pytest.approx(1000)


def _can_import(module):
    code = f"import sys; sys.path = [p for p in sys.path if p not in ('', '.')]; import {module}"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60).returncode == 0


def test_send_recv_without_ucxx_says_why():
    if _can_import("ucxx"):
        pytest.skip("RAPIDS ucxx is importable here")
    res = subprocess.run([sys.executable, "send_recv.py", "-l", "ucxx-async", "-n", "8", "--n-iter", "1"],
                         cwd=BENCH, env=ENV, capture_output=True, text=True, timeout=60)
    assert res.returncode == 1
    assert "needs the 'ucxx' module" in res.stderr


def test_compare_skips_ucxx_it_cannot_import(monkeypatch):
    """From the repository root, whose Go package ucxx/ is not RAPIDS ucxx."""
    if _can_import("ucxx"):
        pytest.skip("RAPIDS ucxx is importable here")
    compare = _bench_module("compare")
    monkeypatch.chdir(os.path.dirname(HERE))
    chosen, skipped = compare.choose_interpreters(compare.parse_args(["--backends", "ucxx-async", "--no-affinity"]))
    assert chosen == {}
    assert "cannot import ucxx" in skipped["ucxx-async"]
