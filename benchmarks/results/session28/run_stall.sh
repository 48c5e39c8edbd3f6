#!/usr/bin/env bash
# Session 28: stall_probe.py, three launches with the defaults and two with a 2 ms patience.
source .devkit/activate.sh
export PYTHONPATH=/tmp/ucxxgo-site:$PYTHONPATH UCX_NET_DEVICES=lo
n=$(nvidia-smi -L | wc -l)
for v in d1 s1 d2 s2 d3; do
    e=""; [ "${v:0:1}" = s ] && e="SPIN_US=2000"
    env $e timeout 100 python3 -m ucxx_go.launch -n "$n" benchmarks/results/session28/stall_probe.py allreduce,broadcast 16 \
        > "$OUT/stall_$v.txt" 2>&1
    echo "== $v rc=$? $e"; grep median "$OUT/stall_$v.txt"
done
