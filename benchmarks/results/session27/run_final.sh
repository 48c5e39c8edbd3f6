#!/usr/bin/env bash
# Session 27, the last machine session: tests/gpu with the final tree, a process's first
# GPU transfer (first_gpu_transfer.py: the NVML lookup now off its path; the +info
# variant, NVML started before, is the reference), and one round of the collectives
# (latency to 2 MiB, bus bandwidth 16 MiB-1 GiB) with stream-ordered calls, ordinary
# ones and NCCL.
source .devkit/activate.sh
export PYTHONPATH=/tmp/ucxxgo-site:$PYTHONPATH UCX_NET_DEVICES=lo
bash benchmarks/gpu/machine.sh tests 2>&1 | grep "tests/gpu"
timeout 150 python3 benchmarks/results/session26/first_gpu_transfer.py 3 > "$OUT/first_gpu_transfer.txt" 2>&1
echo "first transfer rc=$?"; cut -c1-160 "$OUT/first_gpu_transfer.txt"
ROUNDS=1 BUDGET=6 ITERS=40 LIBS="ucxx-ordered nccl ucxx" TAG=_latency bash benchmarks/gpu/machine.sh collectives 2>&1 | grep -v WARN | tail -3
ROUNDS=1 ITERS=32 MINB=16777216 MAXB=1073741824 BUDGET=60 LIBS="ucxx-ordered nccl ucxx" TAG=_busbw bash benchmarks/gpu/machine.sh collectives 2>&1 | grep -v WARN | tail -3
