"""How long the DAG's traced regions took, from a Go execution trace.

    python benchmarks/dag/trace_regions.py TRACE [--go go]

TRACE is a file `ucxx_go.debug.go_trace` wrote (or `run.py --go-trace PREFIX`). The
DAG marks its launch path with trace regions (free when no trace runs):

- `DagLaunch`, `DagCopy`: a kernel launch's and a copy's whole Go call from Python;
- `dag.lock`: waiting for the graph's lock (other threads end and start vertices);
- `dag.graph`: the graph's own work under the lock (dependencies, placement, edges);
- `dag.deliver`: handing started vertices to their lanes, which queue GPU work:
  `gpu.waits` (stream waits for parents on other streams), `gpu.prefetch` (managed
  ranges moved to the device), `gpu.work` (`cuLaunchKernel`, `cuMemcpyAsync`),
  `gpu.stop` (the stop event).

Regions nest (a DagLaunch holds the others when the calling thread queues the
vertex). For each type this prints the count, the total, and the median, 90th
percentile and largest duration, from `go tool trace -d=parsed`'s RegionBegin and
RegionEnd events, paired per goroutine.
"""

import argparse
import collections
import re
import statistics
import subprocess
import sys

EVENT = re.compile(r'^M=-?\d+ P=-?\d+ G=(-?\d+) Region(Begin|End) Time=(\d+) Task=\d+ Type="([^"]*)"')


def durations(lines):
    """Durations in ns of each region type, from parsed trace lines."""
    open_by_g = collections.defaultdict(list)  # goroutine -> stack of (type, start)
    out = collections.defaultdict(list)
    for line in lines:
        m = EVENT.match(line)
        if not m:
            continue
        g, edge, t, typ = m.group(1), m.group(2), int(m.group(3)), m.group(4)
        stack = open_by_g[g]
        if edge == "Begin":
            stack.append((typ, t))
            continue
        while stack:  # a region whose end the trace lost is dropped
            open_typ, start = stack.pop()
            if open_typ == typ:
                out[typ].append(t - start)
                break
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace")
    p.add_argument("--go", default="go", help="the go command (its `tool trace` parses the file)")
    args = p.parse_args()
    parsed = subprocess.run([args.go, "tool", "trace", "-d=parsed", args.trace], capture_output=True, text=True)
    if parsed.returncode != 0:
        sys.exit(f"go tool trace failed: {parsed.stderr.strip()[-500:]}")
    found = durations(parsed.stdout.splitlines())
    if not found:
        sys.exit("no regions in the trace (was it recorded while the DAG ran?)")
    print(f"{'region':14s} {'count':>8s} {'total ms':>10s} {'median us':>10s} {'p90 us':>9s} {'max us':>9s}")
    for typ, ds in sorted(found.items(), key=lambda kv: -sum(kv[1])):
        ds.sort()
        p90 = ds[min(len(ds) - 1, int(0.9 * len(ds)))]
        print(f"{typ:14s} {len(ds):8d} {sum(ds) / 1e6:10.2f} {statistics.median(ds) / 1e3:10.2f} "
              f"{p90 / 1e3:9.2f} {ds[-1] / 1e3:9.2f}")


if __name__ == "__main__":
    main()
