#!/usr/bin/env bash
# Runs on the lent GPU machine (no Go, no network), from the repository's root, after
# the kit's calls (.ci/device-kit.sh): builds ucxx_go from the working tree into
# /tmp/ucxxgo-site once per machine (REBUILD=1: again), then each step named, results
# under $OUT (or ./gpu-out):
#
#   tests         pytest tests/gpu; prints the summary and the failed tests
#   gotests       the Go tests that need a GPU (GOTESTS: packages, default ./ucxx
#                 ./core/execution; GORUN: -run pattern, default every test), with .ucx
#                 linked to the kit's libucx; gotests.txt
#   collectives   ucxx_go against NCCL (torch.distributed), one rank per GPU, ROUNDS
#                 interleaved rounds (default 4) of collectives_bench.py from MINB (default
#                 8 B) to MAXB bytes (default 2 MiB), ITERS calls a size (default 60), each of
#                 LIBS in turn (default "ucxx nccl"; nccl-wrap: NCCL with its torch tensors
#                 made in every timed call, the benchmark's old way; ucxx-ordered: ours with
#                 stream-ordered calls); tarred as
#                 collectives${TAG}.tgz
#   latency       latency_pieces.py with the defaults and with UCXGO_DEVICE_PROGRAMS=0
#   dag           the DAG on every GPU (benchmarks/dag/run.py --multi-gpu, data-aware
#                 policies against hand-placed and managed CuPy): DAG_SHAPES (default
#                 vec,bs,ml,cg), DAG_BACKENDS, DAG_BUDGET seconds (default 420), DAG_ARGS
#                 (more options); dag${TAG}.json / .log / .md
#   transfers     GPU 0 to 1 and on GPU 0 (PAIRS: client,target pairs, default "0,1 0,0"):
#                 two-sided against RAPIDS ucxx (gpu_bench.py), one-sided against NIXL
#                 (onesided_gpu_bench.py); the peers' wheels from .ci/device-peers-kit.sh
#                 in /tmp/tx, installed into /tmp/peers-site
#   dask          Dask on one host (its CPUs): dask_bench.py, tcp and ucxgo alternating,
#                 DASK_ROUNDS rounds (default 3), DASK_WORKERS workers (default 4), DASK_GIB
#                 (default 1.5); Dask's wheels from .ci/device-dask-kit.sh (.devkit-dask),
#                 installed into /tmp/dask-site; dask_r<round>_<protocol>.json
#   netns         Dask across two network namespaces (dask_netns.py, NETNS_ROUNDS rounds,
#                 default 3; root and iproute2 needed); dask_netns.json / .md
#   ab            an A/B on one machine: builds .devkit/alt (benchmarks/gpu/alt_tree.sh)
#                 into /tmp/alt-site once, then runs AB_CMD (a shell command, run from the
#                 repository's root with $AB_TAG set to base or alt and $AB_OUT to a folder
#                 for the round's files) AB_ROUNDS times (default 3) with each build in turn;
#                 outputs tarred as ab${TAG}.tgz
#
#   bash benchmarks/gpu/machine.sh tests collectives
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
k=$PWD/.devkit
cp /tmp/kit/go.tar.xz "$k/" 2>/dev/null
if ls /tmp/kit/ucx.part.* >/dev/null 2>&1; then  # the libucx wheel's two parts (.ci/device-kit.sh)
    cat /tmp/kit/ucx.part.* > "/tmp/kit/$(cat /tmp/kit/ucx.name)" && rm /tmp/kit/ucx.part.*
