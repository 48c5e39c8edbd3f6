#!/usr/bin/env bash
# Session 42's study on the GPU machine (16 cores, one H200), run after machine.sh has built
# ucxx_go and installed Dask (PYTHONPATH as machine.sh sets it):
#   bash benchmarks/results/session42/device_study.sh host p2p rma
#   host  what 1 MiB between two processes costs on this host: the CPU, one core's copy
#         (numpy), UCX's own ucx_perftest (tag_bw, busy polling) by transport and core pair,
#         and the README demo pinned to two cores and free
#   p2p   distributed's p2p rechunk with its comm-send metrics (session41/p2p_metrics.py),
#         4 workers, 1.5 GiB, tcp and ucxgo in alternated order, 3 rounds
#   rma   rma_rndv_probe.c: a peer's stock UCX putting / getting GPU memory at an address
#         of a context without remote memory access (RMA rendezvous)
set -u
out=${OUT:-/tmp/s42}
mkdir -p "$out"
here=benchmarks/results
ucx=$(python3 -c 'import libucx, os; print(os.path.dirname(os.path.abspath(libucx.__file__)))') || exit 1
for step in "$@"; do
    case $step in
    host)
        lscpu | grep -E "^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA|L2|L3|CPU max MHz)"
        taskset -c 0 python3 - <<'PY'
import numpy as np, time
for n in (1 << 20, 8 << 20, 64 << 20):
    a = np.ones(n, np.uint8); b = np.empty_like(a); reps = max(20, (2 << 30) // n)
    np.copyto(b, a); t = time.perf_counter()
    for _ in range(reps):
        np.copyto(b, a)
    print(f"numpy copy {n >> 20} MiB, one core: {n * reps / (time.perf_counter() - t) / 1e6:,.0f} MB/s")
PY
        last=$(( $(nproc) - 1 ))
        port=13400
        for tls in ${TLS_LIST:-default "posix,self" "sysv,self" "posix,cma,self"}; do
            for pair in "0 1" "0 $last"; do
                set -- $pair; port=$((port + 1))
                envs=(); [ "$tls" != default ] && envs=(UCX_TLS=$tls)
                env "${envs[@]}" LD_LIBRARY_PATH=$ucx/lib taskset -c "$1" timeout 60 "$ucx/bin/ucx_perftest" -p $port \
                    > "$out/perf_srv.log" 2>&1 &
                for _ in $(seq 100); do grep -q "Waiting for connection" "$out/perf_srv.log" 2>/dev/null && break; sleep 0.1; done
                for t in tag_bw tag_lat; do
                    [ $t = tag_lat ] && { env "${envs[@]}" LD_LIBRARY_PATH=$ucx/lib taskset -c "$1" timeout 60 \
                        "$ucx/bin/ucx_perftest" -p $port > "$out/perf_srv.log" 2>&1 &
                        for _ in $(seq 100); do grep -q "Waiting for connection" "$out/perf_srv.log" 2>/dev/null && break; sleep 0.1; done; }
                    r=$(env "${envs[@]}" LD_LIBRARY_PATH=$ucx/lib taskset -c "$2" timeout 60 "$ucx/bin/ucx_perftest" 127.0.0.1 \
                        -p $port -t $t -s 1048576 -n 2000 -w 200 2>&1 | grep -E "Final|^ +[0-9]" | tail -1)
                    echo "ucx_perftest $t 1 MiB tls=$tls cores $1,$2: $r"
                    wait
                done
            done
        done
        echo "(ucx_perftest columns: iterations, typical lat us, avg lat, overall lat, avg bw MB/s, overall bw, msgrate avg, overall;"
        echo " tag_lat's latencies are half a round trip; the demo's bandwidth awaits each send, one 1 MiB message at a time)"
        for pin in "taskset -c 0,1" "taskset -c 0,$last" ""; do
            echo "== demo ${pin:-unpinned}"
            (cd /tmp && $pin timeout 90 python3 "$OLDPWD/benchmarks/demo.py" --quick 2>&1 | grep "bandwidth\|round trip p50")
        done
        ;;
    p2p)
        for round in 1 2 3; do
            order="tcp ucxgo"; [ $((round % 2)) = 0 ] && order="ucxgo tcp"
            for p in $order; do
                timeout 250 python3 $here/session41/p2p_metrics.py "$p" 4 1.5 2>&1 | grep -E "^(tcp|ucxgo) run" |
                    sed "s/^/round $round /" | tee -a "$out/p2p_rounds.txt"
            done
        done
        ;;
    rma)
        gcc -O1 -o /tmp/rma_probe $here/session42/rma_rndv_probe.c -I"$ucx/include" -L"$ucx/lib" -lucp -lucs -ldl || exit 9
        for c in "p y c all" "g y c all" "p n c all" "p y h all" "p y c all all" "g y c all all" "p y c tcp"; do
            f=$out/rma_${c// /_}.txt
            LD_LIBRARY_PATH=$ucx/lib UCX_NET_DEVICES=lo timeout 40 /tmp/rma_probe $c > "$f" 2>&1
            echo "rma probe '$c' rc=$?: $(grep RESULT "$f")"
            grep -B1 -A8 "remote memory" "$f" | cut -c32- | grep -v "^-*$" | head -12
        done
        ;;
    esac
done
