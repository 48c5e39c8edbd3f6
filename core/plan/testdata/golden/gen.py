"""Chooses the (plan, rank, input, output) cases of chunks.tsv and runs the golden
binary (golden.cc, the real 0.9 parser) on each. Usage: gen.py path/to/golden"""
import glob, json, os, subprocess, sys

here = os.path.dirname(os.path.abspath(__file__))
golden = sys.argv[1]

def usable(path):
    d = json.load(open(path))
    if any(g["input_chunks"] == 0 or g["output_chunks"] == 0 for g in d["gpus"]):
        return None  # 0.9 divides by zero; Parse rejects
    bad = []
    def walk(ops):
        for o in ops:
            if o["name"] in ("gstore", "glre", "gstorepkt"):
                bad.append(o)
            if o["name"] == "res" and "channel_type" not in o:
                bad.append(o)
            walk(o.get("ops", []) if o["name"] == "pipeline" else [])
    for g in d["gpus"]:
        for tb in g["threadblocks"]:
            walk(tb["ops"])
    return None if bad else d

def nops(g):
    return sum(1 + len(o.get("ops", [])) for tb in g["threadblocks"] for o in tb["ops"])

def sizes(d, g, c):
    return g["input_chunks"] * c, g["output_chunks"] * c

def in_range(d, g, c):
    i, o = sizes(d, g, c)
    s = o if d["collective"] == "allgather" else i
    return d["min_message_size"] <= s <= d["max_message_size"]

def cases(name, path, d):
    a = d["buffer_alignment"]
    n = len(d["gpus"])
    most = max(nops(g) for g in d["gpus"])
    big = most > 200
    keep = 4 if most <= 20 else 3 if most <= 60 else 2 if most <= 120 else 1
    ranks = sorted({0, n - 1} if not big else {0})
    cands = [a, 3 * a, 7 * a, 1000 * a, (1 << 20) + 3 * a, 48 << 20, 64 * a, 65536]
    for r in ranks:
        g = d["gpus"][r]
        ok = [c for c in cands if in_range(d, g, c)]
        if not ok:  # choose inside the window
            lo = max(d["min_message_size"], a)
            div = g["output_chunks"] if d["collective"] == "allgather" else g["input_chunks"]
            c = -(-lo // (div * a)) * a
            ok = [c] if in_range(d, g, c) else []
        ok = ok[:keep]
        for c in ok:
            yield (name, path, r) + sizes(d, g, c)
    g = d["gpus"][0]
    c = next((c for c in cands if in_range(d, g, c)), a)
    i, o = sizes(d, g, c)
    if a > 1:
        yield name, path, 0, i + a // 2, o          # not aligned
    yield name, path, 0, 2 * i, o                   # chunk sizes differ (or not divisible)
    yield name, path, 0, i, o + a                   # output not divisible / differs
    if d["min_message_size"] > 0:
        yield name, path, 0, a * g["input_chunks"], a * g["output_chunks"]  # below min
    if d["max_message_size"] < 2**64 - 1:
        k = d["max_message_size"] // a + 1
        yield name, path, 0, k * a * g["input_chunks"], k * a * g["output_chunks"]  # above max

plans = []
for p in sorted(glob.glob(os.path.join(here, "..", "mscclpp-v0.9.0", "*.json"))):
    d = usable(p)
    if d:
        plans.append(("mscclpp-v0.9.0/" + os.path.basename(p), p, d))
for p in sorted(glob.glob(os.path.join(here, "synthetic", "*.json"))):
    plans.append(("golden/synthetic/" + os.path.basename(p), p, json.load(open(p))))

print("# Golden chunk arithmetic of MSCCL++ v0.9.0 (tag v0.9.0, ed565ceb), produced by gen.sh:")
print("# the real execution_plan.cc, built host-only (golden.cc), loading each plan for one rank")
print("# with constant offsets 0. case: name rank input output, then ok (chunk, 0.9's computed")
print("# scratch size and max scratch chunk) or err (0.9's exception). op: lane, index in 0.9's")
print("# flattened op list (pipeline inner ops follow their pipeline), name, then src/dst")
print("# offset:length lists, pipeline iterations, barrier id and count, or semaphore count.")
print("# Ops without references or counts (nop, signal, wait...) are left out.")
seen = set()
for name, path, d in plans:
    for case in cases(name, path, d):
        if case in seen:
            continue
        seen.add(case)
        n, p, r, i, o = case
        res = subprocess.run([golden, n, p, str(r), str(i), str(o)], capture_output=True, text=True)
        if res.returncode not in (0, 1):
            print(f"# {n} rank {r} {i} {o}: 0.9 crashed (rc {res.returncode})")
            continue
        for line in res.stdout.splitlines(keepends=True):
            f = line.rstrip("\n").split("\t")
            # Ops with neither references nor counts (nop, signal, wait...) say nothing
            # about the arithmetic; the index column keeps the others aligned.
            if f[0] == "op" and f[4:] == ["src=", "dst="]:
                continue
            sys.stdout.write(line)
