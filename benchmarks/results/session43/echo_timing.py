# Session 43: session 42's echo_timing.py (the time of each call of ucxx_go's SendMulti, RecvMulti and
# Progress entry points, p50/p90 printed to stderr at exit) plus the process's CPU time (all threads,
# the progress thread's spin included) between its first and its last SendMulti/RecvMulti call:
#   python echo_timing.py ../session24/scripts/comm_echo.py client ucxgo 127.0.0.1 PORT 65536 500
import atexit, resource, runpy, sys, time

from ucxx_go import _bridge

_bridge._load()
times = {}
span = {}


def _cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _timed(name):
    call = getattr(_bridge.ext, name)

    def timed(*args):
        t0 = time.perf_counter()
        try:
            return call(*args)
        finally:
            t1 = time.perf_counter()
            times.setdefault(name, []).append(t1 - t0)
            if name != "pybridge_Progress":
                span.setdefault("first", (t0, _cpu()))
                span["last"] = (t1, _cpu())

    setattr(_bridge.ext, name, timed)


for _name in ("pybridge_SendMulti", "pybridge_RecvMulti", "pybridge_Progress"):
    _timed(_name)


@atexit.register
def _report():
    for name, ts in times.items():
        ts = sorted(ts)
        print(f"{name}: n={len(ts)} p50={ts[len(ts) // 2] * 1e6:.1f}us p90={ts[int(len(ts) * .9)] * 1e6:.1f}us", file=sys.stderr)
    if "last" in span:
        wall = span["last"][0] - span["first"][0]
        cpu = span["last"][1] - span["first"][1]
        n = len(times.get("pybridge_SendMulti", ())) or 1
        print(f"cpu: {cpu * 1e3:.0f}ms over {wall * 1e3:.0f}ms = {cpu / wall if wall else 0:.2f} cores, "
              f"{cpu / n * 1e6:.0f}us/send", file=sys.stderr)


sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
