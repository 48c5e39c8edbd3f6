"""Markdown table of interleaved collectives_bench.py rounds: ucxx_go against NCCL.

    python benchmarks/gpu/collectives_table.py DIR [NCCL_NAME]

DIR holds r<round>_ucxx.json and r<round>_<NCCL_NAME>.json (NCCL_NAME: nccl, the default,
or ncclwrap for NCCL timed with its tensors made in every call; benchmarks/gpu/machine.sh
collectives tars them). Per op and size: the median over rounds of each library's per
call time, NCCL / ucxx_go (>= 1: ucxx_go is at or below NCCL's latency, in bold),
each round's own ratio, the in-flight times and their ratio, and the bus bandwidths.
"""

import glob
import json
import os
import statistics
import sys


def size_name(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift:
            return f"{b >> shift} {unit}"
    return f"{b} B"


def main(d, nccl="nccl"):
    rows = {}
    for f in sorted(glob.glob(os.path.join(d, "r*_*.json"))):
        lib = os.path.basename(f)[:-5].split("_", 1)[1]
        for r in json.load(open(f))["rows"]:
            if lib in ("ucxx", nccl):
                rows.setdefault((r["op"], r["bytes"]), {}).setdefault("nccl" if lib == nccl else lib, []).append(r)
    print("| op | size | ucxx_go µs a call | NCCL µs a call | NCCL / ours | rounds | in flight, ours / NCCL µs | NCCL / ours "
          "| bus GB/s, ours / NCCL |")
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|")
    for op, size in sorted(rows):
        d = rows[(op, size)]
        if "ucxx" not in d or "nccl" not in d:
            continue

        def med(lib, key):
            return statistics.median(r[key] for r in d[lib])

        u, n = med("ucxx", "us_per_call"), med("nccl", "us_per_call")
        ui, ni = med("ucxx", "us_inflight"), med("nccl", "us_inflight")
        ub, nb = med("ucxx", "busbw_per_call"), med("nccl", "busbw_per_call")
        ratio = f"**{n / u:.2f}**" if n >= u else f"{n / u:.2f}"
        per = " ".join(f"{b['us_per_call'] / a['us_per_call']:.2f}" for a, b in zip(d["ucxx"], d["nccl"]))
        print(f"| {op} | {size_name(size)} | {u:.1f} | {n:.1f} | {ratio} | {per} | {ui:.1f} / {ni:.1f} | {ni / ui:.2f} "
              f"| {ub:.1f} / {nb:.1f} |")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
