#!/usr/bin/env bash
# Session 41's study on the GPU machine's 16 cores (issue 26), run after machine.sh has
# built ucxx_go and installed Dask (PYTHONPATH set as machine.sh sets it):
#   bash benchmarks/results/session41/device_study.sh echo veth netns-ab
#   echo      distributed's comm echo on one host (loopback), tcp and ucxgo, 3 alternating
#             rounds (session24/scripts/comm_echo.py): the comm's share of Dask's echo
#   veth      the raw one-way stream between two namespaces (issue26_tcp_veth/driver.py),
#             4 in flight and 1, socket stream / ucxx_go / ucxx_go with UCX's own threshold
#   netns-ab  dask_netns.py, 2 rounds with our defaults and 2 with UCX_RNDV_THRESH=auto
set -u
out=${OUT:-/tmp/s41}
mkdir -p "$out"
command -v ip >/dev/null || export PATH=$PWD/.devkit-ip:$PATH
here=benchmarks/results
for step in "$@"; do
    case $step in
    echo)
        for round in 1 2 3; do
            order="tcp ucxgo"; [ $((round % 2)) = 0 ] && order="ucxgo tcp"
            for p in $order; do
                port=$((42000 + round * 10 + ${#p}))
                log=$out/echo_server_$p$round.log
                timeout 200 python3 $here/session24/scripts/comm_echo.py server $p 127.0.0.1 $port 1 0 > "$log" 2>&1 &
                for _ in $(seq 300); do grep -q ready "$log" 2>/dev/null && break; sleep 0.1; done
                echo "echo round $round $p: $(timeout 150 python3 $here/session24/scripts/comm_echo.py client $p 127.0.0.1 $port \
                    1048576,10485760,52428800 20 2>&1 | tail -1) (µs, median round trip)"
                wait
            done
        done
        ;;
    veth)
        python3 $here/issue26_tcp_veth/driver.py 3 1048576x200,10485760x20 4 tcp ucx "ucx;UCX_RNDV_THRESH=auto" 2>&1 | tail -4
        SETUP=0 python3 $here/issue26_tcp_veth/driver.py 3 1048576x100,10485760x10 1 tcp ucx "ucx;UCX_RNDV_THRESH=auto" 2>&1 | tail -4
        ip netns del vbA; ip netns del vbB
        ;;
    netns-ab)
        for round in 1 2; do
            for v in ours auto; do
                if [ $v = auto ]; then export UCX_RNDV_THRESH=auto; else unset UCX_RNDV_THRESH; fi
                timeout 280 python3 benchmarks/dask_netns.py --rounds 1 --json "$out/netns_${v}_$round.json" \
                    > "$out/netns_${v}_$round.log" 2>&1
                echo "netns $v round $round rc=$?: $(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))["results"]
t, u = d["tcp"][0], d["ucxgo"][0]
print(" ".join(f"{k}={u[k] / t[k]:.2f}x" for k in ("transpose_s", "transpose_again_s", "small_tasks_s")),
      " ".join(f"{k}={u["network_MBps"][k] / t["network_MBps"][k]:.2f}x" for k in t["network_MBps"]))' "$out/netns_${v}_$round.json" 2>&1 | tail -1)"
            done
        done
        unset UCX_RNDV_THRESH
        ;;
    esac
done
