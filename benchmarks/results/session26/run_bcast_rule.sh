#!/usr/bin/env bash
# Session 26, on the 4-GPU machine after the kit, with the waits-only rule for 1 GiB
# chains built: broadcast at 256 MiB and 1 GiB, ROUNDS alternating rounds of ours with
# the defaults (waits-only from 1 GiB), ours with every chain sliced as before
# (UCXGO_SLICED_MIN_BYTES=16777216), NCCL. Output: $OUT/bcast_rule.tgz.
set -u
bash benchmarks/gpu/machine.sh > /dev/null 2>&1
source .devkit/activate.sh
export PYTHONPATH=/tmp/ucxxgo-site:$PYTHONPATH UCX_NET_DEVICES=lo PYTHONUNBUFFERED=1
r=$(mktemp -d)
b="benchmarks/gpu/collectives_bench.py --ops broadcast --min-bytes 268435456 --max-bytes 1073741824 --iters 40 --budget-s 100"
for round in $(seq "${ROUNDS:-3}"); do
    for v in rule sliced nccl; do
        env=""; lib=ucxx
        [ $v = sliced ] && env="UCXGO_SLICED_MIN_BYTES=16777216"
        [ $v = nccl ] && lib=nccl
        env $env timeout 250 python3 -m ucxx_go.launch -n 4 $b --lib $lib --out "$r/r${round}_$v.json" > "$r/r${round}_$v.log" 2>&1
        echo "round $round $v rc=$?"
    done
done
rm -f "$r"/*.rank*
tar -C "$r" -czf "$OUT/bcast_rule.tgz" .
