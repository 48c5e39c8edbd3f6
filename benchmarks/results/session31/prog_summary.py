"""Summarises collectives_prog.tgz (unpacked into the directory given): NCCL's time over ours
at the 64 KiB default, and the default's time over 128 / 256 KiB device programs."""
import json, statistics as st, sys, os

root = sys.argv[1]
ops = ['allreduce', 'allgather', 'reduce_scatter', 'broadcast', 'alltoall']


def load(tag, r, lib):
    with open(os.path.join(root, f'collectives_prog{tag}_r{r}', f'r1_{lib}.json')) as f:
        return {(x['op'], x['bytes']): x for x in json.load(f)['rows']}


print("NCCL time / ours (>=1: ours faster), min-max over 3 rounds and sizes 8 B-2 MiB")
for op in ops:
    pc, fl, below = [], [], []
    for r in (1, 2, 3):
        u, n = load('64k', r, 'ucxxordered'), load('64k', r, 'nccl')
        for k in u:
            if k[0] != op or k not in n:
                continue
            a, b = n[k]['us_per_call'] / u[k]['us_per_call'], n[k]['us_inflight'] / u[k]['us_inflight']
            pc.append(a); fl.append(b)
            if a < 1:
                below.append(f"r{r} {k[1]}B pc {a:.2f}")
    print(f"{op:15s} per call {min(pc):.2f}-{max(pc):.2f} (median {st.median(pc):.2f})  in flight "
          f"{min(fl):.2f}-{max(fl):.2f} (median {st.median(fl):.2f})  per-call cells <1: {len(below)} {below[:4]}")
print("\ndevice programs to 128 / 256 KiB against 64 KiB: t(64k)/t(X) per call, medians over 3 rounds")
for op in ops:
    line = []
    for tag in ('128k', '256k'):
        by = {}
        for r in (1, 2, 3):
            a, b = load('64k', r, 'ucxxordered'), load(tag, r, 'ucxxordered')
            for k in a:
                if k[0] == op and 131072 <= k[1] <= 2097152 and k in b:
                    by.setdefault(k[1], []).append(a[k]['us_per_call'] / b[k]['us_per_call'])
        line.append(f"{tag}: " + ", ".join(f"{s >> 10}K {st.median(v):.2f}" for s, v in sorted(by.items())))
    print(f"{op:15s} " + " | ".join(line))
