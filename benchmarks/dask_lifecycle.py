"""How long a Dask LocalCluster takes to start and to close, tcp beside ucxgo.

    python benchmarks/dask_lifecycle.py [--protocols tcp ucxgo] [--workers 2] [--rounds 5]

Each round starts, for each protocol in turn, a fresh interpreter that times
`LocalCluster(protocol=..., n_workers=..., processes=True)` with a Client until the
workers are up, runs one small computation, then times the close of Client and
cluster. What the interpreter and its workers print is scanned for UCX warnings
(`unexpected tag-receive descriptor`, or any line UCX logs at WARN or above). Medians
over rounds, and the ratio to the first protocol.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

os.environ.setdefault("UCX_NET_DEVICES", "lo")

_CHILD = r"""
import json, sys, time
import dask, distributed
from distributed import Client, LocalCluster

protocol, workers = sys.argv[1], int(sys.argv[2])
t0 = time.perf_counter()
cluster = LocalCluster(protocol=protocol, n_workers=workers, threads_per_worker=1, processes=True,
                       host="127.0.0.1", dashboard_address=None, memory_limit=0)
client = Client(cluster)
client.wait_for_workers(workers)
started = time.perf_counter() - t0
assert client.submit(sum, [1, 2, 3]).result() == 6
t0 = time.perf_counter()
client.close()
cluster.close()
closed = time.perf_counter() - t0
print("RESULT " + json.dumps({"start_s": started, "close_s": closed}), flush=True)
"""

# UCX's own log lines: "[timestamp] [host:pid:thread] file:line UCX WARN ..." (or
# ERROR), and the teardown warning about unmatched messages.
_UCX_WARNING = re.compile(r"UCX\s+(WARN|ERROR)|unexpected tag-receive descriptor")


def one(protocol, workers):
    out = subprocess.run([sys.executable, "-c", _CHILD, protocol, str(workers)],
                         capture_output=True, text=True, timeout=300)
    text = out.stdout + out.stderr
    if out.returncode != 0:
        raise RuntimeError(f"{protocol}: exit {out.returncode}:\n{text[-3000:]}")
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    result["ucx_warnings"] = sum(1 for ln in text.splitlines() if _UCX_WARNING.search(ln))
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--protocols", nargs="+", default=["tcp", "ucxgo"])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json")
    args = p.parse_args()
    runs = {proto: [] for proto in args.protocols}
    for r in range(args.rounds):
        for proto in args.protocols:
            runs[proto].append(one(proto, args.workers))
            print(f"round {r + 1} {proto}: {runs[proto][-1]}", file=sys.stderr, flush=True)
    base = args.protocols[0]
    summary = {}
    for proto, rs in runs.items():
        summary[proto] = {k: statistics.median(x[k] for x in rs) for k in ("start_s", "close_s")}
        summary[proto]["ucx_warnings_max"] = max(x["ucx_warnings"] for x in rs)
    print(f"{'':12}" + "".join(f"{proto:>12}" for proto in args.protocols) + f"{'ratio':>10}")
    for k in ("start_s", "close_s"):
        row = "".join(f"{summary[proto][k]:>11.2f}s" for proto in args.protocols)
        ratios = " ".join(f"{summary[proto][k] / summary[base][k]:.2f}" for proto in args.protocols[1:])
        print(f"{k:12}{row}{ratios:>10}")
    print(f"{'UCX warnings':12}" + "".join(f"{summary[proto]['ucx_warnings_max']:>12}" for proto in args.protocols))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "summary": summary, "workers": args.workers}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
