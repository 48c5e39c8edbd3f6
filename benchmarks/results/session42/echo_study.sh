#!/usr/bin/env bash
# Session 42 on the GPU machine's 16 cores, after machine.sh built ucxx_go and installed Dask
# (PYTHONPATH with /tmp/ucxxgo-site, /tmp/devkit-site, /tmp/dask-site): where distributed's
# comm echo of 64 KiB and 1 MiB goes with ucxgo (thread mode, as Dask picks on this machine),
# beside tcp; awaited 1 MiB sends; UCX's own 1 MiB and 64 KiB latency with our defaults.
set -u
out=${OUT:-/tmp/s42}
mkdir -p "$out"
here=benchmarks/results
ucx=$(python3 -c 'import libucx, os; print(os.path.dirname(os.path.abspath(libucx.__file__)))') || exit 1
ours="UCX_MM_ERROR_HANDLING=y UCX_ADAPTIVE_PROGRESS=n UCX_RNDV_FRAG_MEM_TYPES=host UCX_CMA_MEMORY_INVALIDATE=y UCX_CMA_BW=2000MBs UCX_RNDV_THRESH=auto,inter:256K UCX_TCP_PUT_ENABLE=n"
port=13700
for s in 65536 1048576; do
    port=$((port + 1))
    env $ours LD_LIBRARY_PATH=$ucx/lib taskset -c 0 timeout 60 "$ucx/bin/ucx_perftest" -p $port -e > "$out/perf_srv.log" 2>&1 &
    for _ in $(seq 100); do grep -q "Waiting for connection" "$out/perf_srv.log" 2>/dev/null && break; sleep 0.1; done
    echo "ucx_perftest tag_lat $s, our UCX defaults, -e: $(env $ours LD_LIBRARY_PATH=$ucx/lib taskset -c 1 timeout 60 \
        "$ucx/bin/ucx_perftest" 127.0.0.1 -p $port -e -t tag_lat -s $s -n 2000 -w 200 2>&1 | grep Final | tr -s ' ')"
    wait
done
for cfg in "" "UCXGO_INLINE_WAIT_US=0" "UCX_CMA_BW=11145MBs"; do
    (cd $here/session42 && TAG="awaited 1 MiB sends ${cfg:-defaults}" env $cfg timeout 120 python3 awaited_sends.py)
done
S=$here/session24/scripts/comm_echo.py
for round in 1 2; do
  for size in 65536 1048576; do
    for p in tcp ucxgo ucxgo-loop; do
        proto=${p%-loop}; envs=(UCXGO_PROGRESS_MODE=thread); [ "$p" = ucxgo-loop ] && envs=(UCXGO_PROGRESS_MODE=loop)
        port=$((port + 1))
        env "${envs[@]}" timeout 200 python3 $here/session42/echo_timing.py $S server "$proto" 127.0.0.1 $port 1 0 > "$out/echo_srv.log" 2>&1 &
        for _ in $(seq 300); do grep -q ready "$out/echo_srv.log" 2>/dev/null && break; sleep 0.1; done
        r=$(env "${envs[@]}" timeout 150 python3 $here/session42/echo_timing.py $S client "$proto" 127.0.0.1 $port $size 300 2>&1 |
            grep -v "^pybridge_Progress" | tr '\n' ' ')
        wait
        echo "echo round $round $p: $r | server $(grep -E '^pybridge_(Send|Recv)' "$out/echo_srv.log" | tr '\n' ' ')"
    done
  done
done
