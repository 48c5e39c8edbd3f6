"""ucxx_go beside RAPIDS UCXX, asyncio TCP and the raw UCX floor, in one run, on the same
transports and CPUs; writes a Markdown report (benchmarks/results/send_recv.md unless --out) with
tables, ratios and plots, and the raw JSON.

    python benchmarks/compare.py --python-ucxx /tmp/venv_ucxx/bin/python --rounds 3
    python benchmarks/compare.py --quick --out /tmp/bench/RESULTS.md

Every configuration (size, buffers) runs benchmarks/send_recv.py once per backend, the
backends back to back and their order reversed every round, so that a noisy neighbour
or a CPU frequency change hits all of them alike; the report gives medians over rounds.
Each backend may run under its own interpreter, since RAPIDS ucxx usually lives in a
venv of its own. A run that fails or hangs is killed and recorded, and the rest goes on.
"""

import argparse
import datetime
import json
import math
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile

from _bench_common import format_bytes, parse_bytes, size_label

HERE = os.path.dirname(os.path.abspath(__file__))
SEND_RECV = os.path.join(HERE, "send_recv.py")
BACKENDS = ("ucxx-go", "ucxx-async", "asyncio")
MODULES = {"ucxx-go": "ucxx_go", "ucxx-async": "ucxx", "asyncio": "numpy"}
# sm alone cannot connect: UCX's sockaddr connection manager (how create_endpoint
# connects) needs tcp. Data still goes over shared memory only with
# UCX_MM_ERROR_HANDLING=y: both libraries ask for peer error handling, which UCX's
# shared-memory transports refuse by default, leaving TCP on lo.
DEFAULT_TLS = "sm,self,tcp"
DEFAULT_SIZES = [8, 1 << 10, 64 << 10, 1 << 20, 8 << 20, 64 << 20]
PROBE_TIMEOUT = 60  # importing ucxx (and CUDA's Python bindings) can take a while
RUN_SLACK = 120  # process start and teardown beyond send_recv's own --timeout
FLOOR_TIMEOUT = 900


def _csv(parse):
    return lambda text: [parse(v) for v in text.split(",") if v.strip()]


def _probe(python, module):
    """None if ``python`` can import ``module``, else why not (one line).

    The working directory is left off sys.path: in this repository's root, the Go
    package's folder ``ucxx/`` would import as an empty namespace package and pass for
    RAPIDS ucxx.
    """
    code = f"import sys; sys.path = [p for p in sys.path if p not in ('', '.')]; import {module}"
    try:
        res = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=PROBE_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{python}: {exc}"
    if res.returncode == 0:
        return None
    last = (res.stderr.strip().splitlines() or ["no output"])[-1]
    return f"{python} cannot import {module}: {last}"


def choose_interpreters(args):
    """{backend: python} for the backends that can run, and {backend: reason} for the rest."""
    wanted = {"ucxx-go": args.python_ucxx_go, "ucxx-async": args.python_ucxx, "asyncio": sys.executable}
    chosen, skipped = {}, {}
    for backend in args.backends:
        reason = _probe(wanted[backend], MODULES[backend])
        if reason is None:
            chosen[backend] = wanted[backend]
        else:
            skipped[backend] = reason + ("; pass --python-ucxx" if backend == "ucxx-async" else "")
    return chosen, skipped


