#!/usr/bin/env python3
"""The DAG benchmark suite: GrCUDA's shapes on ucxx_go.ExecutionContext against
hand-written CuPy streams and CUDA graphs, the communication pipeline, and the
per-vertex costs. See README.md beside this file.

    python benchmarks/dag/run.py --quick                   # smoke test, < 60 s
    python benchmarks/dag/run.py --out r.json --md r.md    # full run, bounded by --budget-s
    python benchmarks/dag/run.py --dry                     # no CUDA: checks what it can
    python benchmarks/dag/run.py --multi-gpu               # the DAG on several GPUs (multigpu.py)

Exit status: 0 all ran and computed the right results (goals may still be missed:
see the table); 1 a benchmark failed (wrong result, error, timeout); 2 the
preflight failed (nothing measured); 3 the watchdog stopped a hung item.
"""

import argparse
import contextlib
import faulthandler
import json
import math
import os
import platform
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
os.environ.setdefault("UCX_NET_DEVICES", "lo")

import numpy as np  # noqa: E402


def _import_ucxx_go():
    try:
        import ucxx_go  # noqa: F401
    except ImportError:
        sys.path.insert(0, os.path.join(REPO, "python"))
        import ucxx_go  # noqa: F401
    return sys.modules["ucxx_go"]


GOALS = {"async_vs_sync_geomean": 1.44, "async_vs_streams_min": 0.97, "comm_pipeline": 1.5}


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# -- results -------------------------------------------------------------------------------------


