"""Medians (min..max) of run.sh's rounds, and each mode's ratio to tcp's median."""
import glob, json, os, statistics as st, sys

d = os.path.dirname(os.path.abspath(__file__))
runs = {}
for f in sorted(glob.glob(f"{d}/r*_*.json")):
    cfg = os.path.basename(f)[:-5].split("_", 1)[1]
    r = json.load(open(f))["results"][0]
    row = {f"network {k}, MB/s": v for k, v in r["network_MBps"].items() if k in ("100 kiB", "1 MiB", "10 MiB", "50 MiB")}
    row.update({"p2p rechunk, s": r["rechunk_s"], "transpose-sum, s": r["transpose_s"], "2,000 small tasks, s": r["small_tasks_s"]})
    for k, v in row.items():
        runs.setdefault(k, {}).setdefault(cfg, []).append(v)
cfgs = ("tcp", "thread", "loop")
print("| | " + " | ".join(cfgs) + " | thread / tcp | loop / tcp |")
print("| --- |" + " ---: |" * (len(cfgs) + 2))
for k, by in runs.items():
    med = {c: st.median(by[c]) for c in cfgs if c in by}
    cell = lambda c: f"{med[c]:.3g} ({min(by[c]):.3g}..{max(by[c]):.3g})" if c in med else "-"
    ratio = lambda c: (med[c] / med["tcp"] if "MB/s" in k else med[c] / med["tcp"]) if c in med and "tcp" in med else float("nan")
    print(f"| {k} | " + " | ".join(cell(c) for c in cfgs) + f" | {ratio('thread'):.2f} | {ratio('loop'):.2f} |")
