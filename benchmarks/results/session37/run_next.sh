#!/usr/bin/env bash
# Session 37's machine steps (after .ci/device-kit.sh's calls; carry .devkit), one or more a call:
#   run_next.sh launchgo     the Go launch benchmarks (raw, raw polled by 1 and 2 spinning pollers, chain,
#                            independent), 3 counts, then BenchmarkLaunchChain alone under a CPU profile
#   run_next.sh launchpy     benchmarks/dag/launch_cost.py: a DAG launch's host time split (Python, the bridge,
#                            Go) beside CuPy's, then the bridge+go rows under a 5 kHz Go CPU profile
#   run_next.sh gotests      the Go tests that need a GPU (GOTESTS, default -v ./ucxx ./core/execution)
#   run_next.sh words        A/B of the GPU lanes' stream words (UCXGO_DAG_STREAM_WORDS=1, 0, twice each):
#                            launch_cost.py, the Go chain and independent benchmarks, the one-GPU cg and vec
#   run_next.sh cgmulti      the DAG's cg on every GPU (minmin against cupy-multi), stream words on and off,
#                            each under a 5 kHz Go CPU profile; then launch_cost.py
#   run_next.sh defer        configurations of the GPU lanes (stream words; every vertex deferred to the
#                            launchers, which linger 200 µs), 2 rounds: launch_cost.py and cg (on every GPU
#                            against cupy-multi where there are several, else the one-GPU suite's)
#   run_next.sh defer1       the one-GPU suite (every shape; dag-async, cupy-streams), every vertex deferred to
#                            the launchers (UCXGO_DAG_DEFER_ALL=1, linger 200 µs) or not, 2 rounds interleaved
#   run_next.sh defertests   the Go GPU tests (core/execution) and tests/gpu with every vertex deferred
#   run_next.sh dag1         the one-GPU suite's cg and vec, dag-async against cupy-streams
# The steps words, cgmulti and defer set UCXGO_DAG_STREAM_WORDS and UCXGO_DAG_DEFER_ALL, which only the
# code of their commits read (074af7b, 7fe7dc2; both reverted the same session): at later commits they compare
# one configuration with itself.
# Everything it writes goes back as one archive.
set -uo pipefail
bash benchmarks/gpu/machine.sh 2>&1 | grep -v "^WARNING"   # builds ucxx_go once, sets nothing else up
source .devkit/activate.sh
export GOPROXY=file://$PWD/.devkit/gomodproxy GOSUMDB=off GOFLAGS=-mod=mod UCX_NET_DEVICES=lo PYTHONUNBUFFERED=1
export PYTHONPATH=/tmp/ucxxgo-site:/tmp/devkit-site
ucx=$(python3 -c 'import libucx, os; print(os.path.dirname(os.path.abspath(libucx.__file__)))')
ln -sfn "$ucx" .ucx
for step in "$@"; do
case $step in
gotests)
    GOTESTS=${GOTESTS:--v ./ucxx ./core/execution} bash benchmarks/gpu/machine.sh gotests 2>&1 | grep -v "^WARNING"
    grep -E "^(--- FAIL|FAIL|ok|panic)|--- SKIP" "$OUT/gotests.txt" | head -40
    ;;
launchgo)
    LD_LIBRARY_PATH=$ucx/lib timeout 300 go test -run '^$' -bench 'Launch' -benchtime 20000x -count 3 \
        ./core/execution > "$OUT/launch_go.txt" 2>&1
    echo "launch benches rc=$?"; grep -E "^Benchmark" "$OUT/launch_go.txt"
    LD_LIBRARY_PATH=$ucx/lib timeout 200 go test -run '^$' -bench 'LaunchChain$' -benchtime 200000x \
        -cpuprofile "$OUT/launch_chain.pprof" -o "$OUT/execution.test" ./core/execution > "$OUT/launch_chain_prof.txt" 2>&1
    echo "chain profile rc=$?"; grep -E "^Benchmark" "$OUT/launch_chain_prof.txt"
    rm -f "$OUT/execution.test"
    ;;
launchpy)
    timeout 200 python3 benchmarks/dag/launch_cost.py --json "$OUT/launch_cost.json" \
        --go-cpu-profile "$OUT/launch_cost_go.pprof" --hz 5000 2>&1 | grep -v "cannot set cpu profile rate" \
        | tee "$OUT/launch_cost.txt"
    ;;
