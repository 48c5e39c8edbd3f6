#!/usr/bin/env bash
# For the next machine session (2+ GPUs, 4 if lent), after .ci/device-kit.sh's four calls:
#   run_next.sh tests        tests/gpu whole (session 29's fixes: the gate test, the DAG's block fallback)
#   run_next.sh dag          the DAG suite with the block fallback and with GrCUDA's round-robin
#                            (UCXGO_DAG_FALLBACK=round-robin), alternating, 2 rounds
#   run_next.sh collectives  one latency and one bus-bandwidth round (ordered, NCCL, ordinary)
#   run_next.sh batch        UCXGO_BATCH_WORD_OPS=1 (signals and device waits of consecutive ops in one
#                            driver call): the collective GPU tests with it, then latency rounds with it
#                            and without, alternating (2 each); adopt it if the tests pass and it is faster
bash benchmarks/gpu/machine.sh > "$OUT/machine.log" 2>&1
source .devkit/activate.sh
export PYTHONPATH=/tmp/ucxxgo-site:$PYTHONPATH UCX_NET_DEVICES=lo
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpus.txt"
case $1 in
tests)
    bash benchmarks/gpu/machine.sh tests 2>&1 | grep "tests/gpu"
    ;;
dag)
    for r in 1 2; do for fb in block round-robin; do
        env $([ $fb = round-robin ] && echo UCXGO_DAG_FALLBACK=round-robin) timeout 280 python3 benchmarks/dag/run.py \
            --multi-gpu --shapes vec,bs,ml --backends dag-minmin-transfer-time,dag-minmax-transfer-time,cupy-multi,cupy-managed \
            --budget-s 200 --item-timeout 90 --out "$OUT/dag_${fb}_r$r.json" > "$OUT/dag_${fb}_r$r.log" 2>&1
        echo "dag $fb round $r rc=$?"; grep -E "^\[.*\]   (dag|cupy)" "$OUT/dag_${fb}_r$r.log"
    done; done
    rm -f "$OUT"/*.json "$OUT"/*.md
    ;;
collectives)
    ROUNDS=1 BUDGET=6 ITERS=40 LIBS="ucxx-ordered nccl ucxx" TAG=_latency bash benchmarks/gpu/machine.sh collectives 2>&1 | grep rc=
    ROUNDS=1 ITERS=32 MINB=16777216 MAXB=1073741824 BUDGET=60 LIBS="ucxx-ordered nccl ucxx" TAG=_busbw \
        bash benchmarks/gpu/machine.sh collectives 2>&1 | grep rc=
    ;;
batch)
    UCXGO_BATCH_WORD_OPS=1 timeout 300 python3 -m pytest -q tests/gpu/test_collectives_gpu.py \
        tests/gpu/test_ordered_collectives_gpu.py > "$OUT/batch_tests.txt" 2>&1
    echo "collective GPU tests with the batching: $(tail -1 "$OUT/batch_tests.txt")"
    for r in 1 2; do
        ROUNDS=1 BUDGET=6 ITERS=40 LIBS="ucxx-ordered ucxx" TAG=_latency_plain_r$r bash benchmarks/gpu/machine.sh collectives 2>&1 | grep rc=
        UCXGO_BATCH_WORD_OPS=1 ROUNDS=1 BUDGET=6 ITERS=40 LIBS="ucxx-ordered ucxx" TAG=_latency_batch_r$r \
            bash benchmarks/gpu/machine.sh collectives 2>&1 | grep rc=
        # device programs to 256 KiB (each op of a 2-rank 128-256 KiB call fits): queued time in flight
        UCXGO_PROGRAM_MAX_BYTES=262144 ROUNDS=1 BUDGET=6 ITERS=40 LIBS="ucxx-ordered" TAG=_latency_prog256k_r$r \
            bash benchmarks/gpu/machine.sh collectives 2>&1 | grep rc=
    done
    ;;
esac