fi
mkdir -p "$k/wheels" && cp /tmp/kit/libucx_cu13-*.whl "$k/wheels/" 2>/dev/null
# shellcheck disable=SC1091
source "$k/activate.sh" || exit 2
vet=$GOROOT/pkg/tool/linux_amd64/vet
[ -x "$vet" ] || { xz -dc /tmp/kit/vet.xz > "$vet" && chmod +x "$vet"; }
export GOPROXY=file://$k/gomodproxy GOSUMDB=off GOFLAGS=-mod=mod UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo} PYTHONUNBUFFERED=1
# build SRC SITE LOG: ucxx_go from the tree at SRC into SITE, unless it is there.
build() {
    ls "$2"/ucxx_go/_pybridge*.so >/dev/null 2>&1 && return 0
    local t0; t0=$(date +%s)
    (cd "$1" && python3 -m pip install -q --no-build-isolation --no-deps --target "$2" . > "$3" 2>&1) ||
        { tail -30 "$3"; exit 1; }
    echo "ucxx_go built from $1 in $(( $(date +%s) - t0 )) s"
}
[ -n "${REBUILD:-}" ] && rm -rf /tmp/ucxxgo-site /tmp/alt-site
build . /tmp/ucxxgo-site "$out/build.log"
export PYTHONPATH=/tmp/ucxxgo-site${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi -L > "$out/gpus.txt"
for step in "$@"; do
    case $step in
    tests)
        timeout 400 python3 -m pytest -q tests/gpu > "$out/tests_gpu.txt" 2>&1
        echo "tests/gpu rc=$?: $(tail -1 "$out/tests_gpu.txt")"
        grep -E "^FAILED" "$out/tests_gpu.txt"
        ;;
    gotests)
        ucx=$(python3 -c 'import libucx, os; print(os.path.dirname(os.path.abspath(libucx.__file__)))') || exit 1
        ln -sfn "$ucx" .ucx
        # shellcheck disable=SC2086
        LD_LIBRARY_PATH=$ucx/lib timeout 400 go test -count=1 -run "${GORUN:-.}" ${GOTESTS:-./ucxx ./core/execution} \
            > "$out/gotests.txt" 2>&1
        echo "go tests rc=$?: $(grep -E '^(ok|FAIL|--- FAIL)' "$out/gotests.txt" | tr '\n' ' ')"
        ;;
    collectives)
        r=$(mktemp -d)
        b="benchmarks/gpu/collectives_bench.py --budget-s ${BUDGET:-12} --iters ${ITERS:-60}"
        b="$b --min-bytes ${MINB:-8} --max-bytes ${MAXB:-2097152}"
        n=$(nvidia-smi -L | wc -l)
        for round in $(seq "${ROUNDS:-4}"); do
            for lib in ${LIBS:-ucxx nccl}; do
                a="--lib $lib"
                [ "$lib" = nccl-wrap ] && a="--lib nccl --nccl-wrap-each-call"
                [ "$lib" = ucxx-ordered ] && a="--lib ucxx --ordered"
                timeout 300 python3 -m ucxx_go.launch -n "$n" $b $a --out "$r/r${round}_${lib/-/}.json" \
                    > "$r/r${round}_${lib/-/}.log" 2>&1
                echo "collectives round $round $lib rc=$?"
            done
        done
        rm -f "$r"/*.rank*
        tar -C "$r" -czf "$out/collectives${TAG:-}.tgz" .
        ;;
    latency)
        n=$(nvidia-smi -L | wc -l)
        for programs in 1 0; do
            TAG=programs$programs UCXGO_DEVICE_PROGRAMS=$programs timeout 120 python3 -m ucxx_go.launch -n "$n" \
                benchmarks/gpu/latency_pieces.py "$out" 2>&1 | grep -v Warn | tail -6
        done
        ;;
    dag)
        timeout $(( ${DAG_BUDGET:-420} + 80 )) python3 benchmarks/dag/run.py --multi-gpu --shapes "${DAG_SHAPES:-vec,bs,ml,cg}" \
            --backends "${DAG_BACKENDS:-dag-1gpu,dag-min-transfer-size,dag-minmin-transfer-time,dag-minmax-transfer-time,cupy-multi,cupy-managed}" \
            --budget-s "${DAG_BUDGET:-420}" --item-timeout 150 ${DAG_ARGS:-} \
            --out "$out/dag${TAG:-}.json" > "$out/dag${TAG:-}.log" 2>&1
        echo "dag${TAG:-} rc=$?"; grep "^| \|NOT met\|met\*\*\|^\[.*\]   " "$out/dag${TAG:-}.log" | cut -c1-300
        ;;
    transfers)
        if ls /tmp/tx/nixl.part.* >/dev/null 2>&1; then
            cat /tmp/tx/nixl.part.* > /tmp/tx/nixl_cu13-1.5.1-cp312-cp312-manylinux_2_28_x86_64.whl && rm /tmp/tx/nixl.part.*
        fi
        # CUDA's Python bindings only where the machine has none (never shadow its own)
        skip="cuda_bindings|cuda_pathfinder"
        python3 -c "import cuda.bindings, cuda.pathfinder" 2>/dev/null || skip="^$"
        python3 -m pip install -q --no-deps --target /tmp/peers-site $(ls /tmp/tx/*.whl | grep -Ev "$skip") \
            > "$out/peers_install.log" 2>&1 || { tail -5 "$out/peers_install.log"; exit 1; }
        for g in ${PAIRS:-0,1 0,0}; do
            t=${g/,/to}
            PYTHONPATH=$PYTHONPATH:/tmp/peers-site timeout 250 python3 benchmarks/gpu_bench.py --gpus $g \
                --markdown "$out/twosided_$t.md" > "$out/twosided_$t.log" 2>&1
            echo "transfers two-sided $g rc=$?"
            PYTHONPATH=$PYTHONPATH:/tmp/peers-site timeout 200 python3 benchmarks/onesided_gpu_bench.py --gpus $g \
                > "$out/onesided_$t.md" 2>&1
            echo "transfers one-sided $g rc=$?"
        done
        ;;
    dask|netns)
        if ! python3 -c 'import distributed' 2>/dev/null; then
            ls .devkit-dask/*.whl >/dev/null 2>&1 || { echo "machine.sh $step: no .devkit-dask (.ci/device-dask-kit.sh)" >&2; exit 2; }
            python3 -m pip install -q --no-deps --no-compile --target /tmp/dask-site .devkit-dask/*.whl \
                > "$out/dask_install.log" 2>&1 || { tail -5 "$out/dask_install.log"; exit 1; }
            export PYTHONPATH=$PYTHONPATH:/tmp/dask-site PATH=/tmp/dask-site/bin:$PATH
        fi
        echo "$step: $(nproc) CPUs, $(id -un)"
        if [ "$step" = netns ]; then
            # iproute2 from .devkit-ip (.ci/device-dask-kit.sh) where the machine has none
            command -v ip >/dev/null || export PATH=$PWD/.devkit-ip:$PATH
            timeout 560 python3 benchmarks/dask_netns.py --rounds "${NETNS_ROUNDS:-3}" --json "$out/dask_netns.json" \
                --out "$out/dask_netns.md" > "$out/dask_netns.log" 2>&1
            echo "netns rc=$?"; tail -25 "$out/dask_netns.md" 2>/dev/null || tail -20 "$out/dask_netns.log"
            continue
        fi
        r=$(mktemp -d)
        for round in $(seq "${DASK_ROUNDS:-3}"); do
            order="tcp ucxgo"; [ $((round % 2)) = 0 ] && order="ucxgo tcp"
            for p in $order; do
                timeout 280 python3 benchmarks/dask_bench.py --protocols "$p" --workers "${DASK_WORKERS:-4}" \
                    --gib "${DASK_GIB:-1.5}" --json "$r/r${round}_$p.json" > "$r/r${round}_$p.log" 2>&1
                echo "dask round $round $p rc=$?: $(python3 benchmarks/gpu/dask_summary.py "$r/r${round}_$p.json" 2>&1 | tail -1)"
            done
        done
        tar -C "$r" -czf "$out/dask${TAG:-}.tgz" .
        ;;
    ab)
        [ -f .devkit/alt/ALT ] || { echo "machine.sh ab: no .devkit/alt (benchmarks/gpu/alt_tree.sh)" >&2; exit 2; }
        build .devkit/alt /tmp/alt-site "$out/alt_build.log"
        echo "alt: $(cat .devkit/alt/ALT)"
        r=$(mktemp -d)
        base=$(tr ':' '\n' <<< "$PYTHONPATH" | grep -vx /tmp/ucxxgo-site | paste -sd:)
        for round in $(seq "${AB_ROUNDS:-3}"); do
            for v in base alt; do
                site=/tmp/ucxxgo-site; [ $v = alt ] && site=/tmp/alt-site
                mkdir -p "$r/${v}_r$round"
                PYTHONPATH=$site:$base AB_TAG=$v AB_OUT=$r/${v}_r$round timeout 300 bash -c "${AB_CMD:?AB_CMD: the command to run}" \
                    > "$r/${v}_r$round.log" 2>&1
                echo "ab round $round $v rc=$?"
            done
        done
        tar -C "$r" -czf "$out/ab${TAG:-}.tgz" .
        ;;
    *)
        echo "machine.sh: unknown step $step" >&2
        exit 2
        ;;
    esac
done
