#!/bin/bash
# Session 34: Dask on one host, tcp against ucxgo with its defaults and with CMA's rendezvous from 4 MiB
# (UCX_CMA_BW=11145MBs UCX_RNDV_THRESH=auto,intra:4M,inter:256K), 3 rounds alternating, rechunk first and again.
root=$(git rev-parse --show-toplevel); cd "$root"
out=benchmarks/results/session34/dask_cma
for round in 1 2 3; do
  for cfg in tcp default cma; do
    if [ $cfg = tcp ]; then p=tcp; else p=ucxgo; fi
    if [ $cfg = cma ]; then export UCX_CMA_BW=11145MBs UCX_RNDV_THRESH=auto,intra:4M,inter:256K; else unset UCX_CMA_BW UCX_RNDV_THRESH; fi
    echo "== round $round $cfg $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    LD_LIBRARY_PATH=$root/.ucx/lib UCX_NET_DEVICES=lo timeout 600 .venv/bin/python benchmarks/dask_bench.py --protocols $p \
        --workers 2 --gib 1 --rechunk-again 4 --json $out/r${round}_$cfg.json 2>&1 | grep -E "^network|^p2p|^transpose|^2,000"
  done
done
echo DONE
