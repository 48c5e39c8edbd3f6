#!/usr/bin/env bash
# Session 28, the last machine session: tests/gpu whole with today's tree (the 2-rank
# slicing rule, device calls waiting off the caller's thread); the new event-loop test
# against .devkit/alt (the tree before that change: it must fail there); one round of the
# collectives (latency to 2 MiB, bus bandwidth 16 MiB-1 GiB): ordered, NCCL, ordinary.
source .devkit/activate.sh
export PYTHONPATH=/tmp/ucxxgo-site:$PYTHONPATH UCX_NET_DEVICES=lo
# Two calls (a machine call runs 10 minutes at most): `run_final.sh tests`, then `run_final.sh collectives`.
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpus.txt"
if [ "$1" = tests ]; then
bash benchmarks/gpu/machine.sh tests 2>&1 | grep "tests/gpu"
AB_ROUNDS=1 TAG=_loopfree AB_CMD='timeout 120 python3 -m pytest -q -x tests/gpu/test_ordered_collectives_gpu.py -k event_loop > $AB_OUT/loop.txt 2>&1; echo "$AB_TAG: $(tail -1 $AB_OUT/loop.txt)"; grep -o "the event loop stood still[^)]*" $AB_OUT/loop.txt | head -2' \
    bash benchmarks/gpu/machine.sh ab 2>&1 | grep -v WARN | tail -3
tar -xzOf "$OUT/ab_loopfree.tgz" ./base_r1.log ./alt_r1.log
else
ROUNDS=1 BUDGET=6 ITERS=40 LIBS="ucxx-ordered nccl ucxx" TAG=_latency bash benchmarks/gpu/machine.sh collectives 2>&1 | grep -v WARN | tail -3
ROUNDS=1 ITERS=32 MINB=16777216 MAXB=1073741824 BUDGET=60 LIBS="ucxx-ordered nccl ucxx" TAG=_busbw bash benchmarks/gpu/machine.sh collectives 2>&1 | grep -v WARN | tail -3
fi
