#!/usr/bin/env bash
# Session 28, first machine session: session 27's review fixes on a GPU for the first time
# (tests/gpu whole, the ordered tests on every GPU and on one shared GPU), then one round
# of the collectives (latency to 2 MiB, bus bandwidth 16 MiB-1 GiB): ordered, ordinary, NCCL.
source .devkit/activate.sh
export PYTHONPATH=/tmp/ucxxgo-site:$PYTHONPATH UCX_NET_DEVICES=lo
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpus.txt"
bash benchmarks/gpu/machine.sh tests 2>&1 | grep "tests/gpu"
bash benchmarks/results/session27/run_review_check.sh
ROUNDS=1 BUDGET=6 ITERS=40 LIBS="ucxx-ordered nccl ucxx" TAG=_latency bash benchmarks/gpu/machine.sh collectives 2>&1 | grep -v WARN | tail -3
ROUNDS=1 ITERS=32 MINB=16777216 MAXB=1073741824 BUDGET=60 LIBS="ucxx-ordered nccl ucxx" TAG=_busbw bash benchmarks/gpu/machine.sh collectives 2>&1 | grep -v WARN | tail -3
