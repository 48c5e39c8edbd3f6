"""Medians of run.sh's rounds, and ratios to tcp (network: ucxgo's MB/s over tcp's; times: ucxgo's over tcp's)."""
import glob, json, os, statistics
os.chdir(os.path.dirname(os.path.abspath(__file__)))
runs = {}
for f in sorted(glob.glob("r*_*.json")):
    cfg = f.split("_", 1)[1][:-5]
    runs.setdefault(cfg, []).append(json.load(open(f))["results"][0])
keys = [("network", k) for k in ("100 kiB", "1 MiB", "10 MiB", "50 MiB")] + [(k, None) for k in ("rechunk_s", "transpose_s", "small_tasks_s")]
def val(r, k):
    return r["network_MBps"][k[1]] if k[0] == "network" else r[k[0]]
print("| row | tcp | ucxgo, cache | ucxgo, no cache | cache / tcp | no cache / tcp |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for k in keys:
    med = {c: statistics.median(val(r, k) for r in runs[c]) for c in ("tcp", "cache", "nocache")}
    name = f"network {k[1]} (MB/s)" if k[0] == "network" else k[0].replace("_s", "") + " (s)"
    fmt = (lambda v: f"{v:.0f}") if k[0] == "network" else (lambda v: f"{v:.2f}")
    print(f"| {name} | {fmt(med['tcp'])} | {fmt(med['cache'])} | {fmt(med['nocache'])} | "
          f"{med['cache'] / med['tcp']:.2f}x | {med['nocache'] / med['tcp']:.2f}x |")
