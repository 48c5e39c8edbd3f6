#!/usr/bin/env bash
# For the next machine session (2+ GPUs), first: session 28's device calls off the caller's
# thread were never run on a GPU. tests/gpu whole (with the gate test,
# test_device_calls_leave_the_event_loop_free), loop_probe.py (its gate part tells whether the
# loop stays free behind a busy stream) and the ordered tests with both ranks on GPU 0.
source .devkit/activate.sh
export PYTHONPATH=/tmp/ucxxgo-site:$PYTHONPATH UCX_NET_DEVICES=lo
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpus.txt"
bash benchmarks/gpu/machine.sh tests 2>&1 | grep "tests/gpu"
timeout 60 python3 -m ucxx_go.launch -n 2 benchmarks/results/session28/loop_probe.py 2>&1 | grep -E "^rank|Error" | tee "$OUT/loop_probe.txt"
CUDA_VISIBLE_DEVICES=0 timeout 100 python3 -m pytest -q tests/gpu/test_ordered_collectives_gpu.py > "$OUT/ordered_1gpu.txt" 2>&1
echo "ordered tests, one GPU: $(tail -1 "$OUT/ordered_1gpu.txt")"
