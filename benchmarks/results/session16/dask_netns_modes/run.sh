#!/bin/bash
cd /work/main
for r in 1 2; do
for m in thread loop; do
  echo "== $r $m $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
  UCXGO_PROGRESS_MODE=$m timeout 900 .venv/bin/python benchmarks/dask_netns.py --rounds 1 --json /tmp/netns/r${r}_$m.json --out /tmp/netns/r${r}_$m.md 2>&1 | tail -12
done
done
echo DONE
