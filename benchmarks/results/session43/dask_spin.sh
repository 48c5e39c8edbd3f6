#!/usr/bin/env bash
# Session 43 (issue 26) on the GPU machine's 16 cores (Dask installed as for echo_spin.sh): dask_bench.py
# (4 workers, 1.5 GiB, as machine.sh's dask step) for each of VARIANTS (default "tcp ucxgo"; ucxgo-sNNN:
# ucxgo with UCXGO_SPIN_US=NNN) in ROUNDS (a list of round numbers, default "1 2 3"), the order turned round
# every other round. DEADLINE (epoch seconds): no run starts after DEADLINE - 110. Json and logs into
# $OUT/dask, tarred as $OUT/dask_$TAG.tgz; one summary line a run (dask_summary.py) in $OUT/dask_$TAG.txt.
set -u
out=${OUT:-/tmp/s43}
mkdir -p "$out/dask"
variants=${VARIANTS:-"tcp ucxgo"}
tag=${TAG:-runs}
for round in ${ROUNDS:-1 2 3}; do
  order=$variants; [ $((round % 2)) = 0 ] && order=$(tr ' ' '\n' <<< "$variants" | tac | paste -sd' ')
  for v in $order; do
    if [ -n "${DEADLINE:-}" ] && [ $(( $(date +%s) + 110 )) -gt "$DEADLINE" ]; then
        echo "dask round $round $v: skipped (deadline)" | tee -a "$out/dask_$tag.txt"; continue
    fi
    envs=(UCXGO_AB=1); case $v in *-s*) envs=(UCXGO_SPIN_US=${v#*-s});; esac
    t0=$(date +%s)
    env "${envs[@]}" timeout 200 python3 benchmarks/dask_bench.py --protocols "${v%-s*}" --workers 4 --gib 1.5 \
        --json "$out/dask/r${round}_$v.json" > "$out/dask/r${round}_$v.log" 2>&1
    rc=$?
    echo "dask round $round $v rc=$rc ($(( $(date +%s) - t0 )) s): $(python3 benchmarks/gpu/dask_summary.py "$out/dask/r${round}_$v.json" 2>&1 | tail -1)" |
        tee -a "$out/dask_$tag.txt"
  done
done
tar -C "$out/dask" -czf "$out/dask_$tag.tgz" . && rm -rf "$out/dask"