def plan(args):
    """The (size, buffers, iterations, warm-up) of every configuration: about
    --iter-bytes of payload one way per run, within --min-iter and --max-iter."""
    configs = [(size, 1) for size in args.sizes]
    configs += [(args.multi_size, k) for k in args.multi_buffers if (args.multi_size, k) not in configs]
    out = []
    for size, k in configs:
        n_iter = max(args.min_iter, min(args.max_iter, args.iter_bytes // (size * k)))
        out.append({"n_bytes": size, "n_buffers": k, "n_iter": n_iter,
                    "n_warmup_iter": max(2, n_iter // 10)})
    return out


def run_env(args):
    """The environment of every UCX process: the same transports for everyone, or with
    --defaults no UCX setting at all, so each library runs as installed."""
    env = dict(os.environ)
    env.setdefault("UCX_NET_DEVICES", "lo")
    if args.defaults:
        env.pop("UCX_TLS", None)
        env.pop("UCX_MM_ERROR_HANDLING", None)
        return env
    if args.tls:
        env["UCX_TLS"] = args.tls
    else:
        env.pop("UCX_TLS", None)
    env["UCX_MM_ERROR_HANDLING"] = "n" if args.no_mm_error_handling else "y"
    return env


def command_line(python, backend, cfg, args):
    cmd = [python, SEND_RECV, "-l", backend, "-s", "127.0.0.1",
           "-n", str(cfg["n_bytes"]), "-x", str(cfg["n_buffers"]),
           "--n-iter", str(cfg["n_iter"]), "--n-warmup-iter", str(cfg["n_warmup_iter"]),
           "--progress-mode", args.progress_mode, "--no-detailed-report", "--timeout", str(args.timeout)]
    if not args.no_affinity:
        cmd += ["-b", str(args.server_cpu), "-c", str(args.client_cpu)]
    if not args.fresh_alloc:
        cmd.append("--reuse-alloc")
    return cmd


def run_one(cmd, env, json_path, timeout):
    """Run send_recv.py in a session of its own, so that on a timeout its spawned server
    and client die with it; return its JSON record, or {"error": why}."""
    proc = subprocess.Popen(cmd + ["--json", json_path], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"error": f"killed after {timeout} s"}
    if proc.returncode != 0:
        tail = " | ".join(err.strip().splitlines()[-3:])
        return {"error": f"exit code {proc.returncode}: {tail}"}
    with open(json_path) as f:
        return json.load(f)


def run_floor(args, sizes, env):
    """ucx_floor.measure (benchmarks/ucx_floor.py) in a child process, bounded by a
    timeout; {"error": why} when it is missing or fails."""
    iters = args.min_iter if args.quick else None
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        code = ("import json, sys; sys.path.insert(0, sys.argv[1]); from ucx_floor import measure; "
                "json.dump(measure(json.loads(sys.argv[2]), sys.argv[3] or None, iters=json.loads(sys.argv[4])), "
                "open(sys.argv[5], 'w'))")
        argv = [sys.executable, "-c", code, HERE, json.dumps(sizes), args.tls, json.dumps(iters), out.name]
        try:
            res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=FLOOR_TIMEOUT)
        except subprocess.TimeoutExpired:
            return {"error": f"floor not available: ucx_floor.measure took over {FLOOR_TIMEOUT} s"}
        if res.returncode != 0:
            last = (res.stderr.strip().splitlines() or ["no output"])[-1]
            return {"error": f"floor not available: {last}"}
        with open(out.name) as f:
            return json.load(f)


def medians(runs):
    """{(backend, n_bytes, n_buffers): {metric: median over the rounds that succeeded}}."""
    grouped = {}
    for run in runs:
        if "results" in run:
            grouped.setdefault((run["backend"], run["n_bytes"], run["n_buffers"]), []).append(run["results"])
    return {key: {m: statistics.median(r[m] for r in rs) for m in rs[0]} for key, rs in grouped.items()}


def machine_info():
    def first(path, prefix):
        try:
            with open(path) as f:
                return next((line.split(":", 1)[1].strip() for line in f if line.startswith(prefix)), "unknown")
        except OSError:
            return "unknown"
    return {"cpu": first("/proc/cpuinfo", "model name"), "cores": os.cpu_count(),
            "memory": first("/proc/meminfo", "MemTotal"), "kernel": platform.release(),
            "python": sys.version.split()[0]}


def _fmt(value):
    """Three significant digits at least, thousands separated: 0.412, 30.4, 1,091."""
    if value is None:
        return "–"
    digits = 0 if value >= 100 or value == 0 else 2 - math.floor(math.log10(abs(value)))
    return f"{value:,.{digits}f}"


def _ratio(a, b):
    return "–" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def metric_table(title, keys, key_label, metric, scale, backends, med, floor=None):
    """A Markdown table of one metric: a column per backend, then ucxx-go's ratios."""
    others = [b for b in backends if b != "ucxx-go"]
    head = [key_label, *backends] + (["ucx_perftest"] if floor else [])
    head += [f"ucxx-go / {b}" for b in others] + (["ucxx-go / floor"] if floor else [])
    lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + " ---: |" * len(head)]
    for label, size, k in keys:
        vals = {b: med.get((b, size, k), {}).get(metric) for b in backends}
        vals = {b: None if v is None else v * scale for b, v in vals.items()}
        row = [label] + [_fmt(vals[b]) for b in backends]
        if floor:
            row.append(_fmt(floor.get(size)))
        row += [_ratio(vals.get("ucxx-go"), vals[b]) for b in others]
        if floor:
            row.append(_ratio(vals.get("ucxx-go"), floor.get(size)))
        lines.append("| " + " | ".join(row) + " |")
    return lines + [""]


def write_plots(plot_dir, sizes, backends, med, floor_lat, floor_bw):
    """bandwidth.png and latency.png (log-log), or the reason there are none."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None, "matplotlib is not installed (pip install 'ucxx-go[bench]'): no plots"
    os.makedirs(plot_dir, exist_ok=True)
    names = {}
    for name, metric, scale, ylabel, floor in (
            ("bandwidth", "bandwidth_median_Bps", 1e-6, "bandwidth, median (MB/s)", floor_bw),
            ("latency", "rtt_p50_us", 1.0, "round trip, p50 (us)", floor_lat)):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for b in backends:
            pts = [(s, med[(b, s, 1)][metric] * scale) for s in sizes if (b, s, 1) in med]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=b)
        if floor:
            pts = [(s, floor[s]) for s in sizes if s in floor]
            ax.plot(*zip(*pts), linestyle="--", color="gray", label="ucx_perftest floor")
        ax.set(xscale="log", yscale="log", xlabel="message size (bytes)", ylabel=ylabel)
        ax.set_xticks(sizes, [size_label(s) for s in sizes])
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        names[name] = os.path.join(plot_dir, f"{name}.png")
        fig.savefig(names[name], dpi=120)
        plt.close(fig)
    return names, None


def write_markdown(path, report, plots, plot_note):
    args, med, floor = report["settings"], report["medians"], report["floor"]
    backends = [b for b in BACKENDS if b in report["interpreters"]]
    libs = {}  # what each backend ran on, from its first successful run
    for run in report["runs"]:
        if "library" in run:
            libs.setdefault(run["backend"], run["library"] | {"python": run["python"]})
    floor_lat, floor_bw = report["floor_latency_rtt_us"], report["floor_bandwidth_MBps"]
    out = ["# send_recv: ucxx_go beside RAPIDS UCXX, asyncio and the UCX floor", "",
           f"Written by `{report['command']}` on {report['date']}. Medians over {args['rounds']} round(s); "
           "each round runs every backend back to back, in alternating order.", "", "## Machine", ""]
    m = report["machine"]
    out += [f"- CPU: {m['cpu']}, {m['cores']} cores; memory {m['memory']}; kernel {m['kernel']}",
            f"- Driver Python {m['python']}"]
    for b in backends:
        lib = libs.get(b, {})
        ucx = f", UCX {lib['ucx_version']}" if lib.get("ucx_version") else ""
        out.append(f"- {b}: {lib.get('name', '?')} {lib.get('version', '?')}{ucx}, Python {lib.get('python', '?')} "
                   f"(`{report['interpreters'][b]}`)")
    out += ["", "## Settings", "",
            ("- Each library in its default configuration: UCX_TLS and UCX_MM_ERROR_HANDLING unset, "
             if args.get("defaults") else
             f"- UCX_TLS={args['tls'] or '(UCX default)'}, UCX_MM_ERROR_HANDLING={report['env']['UCX_MM_ERROR_HANDLING']}, ")
            + f"UCX_NET_DEVICES={report['env']['UCX_NET_DEVICES']} for both UCX backends and the floor",
            "- CPU affinity: " + ("none" if args["no_affinity"] else
                                  f"server CPU {args['server_cpu']}, client CPU {args['client_cpu']}"),
            f"- Progress mode {args['progress_mode']}; buffers "
            + ("allocated in every iteration (UCXX's default)" if args["fresh_alloc"] else "reused (--reuse-alloc)"),
            "- Latency is the round trip (send, then receive the echo); bandwidth counts both "
            "directions (2 x bytes per round trip), as UCXX's benchmark does. MB = 1e6 bytes.",
            "- Ratios divide ucxx-go's number by the other's: below 1 is faster for latency, "
            "above 1 is faster for bandwidth and message rate."]
    for name, why in report["skipped"].items():
        out.append(f"- {name} skipped: {why}")
    if "error" in floor:
        out.append(f"- UCX floor: {floor['error']}")
    else:
        out.append("- UCX floor: ucx_perftest tag_lat (round trip = 2 x its one-way p50) and tag_bw "
                   "(one-way streaming, so not the same measure as the ping-pong bandwidth)"
                   + (", with peer error handling" if floor.get("error_handling") else ", without peer error handling"))
    out += ["", "## Results", ""]
    singles = [(size_label(s), s, 1) for s in args["sizes"]]
    multis = [(f"{k} x {size_label(args['multi_size'])}", args["multi_size"], k) for k in args["multi_buffers"]]
    out += metric_table("Round-trip latency, p50 (us)", singles, "size", "rtt_p50_us", 1, backends, med, floor_lat)
    out += metric_table("Round-trip latency, p99 (us)", singles, "size", "rtt_p99_us", 1, backends, med)
    out += metric_table("Bandwidth, median (MB/s)", singles, "size", "bandwidth_median_Bps", 1e-6,
                        backends, med, floor_bw)
    out += metric_table("send_multi / recv_multi: messages per second (median)", multis, "buffers",
                        "msgs_per_s_median", 1, backends, med)
    out += metric_table("send_multi / recv_multi: round trip, p50 (us)", multis, "buffers", "rtt_p50_us", 1,
                        backends, med)
    if plots:
        out += ["## Plots", ""] + [f"![{n}]({os.path.relpath(p, os.path.dirname(path))})" for n, p in plots.items()]
        out.append("")
    elif plot_note:
        out += [f"Plots: {plot_note}.", ""]
    failed = [r for r in report["runs"] if "error" in r]
    if failed:
        out += ["## Failed runs", ""] + [f"- round {r['round']}, {r['backend']}, {size_label(r['n_bytes'])} x "
                                         f"{r['n_buffers']}: {r['error']}" for r in failed] + [""]
    out += ["## Commands", "", "Environment: " + " ".join(f"{k}={v}" for k, v in report["env"].items()), "",
            "```sh", *report["commands"]]
    if "command" in floor:
        out += ["# UCX floor (ucx_floor.measure):", floor["command"]]
    out += ["```", ""]
    with open(path, "w") as f:
        f.write("\n".join(out))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backends", type=_csv(str), default=list(BACKENDS), help="Comma-separated (default: all).")
    p.add_argument("--python-ucxx-go", default=sys.executable, help="Interpreter with ucxx_go (default: this one).")
    p.add_argument("--python-ucxx", default=sys.executable,
                   help="Interpreter with RAPIDS ucxx (default: this one; skipped if it cannot import ucxx).")
    p.add_argument("--tls", default=DEFAULT_TLS, help=f"UCX_TLS for every UCX process ('' for UCX's default; "
                   f"default {DEFAULT_TLS}).")
    p.add_argument("--defaults", action="store_true",
                   help="Each library in its default configuration: UCX_TLS and UCX_MM_ERROR_HANDLING "
                        "unset (overrides --tls and --no-mm-error-handling).")
    p.add_argument("--no-mm-error-handling", action="store_true",
                   help="Leave UCX_MM_ERROR_HANDLING=n: shared memory is then unused (TCP on lo).")
    p.add_argument("--sizes", type=_csv(parse_bytes), default=None,
                   help="Comma-separated, e.g. 8,1KiB,1MiB (default 8 B to 64 MiB).")
    p.add_argument("--multi-size", type=parse_bytes, default=None, help="Frame size for send_multi (64KiB).")
    p.add_argument("--multi-buffers", type=_csv(int), default=None, help="Frames per message (1,8,16).")
    p.add_argument("--rounds", type=int, default=None, help="Rounds (default 3; --quick 1).")
    p.add_argument("--iter-bytes", type=parse_bytes, default="1GiB", help="Payload per run, one way (1GiB).")
    p.add_argument("--min-iter", type=int, default=None, help="Default 20; --quick 10.")
    p.add_argument("--max-iter", type=int, default=None, help="Default 2000; --quick 10.")
    p.add_argument("--progress-mode", default="thread")
    p.add_argument("-b", "--server-cpu", type=int, default=0)
    p.add_argument("-c", "--client-cpu", type=int, default=1)
    p.add_argument("--no-affinity", action="store_true", help="Do not pin the processes.")
    p.add_argument("--fresh-alloc", action="store_true",
                   help="Allocate buffers in every timed iteration, as UCXX's benchmark does by default.")
    p.add_argument("--timeout", type=float, default=300.0, help="Seconds per run before it is killed.")
    p.add_argument("--no-floor", action="store_true", help="Skip ucx_perftest.")
    p.add_argument("--quick", action="store_true", help="Tiny sizes and iteration counts (CI).")
    p.add_argument("--out", default=os.path.join(HERE, "results", "send_recv.md"), help="Markdown report path.")
    args = p.parse_args(argv)
    quick = args.quick
    for name, normal, small in (("sizes", DEFAULT_SIZES, [8, 64 << 10]),
                                ("multi_size", 64 << 10, 64 << 10), ("multi_buffers", [1, 8, 16], [4]),
                                ("rounds", 3, 1), ("min_iter", 20, 10), ("max_iter", 2000, 10)):
        if getattr(args, name) is None:
            setattr(args, name, small if quick else normal)
    unknown = set(args.backends) - set(BACKENDS)
    if unknown:
        p.error(f"unknown backends {sorted(unknown)}; choose from {', '.join(BACKENDS)}")
    if not args.no_affinity and not {args.server_cpu, args.client_cpu} <= os.sched_getaffinity(0):
        p.error(f"CPUs {args.server_cpu} and {args.client_cpu} are not both available; use -b/-c or --no-affinity")
    return args


def main(argv=None):
    args = parse_args(argv)
    env = run_env(args)
    interpreters, skipped = choose_interpreters(args)
    if not interpreters:
        print("compare: no backend can run: " + "; ".join(skipped.values()), file=sys.stderr)
        return 1
    configs = plan(args)
    print(f"UCX_TLS={env.get('UCX_TLS', '(unset)')} UCX_MM_ERROR_HANDLING={env.get('UCX_MM_ERROR_HANDLING', '(unset)')} "
          f"UCX_NET_DEVICES={env['UCX_NET_DEVICES']}; backends: {', '.join(interpreters)}")
    for backend, why in skipped.items():
        print(f"skipping {backend}: {why}")
    runs, commands = [], []
    with tempfile.TemporaryDirectory(prefix="ucxx_go_bench_") as tmp:
        for rnd in range(args.rounds):
            order = list(interpreters) if rnd % 2 == 0 else list(reversed(interpreters))
            for cfg in configs:
                for backend in order:
                    cmd = command_line(interpreters[backend], backend, cfg, args)
                    if rnd == 0:
                        commands.append(shlex.join(cmd))
                    print(f"round {rnd + 1}/{args.rounds} {backend:10} {format_bytes(cfg['n_bytes'])} "
                          f"x {cfg['n_buffers']}", flush=True)
                    record = run_one(cmd, env, os.path.join(tmp, "run.json"), args.timeout + RUN_SLACK)
                    record.update(round=rnd + 1, backend=backend, n_bytes=cfg["n_bytes"],
                                  n_buffers=cfg["n_buffers"])
                    if "error" in record:
                        print(f"  failed: {record['error']}", file=sys.stderr)
                    runs.append(record)
    floor = {"error": "skipped (--no-floor)"} if args.no_floor else run_floor(args, args.sizes, env)
    floor_lat = {int(s): v for s, v in floor.get("tag_lat_rtt_us", {}).items()} or \
        {int(s): 2 * v for s, v in floor.get("tag_lat_us", {}).items()}
    floor_bw = {int(s): v for s, v in floor.get("tag_bw_MBps", {}).items()}
    med = medians(runs)
    report = {
        "command": shlex.join([sys.executable, *sys.argv]),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": machine_info(), "settings": vars(args), "interpreters": interpreters, "skipped": skipped,
        "env": {k: env[k] for k in ("UCX_TLS", "UCX_NET_DEVICES", "UCX_MM_ERROR_HANDLING") if k in env},
        "configs": configs, "commands": commands, "runs": runs, "medians": med, "floor": floor,
        "floor_latency_rtt_us": floor_lat, "floor_bandwidth_MBps": floor_bw,
    }
    out_dir = os.path.dirname(os.path.abspath(args.out))
    plot_dir = os.path.join(out_dir, "results")
    plots, note = write_plots(plot_dir, args.sizes, list(interpreters), med, floor_lat, floor_bw)
    write_markdown(args.out, report, plots, note)
    os.makedirs(plot_dir, exist_ok=True)
    json_path = os.path.join(plot_dir, os.path.splitext(os.path.basename(args.out))[0] + ".json")
    with open(json_path, "w") as f:
        json.dump(report | {"medians": [{"backend": b, "n_bytes": s, "n_buffers": k, **v}
                                        for (b, s, k), v in med.items()]}, f, indent=1)
    print(f"wrote {args.out} and {json_path}")
    return 0 if any("results" in r for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
