#!/usr/bin/env bash
# Runs tests/gpu's one-rank ordered test body directly, its whole stderr kept (pytest's message cuts it).
source .devkit/activate.sh
export PYTHONPATH=/tmp/ucxxgo-site:$PYTHONPATH UCX_NET_DEVICES=lo
python3 - <<'PY' > /tmp/one_rank.py
import sys; sys.path[:0] = ["tests/gpu", "tests"]
import test_ordered_collectives_gpu as t
print(t.ONE_RANK.replace("@TESTS@", t.TESTS))
PY
grep -n "TESTS\|sys.path" /tmp/one_rank.py | head -3
for i in 1 2; do
  timeout 80 python3 -m ucxx_go.launch -n 1 --timeout 70 /tmp/one_rank.py > "$OUT/one_rank_$i.out" 2> "$OUT/one_rank_$i.err"
  echo "one-rank run $i rc=$?"; tail -3 "$OUT/one_rank_$i.out"
done
