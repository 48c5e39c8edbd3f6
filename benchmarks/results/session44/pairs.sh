#!/usr/bin/env bash
# Session 44: dask_pairs_echo.py with NPAIRS in $PAIRS (default "1 2 4"), tcp and ucxgo (defaults) alternating,
# ROUNDS rounds (default 3); one line a run into $OUT/dask_pairs.txt.
set -u
out=${OUT:-/tmp/s44}; mkdir -p "$out"
here=benchmarks/results/session44
for r in $(seq "${ROUNDS:-3}"); do
  for p in ${PAIRS:-1 2 4}; do
    order="tcp ucxgo"; [ $((r % 2)) = 0 ] && order="ucxgo tcp"
    for proto in $order; do
      echo "round $r pairs $p $proto: $(PROTO=$proto NPAIRS=$p timeout 120 python3 $here/dask_pairs_echo.py 2>/dev/null | tail -1)"
    done
  done
done 2>&1 | tee -a "$out/dask_pairs.txt"
