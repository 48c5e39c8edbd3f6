#!/usr/bin/env bash
# Session 27: the mid-size slicing rule (core/collective/registry.go, midSliced), A/B on
# the GPU machine: tests/gpu with the rule, NCCL once on 4 and 2 ranks, then 3 rounds of
# ab_midsliced_cmd.sh with the working tree (the rule) and .devkit/alt (c5ed401, before).
source .devkit/activate.sh
export PYTHONPATH=/tmp/ucxxgo-site:$PYTHONPATH UCX_NET_DEVICES=lo
bash benchmarks/gpu/machine.sh tests 2>&1 | grep "tests/gpu"
b="benchmarks/gpu/collectives_bench.py --lib nccl --min-bytes 131072 --max-bytes 67108864 --iters 40 --budget-s 30"
mkdir -p "$OUT/nccl"
timeout 120 python3 -m ucxx_go.launch -n 4 $b --out "$OUT/nccl/n4.json" > "$OUT/nccl/n4.log" 2>&1; echo "nccl 4 rc=$?"
CUDA_VISIBLE_DEVICES=0,1 timeout 120 python3 -m ucxx_go.launch -n 2 $b --out "$OUT/nccl/n2.json" > "$OUT/nccl/n2.log" 2>&1; echo "nccl 2 rc=$?"
AB_ROUNDS=3 TAG=_midsliced AB_CMD='bash benchmarks/results/session27/ab_midsliced_cmd.sh' bash benchmarks/gpu/machine.sh ab 2>&1 | grep -v WARN | tail -8
