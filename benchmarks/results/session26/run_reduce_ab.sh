#!/usr/bin/env bash
# Session 26, on the 4-GPU machine after the kit (.devkit/alt = the tree before the
# fused reduction, benchmarks/gpu/alt_tree.sh --rev fb33dbd~1): AB_ROUNDS alternating
# rounds of collectives_bench.py (ucxx and NCCL, reduce_scatter and allreduce, 16 MiB
# to 1 GiB) and first_call.py with each build.
set -u
AB_ROUNDS=${AB_ROUNDS:-2} AB_CMD='first=benchmarks/results/session26/first_call.py;
timeout 120 python3 -m ucxx_go.launch -n 4 $first $AB_OUT/first_call.json 2>&1 | grep -v Warn | tail -2;
for lib in ucxx nccl; do
  timeout 250 python3 -m ucxx_go.launch -n 4 benchmarks/gpu/collectives_bench.py --lib $lib \
    --ops reduce_scatter,allreduce --min-bytes 16777216 --max-bytes 1073741824 --iters 32 --budget-s 90 \
    --out $AB_OUT/$lib.json > $AB_OUT/$lib.log 2>&1; echo "$lib rc=$?"; rm -f $AB_OUT/$lib.json.rank*
done' bash benchmarks/gpu/machine.sh ab
