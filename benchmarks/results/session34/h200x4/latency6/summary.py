"""Six latency rounds of stream-ordered calls against NCCL on one 4 x H200 machine (session 34), the libraries'
order alternating (odd rounds ours first). Per round and op, 8 B-1 MiB: the median µs a call of ours and NCCL's,
the lowest NCCL / ours, and the cells below 1.

    python summary.py DIR   (DIR: the collectives_latency_r*.tgz unpacked, each into a directory of its name)
"""
import json, statistics as st, sys

root = sys.argv[1]
ops = ['allreduce', 'allgather', 'reduce_scatter', 'broadcast', 'alltoall']
for r in range(1, 7):
    u, n = ({(x['op'], x['bytes']): x for x in json.load(open(f'{root}/collectives_latency_r{r}/r1_{lib}.json'))['rows']}
            for lib in ('ucxxordered', 'nccl'))
    parts, low = [], 0
    for op in ops:
        ks = [k for k in u if k[0] == op and k[1] <= 1 << 20 and k in n]
        rat = [n[k]['us_per_call'] / u[k]['us_per_call'] for k in ks]
        low += sum(x < 1 for x in rat)
        parts.append(f"{op} {st.median(u[k]['us_per_call'] for k in ks):.1f}/{st.median(n[k]['us_per_call'] for k in ks):.1f} "
                     f"(min {min(rat):.2f})")
    print(f"round {r} ({'ours' if r % 2 else 'NCCL'} first): " + "; ".join(parts) + f"; cells < 1: {low} of {9 * len(ops)}")
