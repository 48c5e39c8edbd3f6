import json, sys, glob, os, collections
def load(d):
    out = collections.defaultdict(dict)  # (op,bytes) -> lib -> list of (call, infl)
    for f in sorted(glob.glob(d + "/r*_*.json")):
        r, lib = os.path.basename(f)[:-5].split("_", 1)
        j = json.load(open(f))
        for row in j["rows"]:
            out[(row["op"], row["bytes"])].setdefault(lib, []).append((row["us_per_call"], row["us_inflight"]))
    return out
for d in sys.argv[1:]:
    t = load(d)
    print("##", d)
    print("| op | bytes | ordered in flight / NCCL in flight (µs) | NCCL/ordered in flight | unordered in flight | NCCL/unordered | ordered per call / NCCL per call | NCCL/ordered per call |")
    for (op, b), libs in t.items():
        o, n, u = libs.get("ucxxordered", []), libs.get("nccl", []), libs.get("ucxx", [])
        ri = [nn[1] / oo[1] for oo, nn in zip(o, n)]
        ru = [nn[1] / uu[1] for uu, nn in zip(u, n)]
        rc = [nn[0] / oo[0] for oo, nn in zip(o, n)]
        f = lambda xs: ", ".join(f"{x:.0f}" for x in xs)
        g = lambda xs: ", ".join(f"{x:.2f}" for x in xs)
        print(f"| {op} | {b} | {f([x[1] for x in o])} / {f([x[1] for x in n])} | {g(ri)} | {f([x[1] for x in u])} | {g(ru)} | {f([x[0] for x in o])} / {f([x[0] for x in n])} | {g(rc)} |")
