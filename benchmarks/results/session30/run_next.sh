#!/usr/bin/env bash
# For the next machine session (2+ GPUs; 4 if lent), after .ci/device-kit.sh's four calls:
#   run_next.sh tests   tests/gpu whole at the head (session 30's fix: the first look at a cupy array
#                       launches nothing; the one-rank test cold behind its gate)
#   run_next.sh prog    device programs to 64 KiB (the default) against 128 and 256 KiB, three rounds
#                       alternating, NCCL beside the default: the threshold on whichever cards came
#                       (session 30 measured 2 x H200 only)
#   run_next.sh readmostly  ml (the one shape with Replicated inputs: every partition reads the weights) with
#                       the DAG's managed weights advised read-mostly (DAG_PROBE_READ_MOSTLY=1, a probe in
#                       benchmarks/dag/multigpu.py) and without, three rounds alternating: is ml's gap to
#                       cupy-multi (0.83-0.89x with no uploads at all) the weights' pages moving between GPUs?
# Everything it writes goes back as one archive (the machine returns at most 8 files).
bash benchmarks/gpu/machine.sh > /tmp/machine.log 2>&1
source .devkit/activate.sh
export PYTHONPATH=/tmp/ucxxgo-site:$PYTHONPATH UCX_NET_DEVICES=lo
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpus.txt"
git log --oneline -1 > "$OUT/head.txt" 2>/dev/null
for step in "$@"; do
case $step in
tests)
    bash benchmarks/gpu/machine.sh tests 2>&1 | grep "tests/gpu"
    grep -E "^FAILED" "$OUT/tests_gpu.txt"
    ;;
prog)
    for r in 1 2 3; do
        ROUNDS=1 BUDGET=6 ITERS=40 LIBS="ucxx-ordered nccl" TAG=_prog64k_r$r bash benchmarks/gpu/machine.sh collectives 2>&1 | grep rc=
        for k in 128 256; do
            UCXGO_PROGRAM_MAX_BYTES=$((k * 1024)) ROUNDS=1 BUDGET=6 ITERS=40 LIBS="ucxx-ordered" TAG=_prog${k}k_r$r \
                bash benchmarks/gpu/machine.sh collectives 2>&1 | grep rc=
        done
    done
    ;;
readmostly)
    for r in 1 2 3; do for rm in 0 1; do
        DAG_PROBE_READ_MOSTLY=$rm timeout 120 python3 benchmarks/dag/run.py --multi-gpu --shapes ml \
            --backends dag-minmin-transfer-time,dag-minmax-transfer-time,cupy-multi --budget-s 60 --item-timeout 60 \
            --out /tmp/rm_${rm}_r$r.json > "$OUT/readmostly_${rm}_r$r.log" 2>&1
        echo "ml read-mostly=$rm round $r rc=$?"; grep -E "^\[.*\]   (dag|cupy)" "$OUT/readmostly_${rm}_r$r.log"
    done; done
    ;;
esac
done
tar czf /tmp/results.tgz -C "$OUT" . && find "$OUT" -type f -delete && mv /tmp/results.tgz "$OUT/"
