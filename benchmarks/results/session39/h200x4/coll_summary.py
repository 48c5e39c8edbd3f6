"""Summarises session 39's collectives on 4 x H200 (the .tgz files beside this one unpacked into DIR/<name>/):
NCCL's time over ours (>= 1: ours faster) for stream-ordered calls at 8 B-1 MiB over three latency rounds, per call
and ten in flight; bus bandwidth from 64 MiB, ours over NCCL's, per call / in flight; plain (unordered) calls' lowest
per-call ratio by op.

    mkdir -p /tmp/c && for f in *.tgz; do mkdir -p /tmp/c/${f%.tgz}; tar -C /tmp/c/${f%.tgz} -xzf $f; done
    python coll_summary.py /tmp/c
"""
import json
import os
import statistics as st
import sys

root = sys.argv[1]
ops = ["allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall"]


def load(*p):
    with open(os.path.join(root, *p)) as f:
        return {(x["op"], x["bytes"]): x for x in json.load(f)["rows"]}


rounds = [("collectives_latency_r12", "r1"), ("collectives_latency_r12", "r2"), ("collectives_lat3", "r1")]
print("latency 8 B-1 MiB, stream-ordered: NCCL time / ours")
for op in ops:
    pc, fl, below, ours, nccl = [], [], [], [], []
    for i, (d, r) in enumerate(rounds, 1):
        u, n = load(d, f"{r}_ucxxordered.json"), load(d, f"{r}_nccl.json")
        for k in sorted(u):
            if k[0] != op or k not in n or k[1] > 1 << 20:
                continue
            a = n[k]["us_per_call"] / u[k]["us_per_call"]
            pc.append(a)
            fl.append(n[k]["us_inflight"] / u[k]["us_inflight"])
            ours.append(u[k]["us_per_call"])
            nccl.append(n[k]["us_per_call"])
            if a < 1:
                below.append(f"round {i} {k[1]} B {a:.2f}")
    print(f"  {op:15s} per call {min(pc):.2f}-{max(pc):.2f} (median {st.median(pc):.2f}), in flight {min(fl):.2f}-"
          f"{max(fl):.2f}; ours {min(ours):.0f}-{max(ours):.0f} us, NCCL {min(nccl):.0f}-{max(nccl):.0f} us; "
          f"cells < 1: {len(below)} of {len(pc)} {below}")
print("bus bandwidth from 64 MiB, stream-ordered: ours / NCCL's per call, in flight (GB/s ours vs NCCL per call)")
u, n = load("collectives_busbw", "r1_ucxxordered.json"), load("collectives_busbw", "r1_nccl.json")
for op in ops:
    cells = [f"{k[1] >> 20} MiB {u[k]['busbw_per_call'] / n[k]['busbw_per_call']:.2f} / "
             f"{n[k]['us_inflight'] / u[k]['us_inflight']:.2f} ({u[k]['busbw_per_call']:.0f} vs "
             f"{n[k]['busbw_per_call']:.0f})" for k in sorted(u) if k[0] == op and k in n]
    print(f"  {op:15s} " + "; ".join(cells))
for r in ("r1", "r2"):
    u, n = load("collectives_latency_r12", f"{r}_ucxx.json"), load("collectives_latency_r12", f"{r}_nccl.json")
    low = {op: min(n[k]["us_per_call"] / u[k]["us_per_call"] for k in u if k[0] == op and k in n) for op in ops}
    print(f"plain calls, round {r[1]}, lowest per-call ratio: " + ", ".join(f"{o} {v:.2f}" for o, v in low.items()))