class Results:
    """Everything measured, written (JSON + Markdown) after every item, so a run stopped
    at any point leaves what it had."""

    def __init__(self, json_path, md_path, meta):
        self.json_path, self.md_path = json_path, md_path
        self.data = {"meta": meta, "shapes": {}, "overhead": None, "memory": None, "comm": None,
                     "failures": [], "skipped": [], "summary": {}}
        self.lock = threading.RLock()

    def fail(self, what, err):
        with self.lock:
            self.data["failures"].append({"item": what, "error": err})

    def summarize(self):
        d = self.data
        s = {}
        ratios = {}
        worst = None
        for name, r in d["shapes"].items():
            b = r.get("backends", {})
            if not r.get("ok"):
                continue
            a = b.get("dag-async", {}).get("median_ms")
            if a and b.get("dag-sync", {}).get("median_ms"):
                r["async_vs_sync"] = b["dag-sync"]["median_ms"] / a
                ratios[name] = r["async_vs_sync"]
            if a and b.get("cupy-streams", {}).get("median_ms"):
                r["async_vs_streams"] = b["cupy-streams"]["median_ms"] / a
                worst = r["async_vs_streams"] if worst is None else min(worst, r["async_vs_streams"])
            if a and b.get("cuda-graph", {}).get("median_ms"):
                r["async_vs_graph"] = b["cuda-graph"]["median_ms"] / a
        if ratios:
            s["async_vs_sync_geomean"] = math.exp(sum(math.log(v) for v in ratios.values()) / len(ratios))
            s["async_vs_sync_shapes"] = sorted(ratios)
        s["async_vs_streams_min"] = worst
        comm = d.get("comm") or {}
        s["comm_pipeline_speedup"] = comm.get("speedup_vs_sequential")
        s["halo_speedup"] = (comm.get("halo") or {}).get("speedup_vs_sequential")
        ov = d.get("overhead") or {}
        s["overhead_us_per_vertex_chain"] = ((ov.get("chain") or {}).get("dag-async") or {}).get("overhead_us_per_vertex")
        s["overhead_us_per_vertex_independent"] = ((ov.get("independent") or {}).get("dag-async") or {}).get(
            "overhead_us_per_vertex")
        mem = d.get("memory") or {}
        s["bytes_per_active_vertex"] = mem.get("bytes_per_active_vertex") if mem.get("valid") else None
        all_shapes = set(d["meta"]["shapes_requested"])
        complete = all_shapes <= {n for n, r in d["shapes"].items() if r.get("ok")}

        def goal(value, want, full):
            if value is None:
                return "not measured"
            met = value >= want
            return ("met" if met else "NOT met") + ("" if full else " (partial suite)")

        s["goals"] = {
            "async >= 1.44x sync (geomean)": goal(s.get("async_vs_sync_geomean"), GOALS["async_vs_sync_geomean"], complete),
            "async >= 0.97x cupy-streams (every shape)": goal(worst, GOALS["async_vs_streams_min"], complete),
            "comm pipeline >= 1.5x sequential": goal(s["comm_pipeline_speedup"], GOALS["comm_pipeline"], True),
        }
        d["summary"] = s
        return s

    def write(self):
        with self.lock:
            self.summarize()
            for path, text in ((self.json_path, json.dumps(self.data, indent=1, default=_jsonable)),
                               (self.md_path, self.markdown())):
                if not path:
                    continue
                tmp = path + ".tmp"
                with open(tmp, "w") as f:
                    f.write(text)
                os.replace(tmp, path)

    def markdown(self):
        d, s = self.data, self.data["summary"]
        m = d["meta"]
        cols = m["backends"]
        lines = [f"# DAG benchmark suite ({m['mode']})", "",
                 f"{m.get('device', '?')}; {m.get('versions', '')}; grid {m['blocks']} x 256 threads per bulk kernel; "
                 f"medians of {m['reps']} repetitions after {m['warmup']} warm-up (wall clock, first launch to the final "
                 f"device synchronize). {m['started']}.", "",
                 "| shape | DAG shape | vertices | " + " | ".join(f"{c} ms" for c in cols)
                 + " | async/sync | vs streams | vs graph | spread |",
                 "|---|---|---:|" + "---:|" * len(cols) + "---:|---:|---:|---:|"]
        for name in m["shapes_requested"]:
            r = d["shapes"].get(name)
            if r is None:
                lines.append(f"| {name} | (not run) |" + " |" * (len(cols) + 5))
                continue
            b = r.get("backends", {})
            cells = []
            for c in cols:
                v = b.get(c, {})
                cells.append(f"{v['median_ms']:.3f}" if "median_ms" in v else ("FAIL" if v.get("error") else "-"))
            spread = max((v.get("spread", 0) for v in b.values() if "spread" in v), default=None)

            def f(k):
                return f"{r[k]:.2f}x" if r.get(k) is not None else "-"

            status = "" if r.get("ok") else " **FAILED**"
            shape_text = r.get("dag_shape", "").replace("|", "\\|")
            lines.append(f"| {name}{status} | {shape_text} | {r.get('vertices_per_rep', '-')} | "
                         + " | ".join(cells) + f" | {f('async_vs_sync')} | {f('async_vs_streams')} | {f('async_vs_graph')} | "
                         + (f"{spread * 100:.0f}%" if spread is not None else "-") + " |")
        lines += ["", "async/sync = t(dag-sync) / t(dag-async); vs streams = t(cupy-streams) / t(dag-async); vs graph = "
                  "t(cuda-graph) / t(dag-async) (above 1: the DAG is faster). spread = the largest (max - min) / median "
                  "of a backend's repetitions on that row: ratios closer to 1 than that are noise.", ""]
        g = s.get("async_vs_sync_geomean")
        lines.append(f"- geometric mean of async/sync over {len(s.get('async_vs_sync_shapes', []))} shapes: "
                     + (f"**{g:.2f}x**" if g else "-"))
        w = s.get("async_vs_streams_min")
        lines.append("- worst async vs cupy-streams: " + (f"**{w:.2f}x**" if w else "-"))
        comm = d.get("comm")
        if comm and "forms" in comm:
            fm = comm["forms"]
            lines.append(f"- comm pipeline ({comm['chunks']} x {comm['chunk_bytes'] >> 10} KiB, kernel "
                         f"{comm['kernel_us_per_chunk']:.0f} us/chunk on each side (work {comm['work']}), transfer "
                         f"{comm['transfer_us_per_chunk']:.0f} us/chunk, ideal overlap {comm['ideal_speedup']:.2f}x; "
                         f"transports {comm.get('transports')}): "
                         + ", ".join(f"{k} {v['per_chunk_us']:.1f} us/chunk" for k, v in fm.items())
                         + f"; **dag-async {comm['speedup_vs_sequential']:.2f}x sequential**")
            h = comm.get("halo")
            if h:
                lines.append(f"- halo exchange ({h['n_per_rank']} cells per rank, {h['steps']} steps): "
                             + ", ".join(f"{k} {v['per_step_us']:.1f} us/step" for k, v in h["forms"].items())
                             + f"; dag-async {h['speedup_vs_sequential']:.2f}x sequential")
        ov = d.get("overhead")
        if ov:
            for pat in ("chain", "independent"):
                if pat in ov:
                    lines.append(f"- per-vertex overhead, {ov['launches']} one-block launches, {pat}: " + ", ".join(
                        f"{k} {v['median_ms']:.2f} ms ({v['submit_us_per_launch']:.1f} us/launch submit"
                        + (f", **{v['overhead_us_per_vertex']:+.1f} us/vertex** vs cupy" if "overhead_us_per_vertex" in v
                           else "") + ")" for k, v in ov[pat].items()))
        mem = d.get("memory")
        if mem:
            lines.append("- memory per active vertex (process RSS): "
                         + (f"{mem['bytes_per_active_vertex']:.0f} B ({mem['method']})" if mem.get("valid")
                            else f"not valid: {mem.get('note')}")
                         + f"; ExecutionContext.resources() with {mem['vertices']} pending: {mem['resources_pending']}, "
                         f"after: {mem['resources_after']}")
        lines += ["", "Goals:", ""]
        for k, v in s.get("goals", {}).items():
            lines.append(f"- {k}: {v}")
        lines += failure_lines(d)
        return "\n".join(lines) + "\n"


