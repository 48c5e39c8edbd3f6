"""ucxx_go.debug: the Go runtime's execution trace, CPU profile and stacks."""

import pytest

import ucxx_go
from ucxx_go.exceptions import UCXError


def test_go_trace_writes_a_trace_and_refuses_a_second(tmp_path):
    path = tmp_path / "run.trace"
    with ucxx_go.debug.go_trace(path):
        with pytest.raises(UCXError, match="running already"):
            with ucxx_go.debug.go_trace(tmp_path / "second.trace"):
                pass
        ucxx_go.get_ucx_version()
    data = path.read_bytes()
    assert data.startswith(b"go 1.") and b" trace" in data[:16], data[:16]
    assert len(data) > 100
    assert not (tmp_path / "second.trace").exists()
    with ucxx_go.debug.go_trace(tmp_path / "again.trace"):  # the first one stopped
        pass


def test_go_cpu_profile_writes_a_profile_and_refuses_a_second(tmp_path):
    path = tmp_path / "run.pprof"
    with ucxx_go.debug.go_cpu_profile(path):
        with pytest.raises(UCXError, match="running already"):
            with ucxx_go.debug.go_cpu_profile(tmp_path / "second.pprof"):
                pass
        ucxx_go.get_ucx_version()
    data = path.read_bytes()
    assert data.startswith(b"\x1f\x8b"), data[:4]  # pprof's gzipped protocol buffer
    assert not (tmp_path / "second.pprof").exists()
    with ucxx_go.debug.go_cpu_profile(tmp_path / "again.pprof"):  # the first one stopped
        pass


def test_go_stacks_names_the_engines_goroutines():
    ucxx_go.init()  # an engine: its goroutines show in the dump
    stacks = ucxx_go.debug.go_stacks()
    assert stacks.startswith("goroutine ") and "GoStacks" in stacks
    assert stacks.count("\ngoroutine ") >= 1  # more than the calling one
