#!/usr/bin/env bash
# Session 29, first machine call after the kit: the gate probe with fresh and warm buffers.
bash benchmarks/gpu/machine.sh > $OUT/machine.log 2>&1
source .devkit/activate.sh
export PYTHONPATH=/tmp/ucxxgo-site:$PYTHONPATH UCX_NET_DEVICES=lo
for w in 1; do
  PROBE_WARM=$w timeout 70 python3 -m ucxx_go.launch -n 2 --timeout 45 benchmarks/results/session29/gate_probe.py > $OUT/probe_$w.txt 2>&1
  echo "warm=$w rc=$?"; tail -30 $OUT/probe_$w.txt
done
timeout 150 python3 -m pytest -q tests/gpu/test_ordered_collectives_gpu.py > $OUT/ordered.txt 2>&1; tail -3 $OUT/ordered.txt
CUDA_VISIBLE_DEVICES=0 timeout 150 python3 -m pytest -q tests/gpu/test_ordered_collectives_gpu.py > $OUT/ordered_1gpu.txt 2>&1; tail -3 $OUT/ordered_1gpu.txt
