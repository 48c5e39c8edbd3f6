#!/usr/bin/env bash
# Session 26, on the GPU machine after the kit (and .devkit-tx* in /tmp/tx): gpu_bench.py
# with every window buffer warmed (after) against the benchmark as of 1dd9ae1 (before,
# benchmarks/gpu_bench_before.py, a copy), ROUNDS alternating rounds, PAIRS placements.
set -u
out=${OUT:?}
bash benchmarks/gpu/machine.sh > "$out/machine.log" 2>&1
source .devkit/activate.sh
export PYTHONPATH=/tmp/ucxxgo-site:$PYTHONPATH UCX_NET_DEVICES=lo PYTHONUNBUFFERED=1
if ls /tmp/tx/nixl.part.* >/dev/null 2>&1; then rm -f /tmp/tx/nixl.part.*; fi
skip="cuda_bindings|cuda_pathfinder|nixl"
python3 -c "import cuda.bindings, cuda.pathfinder" 2>/dev/null || skip="nixl"
python3 -m pip install -q --no-deps --target /tmp/peers-site $(ls /tmp/tx/*.whl | grep -Ev "$skip") > "$out/peers_install.log" 2>&1 || tail -5 "$out/peers_install.log"
export PYTHONPATH=$PYTHONPATH:/tmp/peers-site
sizes=${SIZES:-1MiB,4MiB,16MiB,64MiB,256MiB}
for r in $(seq "${ROUNDS:-2}"); do
    for g in ${PAIRS:-0,0}; do
        for v in before after; do
            b=benchmarks/gpu_bench.py; [ $v = before ] && b=benchmarks/gpu_bench_before.py
            timeout 280 python3 $b --gpus $g --sizes $sizes --json "$out/${v}_${g/,/to}_r$r.json" \
                --markdown "$out/${v}_${g/,/to}_r$r.md" > "$out/${v}_${g/,/to}_r$r.log" 2>&1
            echo "round $r $g $v rc=$?"
        done
    done
done
cd "$out" && tar czf w4.tgz *.json *.md *.log && rm -f *.json *_r*.md *_r*.log