def failure_lines(d):
    """The Markdown lines of a results dict's failures and skipped items."""
    lines = []
    if d["failures"]:
        lines += ["", "Failures:", ""]
        for fl in d["failures"]:
            lines.append(f"- {fl['item']}: {fl['error'].splitlines()[0] if fl['error'] else ''}")
    if d["skipped"]:
        lines += ["", "Skipped: " + ", ".join(f"{x['item']} ({x['why']})" for x in d["skipped"])]
    return lines


def _jsonable(o):
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


# -- watchdog ------------------------------------------------------------------------------------


class Watchdog:
    """Bounds each item: past its deadline it records a timeout, writes the results,
    dumps every thread's stack and exits 3. faulthandler backs it up (exit without
    results) should the interpreter itself be stuck."""

    def __init__(self, results):
        self.results = results
        self.what = None
        self.deadline = None
        threading.Thread(target=self._run, name="dag-bench-watchdog", daemon=True).start()

    @contextlib.contextmanager
    def guard(self, what, seconds):
        self.what, self.deadline = what, time.monotonic() + seconds
        faulthandler.dump_traceback_later(seconds + 30, exit=True)
        try:
            yield
        finally:
            self.deadline = None
            faulthandler.cancel_dump_traceback_later()

    def _run(self):
        while True:
            time.sleep(0.5)
            dl = self.deadline
            if dl is not None and time.monotonic() > dl:
                what = self.what
                log(f"WATCHDOG: {what} is past its time limit; writing the results and exiting (3)")
                try:
                    self.results.fail(what, "timeout: did not finish within its time limit (hung?)")
                    self.results.write()
                except Exception:  # noqa: BLE001
                    traceback.print_exc()
                faulthandler.dump_traceback(all_threads=True)
                try:  # the Go side of the hang: what the lanes and the poller wait on
                    import ucxx_go.debug

                    print(ucxx_go.debug.go_stacks(), file=sys.stderr)
                except Exception:  # noqa: BLE001
                    traceback.print_exc()
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(3)


