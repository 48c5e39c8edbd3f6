#!/usr/bin/env bash
# Session 28: 2 ranks (one a GPU), stream-ordered calls of 2-32 MiB, sliced (every
# sliceable call from 2 MiB: UCXGO_SLICED_MIN_BYTES) against the defaults (2 ranks: never
# sliced), 3 alternating rounds, NCCL once a round. $OUT/sliced2.tgz.
source .devkit/activate.sh
export PYTHONPATH=/tmp/ucxxgo-site:$PYTHONPATH UCX_NET_DEVICES=lo
o=$(mktemp -d)
b="benchmarks/gpu/collectives_bench.py --iters 40 --budget-s 60"
for round in 1 2 3; do
    for v in nccl base sliced; do
        a="--lib ucxx --ordered"; e=""
        [ $v = nccl ] && a="--lib nccl"
        [ $v = sliced ] && e="UCXGO_SLICED_MIN_BYTES=2097152"
        for lo in 2097152 4194304; do
            env $e CUDA_VISIBLE_DEVICES=0,1 timeout 150 python3 -m ucxx_go.launch -n 2 $b $a --min-bytes $lo --max-bytes 33554432 \
                --out "$o/r${round}_${v}_$lo.json" > "$o/r${round}_${v}_$lo.log" 2>&1
            echo "sliced2 r$round $v from $lo rc=$?"
        done
    done
done
rm -f "$o"/*.rank*
tar -C "$o" -czf "$OUT/sliced2.tgz" .
python3 - "$o" <<'PY'
import glob, json, os, statistics, sys
rows = {}
for f in glob.glob(os.path.join(sys.argv[1], "r*.json")):
    r, v, _ = os.path.basename(f)[:-5].split("_")
    for x in json.load(open(f))["rows"]:
        rows.setdefault((x["op"], x["bytes"]), {}).setdefault(v, {})[r] = (x["us_per_call"], x["us_inflight"])
print("op MiB | call nccl / base / sliced (rounds) | flight nccl / base / sliced (rounds)")
for (op, b), d in sorted(rows.items()):
    f = lambda v, i: ",".join(f"{d[v][r][i]:.0f}" for r in sorted(d.get(v, {})))
    print(f"{op} {b >> 20} | {f('nccl', 0)} / {f('base', 0)} / {f('sliced', 0)} | {f('nccl', 1)} / {f('base', 1)} / {f('sliced', 1)}")
PY
