#!/usr/bin/env bash
# Session 41: host messages of 1 MiB between two processes of the GPU machine (16 cores,
# UCX with CUDA): ucxx_go's demo and distributed's comm echo under three settings, and the
# protocol UCX chose for tag sends from host memory with the defaults. PYTHONPATH as
# machine.sh sets it, Dask installed.
S=benchmarks/results/session24/scripts/comm_echo.py
cd /tmp && UCX_PROTO_INFO=y timeout 60 python3 "$OLDPWD/benchmarks/demo.py" --quick 2>&1 |
    grep -A14 "intra-node cfg#[0-9]* *|$" | grep -A12 "tag_send\* from host" | head -16 | cut -c30-
cd "$OLDPWD"
for cfg in "" "UCX_CMA_BW=11145MBs" "UCX_CMA_BW=11145MBs UCX_RNDV_THRESH=auto,intra:4M,inter:256K"; do
    echo "== ${cfg:-defaults}"
    (cd /tmp && env $cfg timeout 60 python3 "$OLDPWD/benchmarks/demo.py" --quick 2>&1 | grep "bandwidth\|8 B round trip p50")
    for round in 1 2; do
        port=$((43100 + round + ${#cfg}))
        env $cfg timeout 60 python3 $S server ucxgo 127.0.0.1 $port 1 0 > /tmp/srv.log 2>&1 &
        for _ in $(seq 300); do grep -q ready /tmp/srv.log && break; sleep 0.1; done
        echo "comm echo ucxgo: $(env $cfg timeout 60 python3 $S client ucxgo 127.0.0.1 $port 1048576,10485760 50 | tail -1)"
        wait
    done
done