# -- preflight -----------------------------------------------------------------------------------


def preflight(args, meta):
    """Fail early, with the reason, if CuPy, the GPU, ucxx_go or the ExecutionContext
    API are not what the suite needs."""
    import cupy as cp

    from kernels import KERNELS

    ucxx_go = _import_ucxx_go()
    dev = cp.cuda.Device(0)
    cc = dev.compute_capability
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    meta["device"] = f"{name} (cc {cc}, {props['multiProcessorCount']} SMs)"
    meta["versions"] = (f"cupy {cp.__version__}, CUDA runtime {cp.cuda.runtime.runtimeGetVersion()}, driver "
                        f"{cp.cuda.runtime.driverGetVersion()}, ucxx_go {getattr(ucxx_go, '__version__', '?')} "
                        f"{getattr(ucxx_go, '__git_commit__', '')[:12]}, python {platform.python_version()}, "
                        f"numpy {np.__version__}")
    args.arch_options = ("--std=c++17", f"--gpu-architecture=compute_{cc}")
    missing = [a for a in ("ExecutionContext", "DeviceArray", "Vertex", "VertexFailedError") if not hasattr(ucxx_go, a)]
    for m in ("wrap", "array", "build_kernel", "synchronize_sync", "synchronize", "send", "recv", "resources", "close", "host"):
        if not hasattr(getattr(ucxx_go, "ExecutionContext", object), m):
            missing.append(f"ExecutionContext.{m}")
    if missing:
        raise RuntimeError(f"ucxx_go ({ucxx_go.__file__}) lacks {missing}")
    spec = KERNELS["square"]
    n = 1000
    x = cp.arange(n, dtype=cp.float32)
    y = cp.full(n, cp.nan, dtype=cp.float32)
    cp.cuda.Device().synchronize()
    with ucxx_go.ExecutionContext(policy="async", transfers=False) as ctx:
        if not ctx.gpus:
            raise RuntimeError("ExecutionContext().gpus is empty: the CUDA driver is not visible to ucxx_go")
        k = ctx.build_kernel(spec.source, "square", spec.signature, options=args.arch_options)
        X, Y = ctx.wrap(x), ctx.wrap(y)
        v = k(4, 256)(Y[10:20], X[10:20], 10)  # a slice: only its range is written
        v.wait(timeout=30)
        ctx.synchronize_sync()
        got = cp.asnumpy(y)
        want = np.full(n, np.nan, np.float32)
        want[10:20] = np.arange(10, 20, dtype=np.float32) ** 2
        if not np.array_equal(got, want, equal_nan=True):
            raise RuntimeError(f"preflight: a DAG kernel on a slice computed {got[8:22]}, expected {want[8:22]}")
        k(4, 256)(Y, X, n)
        host = np.asarray(Y)  # the DAG's own host access (waits for the writer)
        if not np.array_equal(host, np.arange(n, dtype=np.float32) ** 2):
            raise RuntimeError("preflight: numpy.asarray(DeviceArray) after a kernel differs from x*x")
        ctx.synchronize_sync()
    left = ctx.resources()
    if any(left.values()):
        raise RuntimeError(f"preflight: a closed ExecutionContext still holds {left}")
    # CuPy: a RawKernel, two streams, a capture replayed.
    raw = cp.RawKernel(spec.source, "square")
    s0, s1 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    ev0, ev1 = cp.cuda.Event(disable_timing=True), cp.cuda.Event(disable_timing=True)
    z = cp.full(n, cp.nan, dtype=cp.float32)
    w = cp.full(n, cp.nan, dtype=cp.float32)
    cp.cuda.Device().synchronize()
    s0.begin_capture()
    ev0.record(s0)
    s1.wait_event(ev0)
    raw((4,), (256,), (z, x, np.int32(n)), stream=s0)
    raw((4,), (256,), (w, x, np.int32(n)), stream=s1)
    ev1.record(s1)
    s0.wait_event(ev1)
    g = s0.end_capture()
    g.launch(stream=s0)
    s0.synchronize()
    if not (np.array_equal(cp.asnumpy(z), np.arange(n, dtype=np.float32) ** 2) and np.array_equal(cp.asnumpy(w), cp.asnumpy(z))):
        raise RuntimeError("preflight: a captured two-stream CUDA graph computed the wrong squares")
    meta["preflight"] = "ok"


