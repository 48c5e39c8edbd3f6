#!/usr/bin/env bash
# Session 29: vec on 2 GPUs, the DAG's reset with its prefetch to the host (default) and
# with the CPU's faults moving the pages (DAG_RESET_BY_FAULTS=1, as cupy-managed's reset), 2 rounds.
bash benchmarks/gpu/machine.sh > $OUT/machine.log 2>&1
source .devkit/activate.sh
export PYTHONPATH=/tmp/ucxxgo-site:$PYTHONPATH UCX_NET_DEVICES=lo
for r in 1 2; do for f in 0 1; do
  DAG_RESET_BY_FAULTS=$f timeout 150 python3 benchmarks/dag/run.py --multi-gpu --shapes vec,bs --backends dag-minmax-transfer-time,cupy-managed \
    --budget-s 100 --item-timeout 60 --out $OUT/vec_f${f}_r$r.json > $OUT/vec_f${f}_r$r.log 2>&1
  echo "faults=$f round $r rc=$?"; grep -E "^\[.*\]   (dag|cupy)" $OUT/vec_f${f}_r$r.log
done; done
rm -f $OUT/*.md $OUT/*.json
