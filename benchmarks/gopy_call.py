"""The cost of one Python -> Go call through the gopy extension, beside reference calls.

    python benchmarks/gopy_call.py [--number 20000] [--repeat 7] [--no-engine] [--json FILE]

Every send, receive and completion-queue wake-up of ucxx_go crosses into Go once
(ucxx_go._endpoint calls ext.pybridge_TagSend and friends directly), so this is the
fixed price per operation that no change on the Go side removes. Each row is timed
with timeit, `number` calls per repeat; the table gives the median over repeats in ns
per call, the timeit loop included (the "empty statement" row is that loop alone).

Rows:
- empty statement, a plain Python function call: the interpreter's own costs;
- ctypes calls into libc: abs() (a foreign call that does nothing) and getpid()
  (a system call; glibc does not cache the pid), and os.getpid() for that syscall
  without ctypes;
- ext.pybridge_ConsumeWake(0), of no queue: cgo's transition into Go and back plus
  gopy's argument and result handling, with nearly nothing done in Go (a map lookup
  under a lock and a deferred recover);
- ext.pybridge_Version(): the same, plus a C call (ucp_get_version_string) and a
  string result converted to a Python str;
- with an idle engine started (unless --no-engine): ext.pybridge_ConsumeWake(queue) as the
  event loop calls it on every wake-up, which also reads the completion queue's
  non-blocking eventfd (EAGAIN when nothing is pending).

A real TagSend is not timed here: sent in a synchronous loop, its messages and
completions would pile up with nobody receiving them. `await ep.send()` as a whole is
in benchmarks/foundation.md and the demo's round trips.
"""

import argparse
import ctypes
import json
import os
import platform
import statistics
import sys
import timeit

os.environ.setdefault("UCX_NET_DEVICES", "lo")

import ucxx_go  # noqa: E402  (after UCX_NET_DEVICES: the engine reads it)
from ucxx_go import _context  # noqa: E402
from ucxx_go._bridge import ext  # noqa: E402


def _noop():
    return None


def _time_ns(stmt, number, repeat, **names):
    """Median over `repeat` runs of timeit's per-execution time of stmt, in ns."""
    timer = timeit.Timer(stmt, globals=names)
    timer.timeit(number=max(1, number // 10))  # warm-up: caches, lazy binding
    return statistics.median(t / number * 1e9 for t in timer.repeat(repeat=repeat, number=number))


def measure(number=20_000, repeat=7, engine=True):
    """{row name: median ns per call}, in the order of the module docstring."""
    if _context._context is not None:
        # ConsumeWake would then read that engine's eventfd: the "no engine" rows need a
        # process where none runs (reset() stops and frees it, which is enough).
        raise RuntimeError("ucxx_go is already initialised in this process")
    libc = ctypes.CDLL(None)
    c_abs, c_getpid = libc.abs, libc.getpid
    c_abs.argtypes, c_abs.restype = [ctypes.c_int], ctypes.c_int
    c_getpid.argtypes, c_getpid.restype = [], ctypes.c_int

    rows = {
        "empty statement (timeit loop)": _time_ns("pass", number, repeat),
        "plain Python function call": _time_ns("f()", number, repeat, f=_noop),
        "ctypes libc abs(-1)": _time_ns("f(-1)", number, repeat, f=c_abs),
        "ctypes libc getpid() (syscall)": _time_ns("f()", number, repeat, f=c_getpid),
        "os.getpid() (syscall, no ctypes)": _time_ns("f()", number, repeat, f=os.getpid),
        "gopy ext.pybridge_ConsumeWake(), no engine": _time_ns(
            "f(0)", number, repeat, f=ext.pybridge_ConsumeWake),
        "gopy ext.pybridge_Version() (returns a str)": _time_ns(
            "f()", number, repeat, f=ext.pybridge_Version),
    }
    if engine:
        ucxx_go.init()
        try:
            rows["gopy ext.pybridge_ConsumeWake(), idle engine (eventfd read)"] = _time_ns(
                "f(q)", number, repeat, f=ext.pybridge_ConsumeWake, q=_context._context.completions.address)
        finally:
            ucxx_go.reset()
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--number", type=int, default=20_000,
                    help="calls per timed repeat (default: %(default)s)")
    ap.add_argument("--repeat", type=int, default=7,
                    help="timed repeats; the median is reported (default: %(default)s)")
    ap.add_argument("--no-engine", action="store_true",
                    help="skip the row that starts an engine")
    ap.add_argument("--json", help="write the results to this file")
    args = ap.parse_args(argv)
    if args.number < 1 or args.repeat < 1:
        ap.error("--number and --repeat must be positive")

    rows = measure(args.number, args.repeat, engine=not args.no_engine)
    width = max(map(len, rows))
    print(f"{'call':<{width}}  ns/call (median of {args.repeat} x {args.number})")
    for name, ns in rows.items():
        print(f"{name:<{width}}  {ns:8.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"python": platform.python_version(), "number": args.number,
                       "repeat": args.repeat, "ns_per_call": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