words)
    for round in 1 2; do
        for w in 1 0; do
            echo "== round $round, stream words $w"
            UCXGO_DAG_STREAM_WORDS=$w timeout 100 python3 benchmarks/dag/launch_cost.py --repeat 5 \
                --json "$OUT/launch_cost_w${w}_r$round.json" 2>&1 | grep "µs"
            UCXGO_DAG_STREAM_WORDS=$w LD_LIBRARY_PATH=$ucx/lib timeout 100 go test -run '^$' \
                -bench 'Launch(Chain|Independent)$' -benchtime 20000x ./core/execution 2>&1 | grep ^Bench \
                | tee "$OUT/launch_go_w${w}_r$round.txt"
            UCXGO_DAG_STREAM_WORDS=$w timeout 200 python3 benchmarks/dag/run.py --shapes cg,vec \
                --backends dag-async,cupy-streams --no-comm --no-micro --budget-s 100 \
                --out "$OUT/dag1_w${w}_r$round.json" > "$OUT/dag1_w${w}_r$round.log" 2>&1
            grep -E "^\| (cg|vec) " "$OUT/dag1_w${w}_r$round.md"
        done
    done
    ;;
cgmulti)
    for w in 1 0; do
        UCXGO_DAG_STREAM_WORDS=$w timeout 200 python3 benchmarks/dag/run.py --multi-gpu --shapes cg \
            --backends dag-minmin-transfer-time,cupy-multi --budget-s 120 --item-timeout 150 \
            --go-cpu-profile "$OUT/cg_w$w.pprof" --go-cpu-profile-hz 5000 --out "$OUT/cg_w$w.json" \
            > "$OUT/cg_w$w.log" 2>&1
        echo "cg words $w rc=$?"; grep -E "^\| cg " "$OUT/cg_w$w.md"
    done
    timeout 100 python3 benchmarks/dag/launch_cost.py --repeat 5 --json "$OUT/launch_cost.json" 2>&1 | grep "µs"
    ;;
defer)
    n=$(nvidia-smi -L | wc -l)
    for round in 1 2; do
        for cfg in w1 w0 w1d w0d; do
            env=(UCXGO_DAG_STREAM_WORDS=${cfg:1:1})
            [ "${cfg:2:1}" = d ] && env+=(UCXGO_DAG_DEFER_ALL=1 UCXGO_DAG_LAUNCHER_LINGER_US=200)
            echo "== round $round $cfg: ${env[*]}"
            env "${env[@]}" timeout 100 python3 benchmarks/dag/launch_cost.py --repeat 5 \
                --json "$OUT/launch_cost_${cfg}_r$round.json" 2>&1 | grep -E "^(cupy|dag) "
            if [ "$n" -gt 1 ]; then
                env "${env[@]}" timeout 200 python3 benchmarks/dag/run.py --multi-gpu --shapes cg \
                    --backends dag-minmin-transfer-time,cupy-multi --budget-s 120 --item-timeout 150 \
                    --out "$OUT/cgm_${cfg}_r$round.json" > "$OUT/cgm_${cfg}_r$round.log" 2>&1
                echo "rc=$?"; grep -E "^\| cg " "$OUT/cgm_${cfg}_r$round.md" | cut -d'|' -f4-6,10
            else
                env "${env[@]}" timeout 200 python3 benchmarks/dag/run.py --shapes cg,vec \
                    --backends dag-async,cupy-streams --no-comm --no-micro --budget-s 100 \
                    --out "$OUT/dag1_${cfg}_r$round.json" > "$OUT/dag1_${cfg}_r$round.log" 2>&1
                echo "rc=$?"; grep -E "^\| (cg|vec) " "$OUT/dag1_${cfg}_r$round.md" | cut -d'|' -f2,5-6,8
            fi
        done
    done
    ;;
defer1)
    for round in 1 2; do
        for d in 0 1; do
            UCXGO_DAG_DEFER_ALL=$d UCXGO_DAG_LAUNCHER_LINGER_US=200 timeout 250 python3 benchmarks/dag/run.py \
                --backends dag-async,cupy-streams --no-comm --no-micro --budget-s 200 \
                --out "$OUT/suite_d${d}_r$round.json" > "$OUT/suite_d${d}_r$round.log" 2>&1
            echo "== round $round defer-all $d rc=$?"
            grep -E "^\| (vec|bs|ml|hits|img|cg) " "$OUT/suite_d${d}_r$round.md" | cut -d'|' -f2,5-6,8,11
        done
    done
    ;;
defertests)
    export UCXGO_DAG_DEFER_ALL=1 UCXGO_DAG_LAUNCHER_LINGER_US=200
    GOTESTS="./core/execution" bash benchmarks/gpu/machine.sh gotests tests 2>&1 | grep -v "^WARNING"
    ;;
dag1)
    timeout 300 python3 benchmarks/dag/run.py --shapes cg,vec --backends dag-async,cupy-streams --no-comm \
        --no-micro --budget-s 200 --out "$OUT/dag1${TAG:-}.json" > "$OUT/dag1${TAG:-}.log" 2>&1
    echo "dag1 rc=$?"; cat "$OUT/dag1${TAG:-}.md" 2>/dev/null | head -20
    ;;
esac
done
cd "$OUT" && tar czf /tmp/results.tgz . && find . -type f -delete && mv /tmp/results.tgz .
