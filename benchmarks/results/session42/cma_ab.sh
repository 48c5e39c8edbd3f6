#!/usr/bin/env bash
# Session 42 on the GPU machine's 16 cores (Dask installed as for echo_study.sh): Dask on one
# host with ucxgo as it is and with UCX's own rating of CMA (UCX_CMA_BW=11145MBs: tag
# rendezvous between processes by one CMA read instead of copies through shared memory):
# distributed's comm echo both ways, then dask_bench.py with tcp beside, ROUNDS alternated
# rounds (default 2).
set -u
out=${OUT:-/tmp/s42}
mkdir -p "$out"
S=benchmarks/results/session24/scripts/comm_echo.py
port=13800
for v in ucxgo ucxgo-cma ucxgo ucxgo-cma; do
    envs=(UCXGO_AB=1); [ "$v" = ucxgo-cma ] && envs=(UCX_CMA_BW=11145MBs)
    port=$((port + 1))
    env "${envs[@]}" timeout 100 python3 $S server ucxgo 127.0.0.1 $port 1 0 > "$out/echo_srv.log" 2>&1 &
    for _ in $(seq 300); do grep -q ready "$out/echo_srv.log" 2>/dev/null && break; sleep 0.1; done
    echo "echo $v: $(env "${envs[@]}" timeout 100 python3 $S client ucxgo 127.0.0.1 $port 65536,1048576,10485760 200 2>&1 | tail -1)"
    wait
done
for round in $(seq "${ROUNDS:-2}"); do
    order="tcp ucxgo ucxgo-cma"; [ $((round % 2)) = 0 ] && order="ucxgo-cma ucxgo tcp"
    for v in $order; do
        envs=(UCXGO_AB=1); [ "$v" = ucxgo-cma ] && envs=(UCX_CMA_BW=11145MBs)
        env "${envs[@]}" timeout 250 python3 benchmarks/dask_bench.py --protocols "${v%-cma}" --workers 4 --gib 1.5 \
            --json "$out/cma_r${round}_$v.json" > "$out/cma_r${round}_$v.log" 2>&1
        echo "dask round $round $v rc=$?: $(python3 benchmarks/gpu/dask_summary.py "$out/cma_r${round}_$v.json" 2>&1 | tail -1)"
    done
done
