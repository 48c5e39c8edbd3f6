#!/bin/bash
# Session 30: Dask on one host, tcp against ucxgo in thread and loop mode (UCXGO_PROGRESS_MODE; Dask's
# processes take loop under `auto` on this 2-vCPU VM), 5 rounds alternating, as session 16's dask_modes.
root=$(git rev-parse --show-toplevel); cd "$root"
out=benchmarks/results/session30/dask_modes
for round in 1 2 3 4 5; do
  for cfg in tcp thread loop; do
    if [ $cfg = tcp ]; then p=tcp; mode=thread; else p=ucxgo; mode=$cfg; fi
    echo "== round $round $cfg $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    UCXGO_PROGRESS_MODE=$mode LD_LIBRARY_PATH=$root/.ucx/lib UCX_NET_DEVICES=lo timeout 600 .venv/bin/python \
        benchmarks/dask_bench.py --protocols $p --workers 2 --gib 1 --json $out/r${round}_$cfg.json 2>&1 | grep -v "^running\|WARNING"
  done
done
echo DONE
