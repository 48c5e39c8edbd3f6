#!/usr/bin/env bash
# For the next machine session (2+ GPUs; 4 if lent), after .ci/device-kit.sh's four calls:
#   run_next.sh tests   tests/gpu whole at the head (session 30's fix: the first look at a cupy array
#                       launches nothing; the one-rank test cold behind its gate)
#   run_next.sh prog    device programs to 64 KiB (the default) against 128 and 256 KiB, three rounds
#                       alternating, NCCL beside the default: the threshold on whichever cards came
#                       (session 30 measured 2 x H200 only)
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
esac
done
tar czf /tmp/results.tgz -C "$OUT" . && find "$OUT" -type f -delete && mv /tmp/results.tgz "$OUT/"
