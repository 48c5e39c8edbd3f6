#!/bin/bash
# Session 34: Dask on one host, tcp against ucxgo with the received-frame cache (default) and without it
# (UCXGO_RECV_FRAME_CACHE=0), 3 rounds alternating; the workers are started by nannies (MALLOC_TRIM_THRESHOLD_).
root=$(git rev-parse --show-toplevel); cd "$root"
out=benchmarks/results/session34/dask_cache
for round in 1 2 3; do
  for cfg in tcp cache nocache; do
    if [ $cfg = tcp ]; then p=tcp; else p=ucxgo; fi
    if [ $cfg = nocache ]; then bytes=0; else bytes=67108864; fi
    echo "== round $round $cfg $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    UCXGO_RECV_FRAME_CACHE=$bytes LD_LIBRARY_PATH=$root/.ucx/lib UCX_NET_DEVICES=lo timeout 600 .venv/bin/python \
        benchmarks/dask_bench.py --protocols $p --workers 2 --gib 1 --json $out/r${round}_$cfg.json 2>&1 | grep -v "^running\|WARNING"
  done
done
echo DONE
