#!/usr/bin/env bash
# cg on every GPU with the copies' destination prefetch (UCXGO_DAG_COPY_PREFETCH_DST=1, the new
# default) against without (0), two rounds alternating; then the other shapes once with it.
source .devkit/activate.sh >/dev/null 2>&1
export PYTHONPATH=/tmp/ucxxgo-site:$PYTHONPATH UCX_NET_DEVICES=lo
timeout 60 python3 benchmarks/results/session31/managed_copy.py > "$OUT/managed_copy.txt" 2>&1; echo "managed_copy rc=$?"; cat "$OUT/managed_copy.txt"
B=dag-min-transfer-size,dag-minmin-transfer-time,dag-minmax-transfer-time,cupy-multi,cupy-managed
for r in 1 2; do for pd in 0 1; do
  UCXGO_DAG_COPY_PREFETCH_DST=$pd timeout 100 python3 benchmarks/dag/run.py --multi-gpu --shapes cg --backends $B \
    --budget-s 80 --item-timeout 90 --out "$OUT/cg_pd${pd}_r$r.json" > "$OUT/cg_pd${pd}_r$r.log" 2>&1
  echo "cg prefetch-dst=$pd round $r rc=$?"; grep -E "^\[.*\]   (dag|cupy)" "$OUT/cg_pd${pd}_r$r.log"
done; done
timeout 150 python3 benchmarks/dag/run.py --multi-gpu --shapes vec,bs,ml --backends $B --budget-s 130 --item-timeout 60 \
  --out "$OUT/others_pd1.json" > "$OUT/others_pd1.log" 2>&1; echo "vec,bs,ml rc=$?"; grep -E "^\[.*\]   (dag|cupy)|NOT met|: met" "$OUT/others_pd1.log"
cd "$OUT" && tar czf /tmp/r.tgz . && find . -type f -delete && mv /tmp/r.tgz .
