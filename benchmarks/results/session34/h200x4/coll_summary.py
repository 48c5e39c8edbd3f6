"""Summarises `../session32/run_next.sh coll` on this machine (collectives_*.tgz unpacked into DIR):
NCCL's time over ours (>= 1: ours faster), stream-ordered calls (ucxx-ordered), per call and ten in flight,
at 8 B-1 MiB over the three latency rounds; bus bandwidth from 64 MiB (ours / NCCL's), per call and in flight.

    python coll_summary.py DIR
"""
import json, os, statistics as st, sys

root = sys.argv[1]
ops = ['allreduce', 'allgather', 'reduce_scatter', 'broadcast', 'alltoall']


def load(d, lib):
    with open(os.path.join(root, d, f'r1_{lib}.json')) as f:
        return {(x['op'], x['bytes']): x for x in json.load(f)['rows']}


print("latency: NCCL time / ours per call and in flight, min-max over 3 rounds, 8 B-1 MiB")
for op in ops:
    pc, fl, below = [], [], []
    for r in (1, 2, 3):
        u, n = load(f'collectives_latency_r{r}', 'ucxxordered'), load(f'collectives_latency_r{r}', 'nccl')
        for k in sorted(u):
            if k[0] != op or k not in n or k[1] > 1 << 20:
                continue
            a, b = n[k]['us_per_call'] / u[k]['us_per_call'], n[k]['us_inflight'] / u[k]['us_inflight']
            pc.append(a); fl.append(b)
            if a < 1:
                below.append(f"r{r} {k[1]} B {a:.2f}")
    print(f"  {op:15s} per call {min(pc):.2f}-{max(pc):.2f} (median {st.median(pc):.2f}), in flight "
          f"{min(fl):.2f}-{max(fl):.2f}; per-call cells < 1: {len(below)} of {len(pc)} {below}")
print("bus bandwidth from 64 MiB: ours / NCCL's (ordered; plain ucxx in brackets), per call and in flight")
u, p, n = (load('collectives_busbw', lib) for lib in ('ucxxordered', 'ucxx', 'nccl'))
for op in ops:
    cells = []
    for k in sorted(u):
        if k[0] == op and k[1] >= 64 << 20 and k in n:
            pcr = u[k]['busbw_per_call'] / n[k]['busbw_per_call']
            flr = n[k]['us_inflight'] / u[k]['us_inflight']
            plain = p[k]['busbw_per_call'] / n[k]['busbw_per_call'] if k in p else float('nan')
            cells.append(f"{k[1] >> 20} MiB {pcr:.2f}/{flr:.2f} [{plain:.2f}]")
    print(f"  {op:15s} " + ", ".join(cells))