# -- one shape -------------------------------------------------------------------------------------


class _Recorder:
    """Collects the kernel names a program launches (to compile them before timing)."""

    def __init__(self):
        self.names = []

    def launch(self, name, grid, block, *args, lane=0):
        if name not in self.names:
            self.names.append(name)

    def mark(self, lane):
        return object()

    def wait(self, lane, token):
        pass


def timed_repetitions(be, build, warmup, reps):
    """Run build on backend be warmup + reps times, each repetition timed from its
    first launch to the devices synchronized (be.run), its state reset untimed before;
    a DAG backend's vertices are checked after each. Returns the timing fields of the
    backend's record: median_ms, min_ms, max_ms, spread, submit_median_ms, times_ms."""
    totals, submits = [], []
    for rep in range(warmup + reps):
        be.arrays.reset()
        t0 = time.perf_counter()
        ts = be.run(build)
        t1 = time.perf_counter()
        if hasattr(be, "check_vertices"):
            be.check_vertices()
        if rep >= warmup:
            totals.append(t1 - t0)
            submits.append(ts - t0)
    med = float(np.median(totals))
    return {"median_ms": med * 1e3, "min_ms": min(totals) * 1e3, "max_ms": max(totals) * 1e3,
            "spread": (max(totals) - min(totals)) / med if med > 0 else 0.0,
            "submit_median_ms": float(np.median(submits)) * 1e3, "times_ms": [x * 1e3 for x in totals]}


