"""Debugging aids.

    with ucxx_go.debug.go_trace("dag.trace"):
        ...                                  # then: go tool trace dag.trace

``go_trace`` records the Go runtime's execution trace (goroutines, threads, system
calls, garbage collection) of what runs inside it: where the time of a DAG's
vertices or a collective call goes between the caller's thread, the progress thread
and the DAG's lanes. One trace at a time per process.

``go_cpu_profile`` records the Go runtime's CPU profile (read it with ``go tool pprof``):
where the Go core's own CPU time goes, which the trace does not split.

``go_stacks()`` returns every goroutine's stack, for a hang's post-mortem.
"""

import contextlib
import operator

from ._bridge import call, ext

__all__ = ["go_cpu_profile", "go_stacks", "go_trace"]


@contextlib.contextmanager
def _recording(toggle, path, *args):
    """Go's recording `toggle` (GoTrace, GoCPUProfile: a path starts one, "" stops it)
    into a new file at `path` while the block runs."""
    call(toggle, str(path), *args)
    try:
        yield path
    finally:
        call(toggle, "", *args)


def go_trace(path):
    """Trace the Go runtime into a new file at `path` while the block runs.

    Raises
    ------
    UCXError
        A trace is already running, or the file cannot be created.
    """
    return _recording(ext.pybridge_GoTrace, path)


def go_cpu_profile(path, hz=0):
    """Profile the Go runtime's CPU use into a new file at `path` while the block runs,
    sampling `hz` times a second of CPU time (0: Go's default, 100; at most 10,000).
    A rate other than the default makes Go print "cannot set cpu profile rate" to
    stderr; the rate asked for is the one used.

    Raises
    ------
    ValueError
        `hz` is outside 0..10,000.
    UCXError
        A profile is already running, or the file cannot be created.
    """
    hz = operator.index(hz)
    if not 0 <= hz <= 10_000:
        raise ValueError(f"hz must be in 0..10000, got {hz}")
    return _recording(ext.pybridge_GoCPUProfile, path, hz)


def go_stacks():
    """Return the stacks of every goroutine of the Go core as text (what Go prints on
    SIGQUIT): where the DAG's lanes, the progress thread and the executor wait."""
    return call(ext.pybridge_GoStacks)
