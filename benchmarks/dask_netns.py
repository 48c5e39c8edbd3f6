"""Dask across two hosts (network namespaces), tcp beside ucxgo, in one run.

    sudo python benchmarks/dask_netns.py [--protocols tcp ucxgo] [--rounds 3] [--json FILE] [--out FILE.md]

Two network namespaces joined by a veth bridge stand for two machines (tests/_netns.py
makes them; root and iproute2 needed). Host 0 runs the scheduler, the client and one
worker; host 1 runs the other worker (`dask scheduler` / `dask worker --no-nanny
--nthreads 1`). UCX is limited to TCP there (UCX_TLS=^sm: the namespaces share the
machine, and UCX would otherwise take shared memory between them), as between real hosts.

Workloads, each timed by the client on host 0:
  - transpose-sum: `(x + x.T).sum()` on a 4000 x 4000 float64 array in 1000 x 1000
    chunks, persisted first (its tasks fetch chunks across the hosts): the first run, in
    which the workers also connect to each other, and a second, over those connections;
  - small tasks: 2,000 independent tasks (`client.map` of a trivial function, gathered);
  - network: `client.benchmark_hardware()["network"]` (echoes between the two workers).

Rounds alternate the protocols' order; medians per workload, and ucxgo / tcp.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from _bench_common import emit_markdown  # noqa: E402
from _netns import Hosts  # noqa: E402

PORT = 40300
START_TIMEOUT = 90


def client_main(address, n_workers):
    """The client's side, run in host 0: prints one JSON line of timings."""
    import dask.array as da
    from distributed import Client, wait

    def inc(i):
        return i + 1

    with Client(address, timeout=START_TIMEOUT) as client:
        client.wait_for_workers(n_workers, timeout=START_TIMEOUT)
        out = {}
        x = da.random.random((4000, 4000), chunks=(1000, 1000)).persist()
        wait(x)
        t0 = time.perf_counter()
        total = (x + x.T).sum().compute()
        out["transpose_s"] = time.perf_counter() - t0
        assert total > 0
        t0 = time.perf_counter()
        assert (x + x.T).sum().compute() == total
        out["transpose_again_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        results = client.gather(client.map(inc, range(2000), pure=False))
        out["small_tasks_s"] = time.perf_counter() - t0
        assert results == list(range(1, 2001))
        hw = client.benchmark_hardware()
        out["network_MBps"] = {k: v / 1e6 for k, v in hw["network"].items()}
        print(json.dumps(out), flush=True)


def run_once(hosts, protocol, python, dask_exe, logdir):
    """One cluster of `protocol` across the hosts; the client's timings."""
    h0, h1 = hosts[0], hosts[1]
    address = f"{protocol}://{h0.ipv4}:{PORT}"
    procs = []

    def start(host, *argv, name):
        log = open(os.path.join(logdir, f"{protocol}-{name}.log"), "w")
        p = host.run((python, *argv), stdout=log, stderr=subprocess.STDOUT)
        procs.append(p)
        return p

    try:
        start(h0, dask_exe, "scheduler", "--protocol", protocol, "--host", h0.ipv4, "--port", str(PORT),
              "--no-dashboard", name="scheduler")
        for i, host in enumerate((h0, h1)):
            start(host, dask_exe, "worker", address, "--host", host.ipv4, "--nthreads", "1", "--no-nanny",
                  "--no-dashboard", "--memory-limit", "0", name=f"worker{i}")
        client = h0.run((python, os.path.abspath(__file__), "--client", address, "2"),
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = client.communicate(timeout=600)
        if client.returncode != 0:
            raise RuntimeError(f"{protocol} client failed ({client.returncode}):\n{err[-3000:]}")
        return json.loads(out.strip().splitlines()[-1])
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def report(results, args):
    protocols = list(results)
    med = {p: {k: statistics.median(r[k] for r in results[p])
               for k in ("transpose_s", "transpose_again_s", "small_tasks_s")}
           for p in protocols}
    sizes = list(results[protocols[0]][0]["network_MBps"])
    for p in protocols:
        for s in sizes:
            med[p][s] = statistics.median(r["network_MBps"][s] for r in results[p])
    lines = [f"Dask across two network namespaces (UCX over TCP on a veth pair): "
             f"`python benchmarks/dask_netns.py --rounds {args.rounds}`; medians of {args.rounds} "
             "alternating rounds. Host 0: scheduler, client, one worker; host 1: one worker.", ""]
    ratio = "ucxgo / tcp" if "tcp" in protocols and "ucxgo" in protocols else None
    lines.append("| | " + " | ".join(protocols) + (f" | {ratio} |" if ratio else " |"))
    lines.append("| --- |" + " ---: |" * (len(protocols) + (1 if ratio else 0)))
    rows = [("(x + x.T).sum(), 4000 x 4000 (s)", "transpose_s", "{:.2f}"),
            ("the same again, workers connected (s)", "transpose_again_s", "{:.2f}"),
            ("2,000 small tasks (s)", "small_tasks_s", "{:.2f}")]
    rows += [(f"network {s} (MB/s)", s, "{:,.0f}") for s in sizes]
    for label, key, fmt in rows:
        cells = [fmt.format(med[p][key]) for p in protocols]
        if ratio:
            cells.append(f"{med['ucxgo'][key] / med['tcp'][key]:.2f}x")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "Time rows: below 1 is faster for ucxgo; network rows: above 1 is faster."]
    emit_markdown(lines, args.out)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        client_main(sys.argv[2], int(sys.argv[3]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--protocols", nargs="+", default=["tcp", "ucxgo"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--out", help="Markdown report path")
    args = ap.parse_args()
    why = Hosts.unavailable()
    if why:
        raise SystemExit(f"dask_netns: {why}")
    dask_exe = os.path.join(os.path.dirname(sys.executable), "dask")
    if not os.path.exists(dask_exe):  # installed elsewhere (pip --target): the one on PATH
        dask_exe = shutil.which("dask") or dask_exe
    results = {p: [] for p in args.protocols}
    hosts = Hosts(2, net=79)
    try:
        with tempfile.TemporaryDirectory(prefix="dask_netns_") as logdir:
            for r in range(args.rounds):
                order = args.protocols if r % 2 == 0 else args.protocols[::-1]
                for p in order:
                    print(f"round {r + 1}/{args.rounds} {p}", file=sys.stderr, flush=True)
                    results[p].append(run_once(hosts, p, sys.executable, dask_exe, logdir))
    finally:
        hosts.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=2)
    report(results, args)


if __name__ == "__main__":
    main()
