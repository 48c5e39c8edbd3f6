#!/bin/bash
# local.sh ROUNDS SIZES N CONFIG... : comm echo on one host (loopback), alternating
R=$1; SZ=$2; N=$3; shift 3
for r in $(seq $R); do
  for c in "$@"; do
    IFS=';' read -ra P <<< "$c"; proto=${P[0]}; envs=("${P[@]:1}")
    port=$((43000 + RANDOM % 2000))
    env "${envs[@]}" UCX_NET_DEVICES=lo ${PYTHON:-python} $(dirname $0)/comm_echo.py server $proto 127.0.0.1 $port $SZ $N > /tmp/local_echo_srv.out 2>&1 &
    for i in $(seq 100); do grep -q ready /tmp/local_echo_srv.out && break; sleep 0.05; done
    echo "$r $c $(env "${envs[@]}" UCX_NET_DEVICES=lo ${PYTHON:-python} $(dirname $0)/comm_echo.py client $proto 127.0.0.1 $port $SZ $N 2>&1 | tail -1)"
    wait
  done
done
