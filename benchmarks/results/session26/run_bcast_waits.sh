#!/usr/bin/env bash
# Session 26, on the 4-GPU machine after the kit: broadcast and allreduce from 64 MiB to
# 1 GiB, ROUNDS alternating rounds of: ours with the default rule (sliced chains from 64
# MiB), ours with program waits (1-block programs holding the waits, copy-engine
# copies: the knobs of RESULTS.md sessions 22-23), NCCL. Output: $OUT/bcast_waits.tgz.
set -u
bash benchmarks/gpu/machine.sh > /dev/null 2>&1
source .devkit/activate.sh
export PYTHONPATH=/tmp/ucxxgo-site:$PYTHONPATH UCX_NET_DEVICES=lo PYTHONUNBUFFERED=1
r=$(mktemp -d)
b="benchmarks/gpu/collectives_bench.py --ops broadcast,allreduce --min-bytes 67108864 --max-bytes 1073741824 --iters 32 --budget-s 100"
for round in $(seq "${ROUNDS:-2}"); do
    for v in sliced waits nccl; do
        env=""; lib=ucxx
        [ $v = waits ] && env="UCXGO_SLICED_BLOCKS=1 UCXGO_PROGRAM_MAX_BYTES=4611686018427387904 UCXGO_PROGRAM_OP_MAX_BYTES=0"
        [ $v = nccl ] && lib=nccl
        env $env timeout 250 python3 -m ucxx_go.launch -n 4 $b --lib $lib --out "$r/r${round}_$v.json" > "$r/r${round}_$v.log" 2>&1
        echo "round $round $v rc=$?"
    done
done
rm -f "$r"/*.rank*
tar -C "$r" -czf "$OUT/bcast_waits.tgz" .
