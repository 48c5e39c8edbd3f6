# Session 42: runs a script (argv[1:]) with the time of each call of ucxx_go's SendMulti, RecvMulti and
# Progress entry points recorded, and prints their p50/p90 to stderr at exit:
#   python echo_timing.py ../session24/scripts/comm_echo.py client ucxgo 127.0.0.1 PORT 65536 500
import atexit, runpy, sys, time

from ucxx_go import _bridge

_bridge._load()
times = {}


def _timed(name):
    call = getattr(_bridge.ext, name)

    def timed(*args):
        t0 = time.perf_counter()
        try:
            return call(*args)
        finally:
            times.setdefault(name, []).append(time.perf_counter() - t0)

    setattr(_bridge.ext, name, timed)


for _name in ("pybridge_SendMulti", "pybridge_RecvMulti", "pybridge_Progress"):
    _timed(_name)


@atexit.register
def _report():
    for name, ts in times.items():
        ts = sorted(ts)
        print(f"{name}: n={len(ts)} p50={ts[len(ts) // 2] * 1e6:.1f}us p90={ts[int(len(ts) * .9)] * 1e6:.1f}us", file=sys.stderr)


sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
