"""Where the host time of one DAG kernel launch goes, split, beside CuPy's launch.

    python benchmarks/dag/launch_cost.py [--launches 4000] [--repeat 7] [--json FILE]
                                         [--go-cpu-profile FILE --hz 5000]

One GPU. Each row times `launches` calls of the one-block ``touch`` kernel (32
floats) on one array, host time of the calls alone (the device is synchronized
after, untimed), and gives the median over `repeat` rounds in µs a call:

- cupy: ``RawKernel`` on one stream, the hand-written baseline;
- dag: ``kernel(1, 32)(a, 32)`` through the ExecutionContext, everything a user pays;
- dag-python: the same call with ``pybridge_DagLaunch`` replaced by a stub that
  returns a vertex id: Python's own work (the checks, packing, bookkeeping, Vertex);
- bridge+go: ``pybridge_DagLaunch`` alone with the arguments built once: the hop into
  Go, the graph, the lane's queueing, ``cuLaunchKernel`` and the stop event;
- bridge: a Go call that does nothing (``pybridge_ConsumeWake`` of no queue).

bridge+go minus the Go benchmark's ``BenchmarkLaunchChain`` is the hop from Python;
dag minus bridge+go is Python's own share. With --go-cpu-profile the bridge+go rows
run again under ``ucxx_go.debug.go_cpu_profile(FILE, hz)``.
"""

import argparse
import array
import json
import os
import statistics
import sys
import time

os.environ.setdefault("UCX_NET_DEVICES", "lo")

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

import ucxx_go  # noqa: E402
from ucxx_go import _execution  # noqa: E402
from ucxx_go._bridge import ext  # noqa: E402

N = 32
SOURCE = r"""
extern "C" __global__ void touch(float* a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] += 1.0f;
}
"""


def timed(run, launches, repeat, sync):
    """Median µs a call of run(launches) over repeat rounds (one warm-up round)."""
    per_call = []
    for r in range(repeat + 1):
        t0 = time.perf_counter()
        run(launches)
        t1 = time.perf_counter()
        sync()
        if r:
            per_call.append((t1 - t0) / launches * 1e6)
    return statistics.median(per_call), min(per_call)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--launches", type=int, default=4000)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--json")
    p.add_argument("--go-cpu-profile", metavar="FILE")
    p.add_argument("--hz", type=int, default=5000)
    args = p.parse_args()

    data = cp.zeros(N, np.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    raw = cp.RawKernel(SOURCE, "touch")
    i32 = np.int32

    def cupy_run(n):
        for _ in range(n):
            raw((1,), (N,), (data, i32(N)), stream=stream)

    ctx = ucxx_go.ExecutionContext()
    kernel = ctx.build_kernel(SOURCE, "touch", "a: inout pointer float, n: sint32")
    a = ctx.wrap(data)
    launch = kernel(1, N)

    def dag_run(n):
        for _ in range(n):
            launch(a, N)

    def dag_sync():
        ctx.synchronize_sync()
        cp.cuda.Device().synchronize()

    class StubBridge:  # ext with DagLaunch answering at once
        def __getattr__(self, name):
            return (lambda *args: 1) if name == "pybridge_DagLaunch" else getattr(ext, name)

    def python_run(n):
        _execution.ext = StubBridge()
        try:
            dag_run(n)
        finally:
            _execution.ext = ext

    slots, words, _ = _execution.pack_arguments(ctx, kernel.params, (a, N), kernel.name)
    s_arr, d_arr = array.array("Q", slots), array.array("Q", words)
    s_ptr, d_ptr = s_arr.buffer_info()[0], d_arr.buffer_info()[0]
    h, kh = ctx._h, kernel._handle
    go_launch = ext.pybridge_DagLaunch

    def bridge_go_run(n):
        for _ in range(n):
            go_launch(h, kh, 1, 1, 1, N, 1, 1, 0, s_ptr, len(slots), d_ptr, 1)

    consume = ext.pybridge_ConsumeWake

    def bridge_run(n):
        for _ in range(n):
            consume(0)

    def device_sync():
        cp.cuda.Device().synchronize()

    rows = {}
    for name, run, sync in (("cupy", cupy_run, device_sync), ("dag", dag_run, dag_sync),
                            ("dag-python", python_run, lambda: None), ("bridge+go", bridge_go_run, dag_sync),
                            ("bridge", bridge_run, lambda: None)):
        med, low = timed(run, args.launches, args.repeat, sync)
        rows[name] = {"median_us": med, "min_us": low}
        print(f"{name:12s} {med:7.2f} µs a call (min {low:.2f})", flush=True)
    dag_sync()
    # cupy, dag and bridge+go each touched it; float32 counts exactly to 2**24, then stays
    want = float(min((args.repeat + 1) * args.launches * 3, 1 << 24))
    got = cp.asnumpy(data)
    if not np.all(got == want):
        sys.exit(f"touch: a = {got[:4]}..., expected {want} everywhere")
    if args.go_cpu_profile:
        with ucxx_go.debug.go_cpu_profile(args.go_cpu_profile, args.hz):
            med, low = timed(bridge_go_run, args.launches, args.repeat, dag_sync)
        rows["bridge+go profiled"] = {"median_us": med, "min_us": low}
        print(f"bridge+go profiled at {args.hz} Hz: {med:.2f} µs a call", flush=True)
    ctx.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"launches": args.launches, "repeat": args.repeat, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
