#!/bin/bash
cd /work/main
for r in 1 2 3; do
  for v in default auto; do
    if [ $v = auto ]; then export UCX_RNDV_THRESH=auto; else unset UCX_RNDV_THRESH; fi
    timeout 900 .venv/bin/python benchmarks/dask_netns.py --rounds 1 --json /tmp/s25/dask/${v}_$r.json --out /tmp/s25/dask/${v}_$r.md > /tmp/s25/dask/${v}_$r.log 2>&1
    echo "$v $r rc=$?"
  done
done
