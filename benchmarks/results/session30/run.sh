#!/usr/bin/env bash
# Session 30's machine calls, after .ci/device-kit.sh's four calls:
#   run.sh probe   the one-rank test's probe (one_rank_probe.sh), the ordered tests
#   run.sh dag     a DAG round (block fallback against GrCUDA's round-robin)
#   run.sh all     the three
#   run.sh prog    latency rounds: ordered calls with device programs to 64 KiB (the default)
#                  and to 256 KiB (UCXGO_PROGRAM_MAX_BYTES=262144), NCCL beside them
bash benchmarks/gpu/machine.sh > "$OUT/machine.log" 2>&1
source .devkit/activate.sh
export PYTHONPATH=/tmp/ucxxgo-site:$PYTHONPATH UCX_NET_DEVICES=lo
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpus.txt"
for step in ${1/all/probe dag prog}; do
case $step in
probe)
    bash benchmarks/results/session30/one_rank_probe.sh
    timeout 200 python3 -m pytest -q tests/gpu/test_ordered_collectives_gpu.py > "$OUT/ordered.txt" 2>&1
    echo "ordered tests: $(tail -1 "$OUT/ordered.txt")"
    ;;
dag)
    for fb in block round-robin; do
        env $([ $fb = round-robin ] && echo UCXGO_DAG_FALLBACK=round-robin) timeout 200 python3 benchmarks/dag/run.py \
            --multi-gpu --shapes vec,bs,ml --backends dag-minmin-transfer-time,dag-minmax-transfer-time,cupy-multi,cupy-managed \
            --budget-s 130 --item-timeout 90 --out /tmp/dag_$fb.json > "$OUT/dag_${fb}_r2.log" 2>&1
        echo "dag $fb round 2 rc=$?"; grep -E "^\[.*\]   (dag|cupy)" "$OUT/dag_${fb}_r2.log"
    done
    ;;
prog)
    for r in 1 2 3; do
        ROUNDS=1 BUDGET=6 ITERS=40 LIBS="ucxx-ordered nccl" TAG=_prog64k_r$r bash benchmarks/gpu/machine.sh collectives 2>&1 | grep rc=
        UCXGO_PROGRAM_MAX_BYTES=262144 ROUNDS=1 BUDGET=6 ITERS=40 LIBS="ucxx-ordered" TAG=_prog256k_r$r \
            bash benchmarks/gpu/machine.sh collectives 2>&1 | grep rc=
    done
    ;;
esac
done
# What comes back from the machine is a few files: the results in one archive.
tar czf /tmp/results.tgz -C "$OUT" --exclude machine.log --exclude build.log . && find "$OUT" -type f ! -name machine.log -delete && mv /tmp/results.tgz "$OUT/"