def run_shape(name, args, dag_ctxs, modules):
    import cupy as cp

    from backends import BenchError, CudaGraph, CupyStreams, Dag
    from shapes import SHAPES, config

    cfg = config(args.mode, blocks=args.blocks)
    rng = np.random.default_rng(args.seed + sorted(SHAPES).index(name))
    t = time.perf_counter()
    inst = SHAPES[name](cfg, rng)
    make_s = time.perf_counter() - t
    t = time.perf_counter()
    inst.reference()
    ref_s = time.perf_counter() - t
    rec = _Recorder()
    import types as _t

    inst.build(rec, _t.SimpleNamespace(**{k: None for k in inst.arrays}))
    r = {"shape": name, "dag_shape": inst.dag_shape, "sizes": inst.sizes, "lanes": inst.lanes,
         "kernels": rec.names, "bytes": inst.nbytes(), "setup_s": {"inputs": make_s, "reference": ref_s},
         "backends": {}, "ok": False}
    log(f"{name}: {inst.dag_shape}; {inst.nbytes() / 2**20:.0f} MiB of arrays; inputs {make_s:.1f} s, reference {ref_s:.1f} s")
    first = {}  # family -> (backend, outputs): exact agreement within a family
    ok = True
    for bname in args.backends:
        b = {}
        r["backends"][bname] = b
        be = None
        try:
            t = time.perf_counter()
            if bname in ("dag-async", "dag-sync"):
                dagctx = dag_ctxs[bname[4:]]
                for kname in rec.names:
                    dagctx.kernel(kname)
                be = Dag(dagctx)
                family = "dag"
            else:
                for kname in rec.names:
                    modules.get(kname)
                be = {"cupy-streams": lambda: CupyStreams(modules, inst.lanes),
                      "cupy-serial": lambda: CupyStreams(modules, inst.lanes, serial=True),
                      "cuda-graph": lambda: CudaGraph(modules, inst.lanes)}[bname]()
                family = "cupy"
            be.alloc(inst.arrays, inst.state)
            be.checking = True  # the first repetition checks every launch's arguments
            if isinstance(be, CudaGraph):
                be.capture(inst.build)
                b["capture_ms"] = be.capture_s * 1e3
            b["setup_s"] = time.perf_counter() - t
            # Validation repetition: outputs poisoned (NaN) until written, then compared.
            be.arrays.reset()
            be.run(inst.build)
            if isinstance(be, Dag):
                b["vertices"] = be.check_vertices()
                r["vertices_per_rep"] = b["vertices"]
            be.checking = False
            outs = {k: be.arrays.read(k) for k in inst.outputs}
            b["errors"] = inst.check(outs, bname)
            if family in first:
                other, ref_outs = first[family]
                for k in inst.outputs:
                    if not np.array_equal(outs[k], ref_outs[k], equal_nan=True):
                        diff = int(np.count_nonzero(outs[k] != ref_outs[k]))
                        raise BenchError(f"{name}/{bname}: output {k} differs from {other}'s in {diff} elements: the same "
                                         "kernels in the same dependency order must agree bit for bit (a race?)")
            else:
                first[family] = (bname, outs)
            b.update(timed_repetitions(be, inst.build, args.warmup, args.reps))
            last = {k: be.arrays.read(k) for k in inst.outputs}
            for k in inst.outputs:
                if not np.array_equal(last[k], outs[k], equal_nan=True):
                    raise BenchError(f"{name}/{bname}: output {k} of the last repetition differs from the first's (a race?)")
            if isinstance(be, Dag):
                b["resources"] = be.dagctx.ctx.resources()
            log(f"  {bname:13s} {b['median_ms']:9.3f} ms (min {b['min_ms']:.3f}, max {b['max_ms']:.3f}; submit "
                f"{b['submit_median_ms']:.3f} ms)" + (f" {b.get('resources')}" if "resources" in b else ""))
        except Exception as e:  # noqa: BLE001 (recorded; the other backends still run)
            ok = False
            b["error"] = f"{type(e).__name__}: {e}"
            log(f"  {bname}: FAILED: {b['error']}")
            traceback.print_exc()
            if bname in ("dag-async", "dag-sync"):  # the context may be broken: a fresh one next time
                try:
                    dag_ctxs[bname[4:]].close()
                except Exception:  # noqa: BLE001
                    dag_ctxs[bname[4:]].ctx = None
                    traceback.print_exc()
        finally:
            if be is not None:
                try:
                    be.close()
                except Exception:  # noqa: BLE001
                    traceback.print_exc()
            be = None
            cp.get_default_memory_pool().free_all_blocks()
    r["ok"] = ok
    return r


# -- main ----------------------------------------------------------------------------------------------


