"""ucxx_go.debug: the Go runtime's execution trace, CPU profile and stacks."""

import gzip
import re
import shutil
import subprocess

import pytest

import ucxx_go
from ucxx_go.exceptions import UCXError


def _is_trace(data):
    return data.startswith(b"go 1.") and b" trace" in data[:16] and len(data) > 100


def _is_profile(data):
    return data.startswith(b"\x1f\x8b")  # pprof's gzipped protocol buffer


@pytest.mark.parametrize("record, looks_right", [(ucxx_go.debug.go_trace, _is_trace),
                                                 (ucxx_go.debug.go_cpu_profile, _is_profile)],
                         ids=["go_trace", "go_cpu_profile"])
def test_a_recording_writes_its_file_and_refuses_a_second(tmp_path, record, looks_right):
    path = tmp_path / "run.out"
    with record(path):
        with pytest.raises(UCXError, match="running already"):
            with record(tmp_path / "second.out"):
                pass
        ucxx_go.get_ucx_version()
    data = path.read_bytes()
    assert looks_right(data), data[:16]
    assert not (tmp_path / "second.out").exists()
    with record(tmp_path / "again.out"):  # the first one stopped
        pass


def _profile_period_ns(data):
    """The sampling period of a pprof profile (perftools.profiles.Profile field 12,
    period), read from its top-level protocol buffer fields."""
    buf, i = gzip.decompress(data), 0

    def varint():
        nonlocal i
        shift = value = 0
        while True:
            b = buf[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return value

    while i < len(buf):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            value = varint()
            if field == 12:
                return value
        elif wire == 2:
            n = varint()
            i += n
        else:
            raise AssertionError(f"unexpected wire type {wire} of field {field}")
    raise AssertionError("no period in the profile")


def test_go_cpu_profile_samples_at_the_rate_asked(tmp_path):
    with ucxx_go.debug.go_cpu_profile(tmp_path / "default.pprof"):
        pass
    assert _profile_period_ns((tmp_path / "default.pprof").read_bytes()) == 10_000_000  # 100 Hz
    with ucxx_go.debug.go_cpu_profile(tmp_path / "fast.pprof", hz=5000):
        pass
    assert _profile_period_ns((tmp_path / "fast.pprof").read_bytes()) == 200_000
    with ucxx_go.debug.go_cpu_profile(tmp_path / "again.pprof"):  # back to the default
        pass
    assert _profile_period_ns((tmp_path / "again.pprof").read_bytes()) == 10_000_000
    for hz in (-1, 10_001):
        with pytest.raises(ValueError, match="hz"):
            with ucxx_go.debug.go_cpu_profile(tmp_path / "bad.pprof", hz=hz):
                pass
    assert not (tmp_path / "bad.pprof").exists()


def test_go_stacks_names_the_engines_goroutines():
    ucxx_go.init()  # an engine: its goroutines show in the dump
    stacks = ucxx_go.debug.go_stacks()
    assert stacks.startswith("goroutine ") and "GoStacks" in stacks
    assert stacks.count("\ngoroutine ") >= 1  # more than the calling one


@pytest.mark.skipif(shutil.which("go") is None, reason="no go command to parse the trace")
def test_the_dag_marks_its_launch_path_in_the_trace(tmp_path):
    """The regions benchmarks/dag/trace_regions.py sums: a copy's Go call and the
    graph's parts (the GPU lane's own show only with a GPU)."""
    import numpy as np

    ctx = ucxx_go.ExecutionContext(transfers=False, gpus=[])
    try:
        a, b = ctx.wrap(np.zeros(64, "f4")), ctx.wrap(np.ones(64, "f4"))
        with ucxx_go.debug.go_trace(tmp_path / "dag.trace"):
            for _ in range(3):
                ctx.copy(a, b)
            ctx.synchronize_sync()
    finally:
        ctx.close()
    parsed = subprocess.run(["go", "tool", "trace", "-d=parsed", str(tmp_path / "dag.trace")],
                            capture_output=True, text=True, timeout=120)
    assert parsed.returncode == 0, parsed.stderr[-500:]
    for region in ("DagCopy", "dag.lock", "dag.graph", "dag.deliver"):
        for edge in ("RegionBegin", "RegionEnd"):
            found = re.findall(rf'{edge} Time=\d+ Task=\d+ Type="{re.escape(region)}"', parsed.stdout)
            assert len(found) == 3, (edge, region, len(found))
