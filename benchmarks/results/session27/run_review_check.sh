#!/usr/bin/env bash
# Session 27: the stream-ordered tests once more after the review's fixes (4ff0115),
# on 4 GPUs and with the ranks sharing GPU 0.
source .devkit/activate.sh
export PYTHONPATH=/tmp/ucxxgo-site:$PYTHONPATH UCX_NET_DEVICES=lo
timeout 100 python3 -m pytest -q -x tests/gpu/test_ordered_collectives_gpu.py > "$OUT/ordered4.txt" 2>&1; echo "4 GPUs rc=$?: $(tail -1 "$OUT/ordered4.txt")"
CUDA_VISIBLE_DEVICES=0 timeout 60 python3 -m pytest -q -x tests/gpu/test_ordered_collectives_gpu.py > "$OUT/ordered1.txt" 2>&1; echo "1 GPU rc=$?: $(tail -1 "$OUT/ordered1.txt")"