def parse_args(argv=None):
    from backends import BACKENDS
    from shapes import SHAPES

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes, 1 warm-up + 2 repetitions: a smoke test (< 60 s)")
    p.add_argument("--dry", action="store_true", help="no CUDA: check signatures, programs, references, lane structures")
    p.add_argument("--multi-gpu", action="store_true", help="the DAG on several GPUs instead (multigpu.py; its options: "
                                                            "run.py --multi-gpu --help)")
    p.add_argument("--nvrtc", help="--dry: path of libnvrtc.so to compile every kernel with (as build_kernel does)")
    p.add_argument("--out", help="results JSON (default: $OUT/dag_<mode>.json if $OUT is set, else benchmarks/dag/results/)")
    p.add_argument("--md", help="Markdown table (default: beside --out, .md)")
    p.add_argument("--budget-s", type=float, help="start no new item after this many seconds (default 420; --quick 55)")
    p.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated subset of {','.join(SHAPES)}")
    p.add_argument("--backends", default=",".join(BACKENDS), help=f"comma-separated subset of {','.join(BACKENDS)}")
    p.add_argument("--reps", type=int, help="timed repetitions (default 10; --quick 2)")
    p.add_argument("--warmup", type=int, help="untimed repetitions first (default 2; --quick 1)")
    p.add_argument("--blocks", type=int, default=64, help="grid of every bulk kernel (x 256 threads); default 64")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--item-timeout", type=float, help="watchdog per item, seconds (default 180; --quick 60)")
    p.add_argument("--no-comm", action="store_true", help="skip the two-process pipeline and halo exchange")
    p.add_argument("--no-micro", action="store_true", help="skip the per-vertex overhead and memory measurements")
    p.add_argument("--go-trace", metavar="PREFIX", help="record the Go runtime's execution trace of each shape into "
                   "PREFIX.<shape> (ucxx_go.debug.go_trace; read with go tool trace)")
    p.add_argument("--chunk-bytes", type=int, default=1 << 20, help="comm pipeline chunk (default 1 MiB)")
    p.add_argument("--chunks", type=int, help="comm pipeline chunks (default 64; --quick 8)")
    p.add_argument("--comm-work", type=int, help="FMA iterations per element of the comm kernels (default: calibrated so "
                                                  "that a chunk's kernel takes about a chunk's transfer time)")
    a = p.parse_args(argv)
    a.mode = "dry" if a.dry else ("quick" if a.quick else "full")
    quick = a.mode != "full"
    a.shapes = [s for s in a.shapes.split(",") if s]
    a.backends = [s for s in a.backends.split(",") if s]
    bad = [s for s in a.shapes if s not in SHAPES] + [b for b in a.backends if b not in BACKENDS]
    if bad:
        p.error(f"unknown shapes/backends {bad}")
    if "dag-async" not in a.backends:
        p.error("--backends must include dag-async (every ratio is against it)")
    a.budget_s = a.budget_s if a.budget_s is not None else (55.0 if quick else 420.0)
    a.reps = a.reps if a.reps is not None else (2 if quick else 10)
    a.warmup = a.warmup if a.warmup is not None else (1 if quick else 2)
    a.item_timeout = a.item_timeout if a.item_timeout is not None else (60.0 if quick else 180.0)
    a.chunks = a.chunks if a.chunks is not None else (8 if quick else 64)
    if a.reps < 1 or a.warmup < 0 or a.blocks < 1 or a.blocks > 4096 or a.chunk_bytes % 4 or a.chunk_bytes < 1024:
        p.error("--reps >= 1, --warmup >= 0, 1 <= --blocks <= 4096, --chunk-bytes a multiple of 4, >= 1024")
    if a.mode == "full" and a.reps < 5:
        log(f"note: --reps {a.reps} < 5: medians of fewer than 5 repetitions")
    if a.mode == "dry":
        return a
    if a.out is None:
        base = os.environ.get("OUT") or os.path.join(HERE, "results")
        os.makedirs(base, exist_ok=True)
        a.out = os.path.join(base, f"dag_{a.mode}.json")
    if a.md is None:
        a.md = os.path.splitext(a.out)[0] + ".md"
    for path in (a.out, a.md):
        d = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(d):
            p.error(f"no directory for {path}")
    return a


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--multi-gpu" in argv:  # the DAG on several GPUs: its own options (multigpu.py --help)
        import multigpu

        return multigpu.main(argv)
    args = parse_args(argv)
    if args.mode == "dry":
        import dry

        return dry.main(args)
    t_start = time.monotonic()
    meta = {"mode": args.mode, "started": time.strftime("%Y-%m-%d %H:%M:%S"), "host": platform.node(),
            "argv": sys.argv[1:], "shapes_requested": args.shapes, "backends": args.backends, "reps": args.reps,
            "warmup": args.warmup, "blocks": args.blocks, "budget_s": args.budget_s, "seed": args.seed,
            "env": {k: v for k, v in os.environ.items() if k.startswith(("UCX_", "CUDA_", "CUPY_"))}}
    results = Results(args.out, args.md, meta)
    wd = Watchdog(results)
    log(f"DAG suite, {args.mode}: shapes {args.shapes}, backends {args.backends}; results -> {args.out}, {args.md}")
    try:
        with wd.guard("preflight", 120):
            preflight(args, meta)
        log(f"preflight ok: {meta['device']}; {meta['versions']}")
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        results.fail("preflight", f"{type(e).__name__}: {e}")
        results.write()
        log(f"PREFLIGHT FAILED: {type(e).__name__}: {e}")
        return 2
    results.write()

    from backends import CupyModules, DagContext

    modules = CupyModules()
    dag_ctxs = {p: DagContext(p, args.arch_options) for p in ("async", "sync")
                if f"dag-{p}" in args.backends or p == "async"}
    items = [("shape", s) for s in args.shapes]
    if not args.no_micro:
        items.append(("overhead", None))
    if not args.no_comm:
        items.append(("comm", None))
    if not args.no_micro:
        items.append(("memory", None))  # last: report-only, and it holds many vertices pending
    failed = False
    for kind, what in items:
        label = f"{kind} {what}" if what else kind
        elapsed = time.monotonic() - t_start
        if elapsed > args.budget_s:
            results.data["skipped"].append({"item": label, "why": f"budget: {elapsed:.0f} s > {args.budget_s:.0f} s"})
            log(f"skipping {label}: the budget ({args.budget_s:.0f} s) is spent")
            results.write()
            continue
        try:
            with wd.guard(label, args.item_timeout):
                if kind == "shape":
                    if args.go_trace:
                        import ucxx_go

                        with ucxx_go.debug.go_trace(f"{args.go_trace}.{what}"):
                            r = run_shape(what, args, dag_ctxs, modules)
                    else:
                        r = run_shape(what, args, dag_ctxs, modules)
                    results.data["shapes"][what] = r
                    if not r["ok"]:
                        failed = True
                        errs = {b: v["error"] for b, v in r["backends"].items() if "error" in v}
                        results.fail(label, "; ".join(f"{b}: {e}" for b, e in errs.items()))
                elif kind == "overhead":
                    import micro

                    n = 200 if args.mode == "quick" else 2000
                    results.data["overhead"] = micro.overhead(
                        {p: c for p, c in dag_ctxs.items()}, modules, n, reps=max(3, min(args.reps, 5)) if args.mode == "full" else 1,
                        warmup=1, log=log)
                elif kind == "memory":
                    import micro

                    sizes = (250, 1000) if args.mode == "quick" else (1000, 4000, 16000)
                    results.data["memory"] = micro.memory(dag_ctxs["async"], sizes, hold_s=5.0 if args.mode == "quick" else 10.0,
                                                          log=log)
                elif kind == "comm":
                    import comm

                    quick = args.mode == "quick"
                    cfg = {"blocks": args.blocks, "arch_options": list(args.arch_options), "chunk_bytes": args.chunk_bytes,
                           "chunks": args.chunks, "work": args.comm_work, "reps": args.reps if quick else max(5, min(args.reps, 7)),
                           "warmup": 1, "halo_n": 1 << 12 if quick else 1 << 22, "halo_steps": 4 if quick else 50,
                           "seed": args.seed, "deadline_s": args.item_timeout + 30}
                    results.data["comm"] = comm.run(cfg, log=log)
        except Exception as e:  # noqa: BLE001
            failed = True
            traceback.print_exc()
            results.fail(label, f"{type(e).__name__}: {e}")
            log(f"{label}: FAILED: {type(e).__name__}: {e}")
        results.write()
    with wd.guard("closing the contexts", 60):
        for p, c in dag_ctxs.items():
            try:
                c.close()
            except Exception as e:  # noqa: BLE001
                failed = True
                results.fail(f"close dag-{p}", f"{type(e).__name__}: {e}")
    meta["elapsed_s"] = time.monotonic() - t_start
    results.write()
    print()
    print(results.markdown())
    log(f"done in {meta['elapsed_s']:.0f} s; wrote {args.out} and {args.md}")
    return 1 if (failed or results.data["failures"]) else 0


if __name__ == "__main__":
    sys.exit(main())
