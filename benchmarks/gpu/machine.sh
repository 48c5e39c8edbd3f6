#!/usr/bin/env bash
# Runs on the lent GPU machine (no Go, no network), from the repository's root, after
# the kit's three calls (.ci/device-kit.sh): builds ucxx_go from the working tree into
# /tmp/ucxxgo-site once per machine (REBUILD=1: again), then each step named, results
# under $OUT (or ./gpu-out):
#
#   tests         pytest tests/gpu
#   collectives   ucxx_go against NCCL (torch.distributed), one rank per GPU, ROUNDS
#                 interleaved rounds (default 4) of collectives_bench.py to MAXB bytes
#                 (default 2 MiB), ITERS calls a size (default 60); tarred as collectives.tgz
#   latency       latency_pieces.py with the defaults and with UCXGO_DEVICE_PROGRAMS=0
#   dag           the DAG on every GPU (benchmarks/dag/run.py --multi-gpu, data-aware
#                 policies against hand-placed and managed CuPy)
#
#   bash benchmarks/gpu/machine.sh tests collectives
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
k=$PWD/.devkit
cp /tmp/kit/go.tar.xz "$k/" 2>/dev/null
mkdir -p "$k/wheels" && cp /tmp/kit/libucx_cu13-*.whl "$k/wheels/" 2>/dev/null
# shellcheck disable=SC1091
source "$k/activate.sh" || exit 2
vet=$GOROOT/pkg/tool/linux_amd64/vet
[ -x "$vet" ] || { xz -dc /tmp/kit/vet.xz > "$vet" && chmod +x "$vet"; }
export GOPROXY=file://$k/gomodproxy GOSUMDB=off GOFLAGS=-mod=mod UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo} PYTHONUNBUFFERED=1
[ -n "${REBUILD:-}" ] && rm -rf /tmp/ucxxgo-site
if ! ls /tmp/ucxxgo-site/ucxx_go/_pybridge*.so >/dev/null 2>&1; then
    t0=$(date +%s)
    python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/ucxxgo-site . > "$out/build.log" 2>&1 ||
        { tail -30 "$out/build.log"; exit 1; }
    echo "ucxx_go built in $(( $(date +%s) - t0 )) s"
fi
export PYTHONPATH=/tmp/ucxxgo-site${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi -L > "$out/gpus.txt"
for step in "$@"; do
    case $step in
    tests)
        timeout 400 python3 -m pytest -q tests/gpu > "$out/tests_gpu.txt" 2>&1
        echo "tests/gpu rc=$?: $(tail -1 "$out/tests_gpu.txt")"
        ;;
    collectives)
        r=$(mktemp -d)
        b="benchmarks/gpu/collectives_bench.py --budget-s ${BUDGET:-12} --iters ${ITERS:-60} --max-bytes ${MAXB:-2097152}"
        n=$(nvidia-smi -L | wc -l)
        for round in $(seq "${ROUNDS:-4}"); do
            for lib in ucxx nccl; do
                timeout 300 python3 -m ucxx_go.launch -n "$n" $b --lib $lib --out "$r/r${round}_$lib.json" > "$r/r${round}_$lib.log" 2>&1
                echo "collectives round $round $lib rc=$?"
            done
        done
        rm -f "$r"/*.rank*
        tar -C "$r" -czf "$out/collectives.tgz" .
        ;;
    latency)
        n=$(nvidia-smi -L | wc -l)
        for programs in 1 0; do
            TAG=programs$programs UCXGO_DEVICE_PROGRAMS=$programs timeout 120 python3 -m ucxx_go.launch -n "$n" \
                benchmarks/gpu/latency_pieces.py "$out" 2>&1 | grep -v Warn | tail -6
        done
        ;;
    dag)
        timeout 330 python3 benchmarks/dag/run.py --multi-gpu --shapes vec,bs,ml \
            --backends dag-1gpu,dag-min-transfer-size,dag-minmin-transfer-time,dag-minmax-transfer-time,cupy-multi,cupy-managed \
            --budget-s 250 --item-timeout 100 --out "$out/dag.json" > "$out/dag.log" 2>&1
        echo "dag rc=$?"; grep "^| \|NOT met\|met\*\*" "$out/dag.log" | cut -c1-300
        ;;
    *)
        echo "machine.sh: unknown step $step" >&2
        exit 2
        ;;
    esac
done
