#!/bin/bash
cd /work/main
for round in 1 2 3 4 5; do
  for cfg in tcp thread loop; do
    if [ $cfg = tcp ]; then p=tcp; mode=thread; else p=ucxgo; mode=$cfg; fi
    echo "== round $round $cfg $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    UCXGO_PROGRESS_MODE=$mode timeout 600 .venv/bin/python benchmarks/dask_bench.py --protocols $p --workers 2 --gib 1 --json /tmp/daskmodes/b_r${round}_$cfg.json 2>&1 | grep -v "^running"
  done
done
echo DONE
