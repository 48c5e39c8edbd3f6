"""Session 43: the tables of README.md from h200/ (echo_spin_c*.txt, dask/r*_*.json).   python summarize.py"""
import os; os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "h200"))
def echo():
    import json, re, statistics as st, glob
    rows = {}
    for f in sorted(glob.glob("echo_spin_c*.txt")):
        c = f[10:12]
        for line in open(f):
            m = re.match(r"echo round (\d+) (\S+): (\{.*?\})(.*)\| server(.*)", line)
            if not m: continue
            size, us = next(iter(json.loads(m.group(3)).items()))
            cl, sv = m.group(4), m.group(5)
            g = lambda pat, s: (lambda x: float(x.group(1)) if x else None)(re.search(pat, s))
            rows.setdefault((int(size), m.group(2)), []).append(dict(lease=f"{c}r{m.group(1)}", us=us,
                send=g(r"SendMulti: n=\d+ p50=([\d.]+)us", cl), ssend=g(r"SendMulti: n=\d+ p50=([\d.]+)us", sv),
                send90=g(r"SendMulti: n=\d+ p50=[\d.]+us p90=([\d.]+)us", cl),
                cores=g(r"([\d.]+) cores", cl), scores=g(r"([\d.]+) cores", sv), cpu=g(r"(\d+)us/send", cl)))
    med = lambda xs: st.median([x for x in xs if x is not None]) if any(x is not None for x in xs) else float("nan")
    print("| size | variant | runs | echo µs median (each run) | / default | / tcp | send_multi p50 µs client / server | client+server cores busy | client CPU µs per echo |")
    print("|---|---|---:|---|---:|---:|---|---:|---:|")
    for (size, v), rs in sorted(rows.items(), key=lambda kv: (kv[0][0], ["tcp","ucxgo","ucxgo-s0","ucxgo-s500","ucxgo-s1000"].index(kv[0][1]))):
        runs = ' / '.join('%.0f' % r['us'] for r in rs)
        m_ = med([r["us"] for r in rs])
        # per-run pair ratios with the same lease round
        base = {r["lease"]: r["us"] for r in rows[(size, "ucxgo")]}
        tcp = {r["lease"]: r["us"] for r in rows[(size, "tcp")]}
        rd = med([r["us"] / base[r["lease"]] for r in rs])
        rt = med([r["us"] / tcp[r["lease"]] for r in rs])
        sc = med([r['send'] for r in rs]); ss = med([r['ssend'] for r in rs]); cpu = med([r['cpu'] for r in rs])
        cores = med([(r["cores"] or 0) + (r["scores"] or 0) if r["cores"] else None for r in rs])
        print(f"| {size//1024} KiB | {v} | {len(rs)} | {m_:.0f} ({runs}) | {rd:.2f}x | {rt:.2f}x | "
              f"{sc:.1f} / {ss:.1f} | {cores:.2f} | {cpu:.0f} |")
def dask():
    import json, glob, statistics as st, re
    d = {}
    for f in sorted(glob.glob("dask/r*_*.json")):
        m = re.match(r"dask/r(\d)_(.*)\.json", f); r = json.load(open(f))["results"][0]
        d[(int(m.group(1)), m.group(2))] = r
    rows = [("net 1 MiB MB/s", lambda r: r["network_MBps"]["1 MiB"], "bw"),
            ("net 10 MiB MB/s", lambda r: r["network_MBps"]["10 MiB"], "bw"),
            ("net 50 MiB MB/s", lambda r: r["network_MBps"]["50 MiB"], "bw"),
            ("net 100 kiB MB/s", lambda r: r["network_MBps"]["100 kiB"], "bw"),
            ("rechunk first s", lambda r: r["rechunk_s"], "t"),
            ("rechunk again s", lambda r: r["rechunk_again_s"], "t"),
            ("transpose-sum s", lambda r: r["transpose_s"], "t"),
            ("2,000 small tasks s", lambda r: r["small_tasks_s"], "t"),
            ("transpose fetch bw MB/s", lambda r: r["transfer_bandwidth_median_MBps"], "bw")]
    vs = ["tcp", "ucxgo", "ucxgo-s500", "ucxgo-s1000"]
    rounds = sorted({k[0] for k in d})
    print("| row | " + " | ".join(vs) + " | ucxgo/tcp per round (median) | s500/tcp per round (median) | s1000/tcp per round (median) |")
    print("|---|" + "---:|" * 7)
    for name, f, kind in rows:
        cells = []
        for v in vs:
            xs = [f(d[(r, v)]) for r in rounds if (r, v) in d]
            fmt = (lambda x: f"{x:.0f}") if kind == "bw" else (lambda x: f"{x:.2f}")
            cells.append(f"{fmt(st.median(xs))} ({' / '.join(fmt(x) for x in xs)})")
        for v in vs[1:]:
            rs = [f(d[(r, v)]) / f(d[(r, "tcp")]) for r in rounds if (r, v) in d]
            cells.append(f"**{st.median(rs):.2f}x** ({' / '.join(f'{x:.2f}' for x in rs)})")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()
    print("spin vs default ucxgo, per round ratio (median):")
    for name, f, kind in rows:
        out = []
        for v in vs[2:]:
            rs = [f(d[(r, v)]) / f(d[(r, "ucxgo")]) for r in rounds if (r, v) in d]
            out.append(f"{v} {st.median(rs):.2f}x ({' / '.join(f'{x:.2f}' for x in rs)})")
        print(f"  {name}: " + "; ".join(out))
echo(); print(); dask()
