#!/bin/bash
# after 3a3a1b7: Dask's default is UCX's threshold; "default" pins the plain-process one
cd /work/main
for r in 4 5 6; do
  for v in auto default; do
    if [ $v = default ]; then export UCX_RNDV_THRESH=auto,inter:256K; else unset UCX_RNDV_THRESH; fi
    timeout 900 .venv/bin/python benchmarks/dask_netns.py --rounds 1 --json /tmp/s25/dask/${v}_$r.json --out /tmp/s25/dask/${v}_$r.md > /tmp/s25/dask/${v}_$r.log 2>&1
    echo "$v $r rc=$?"
  done
done
