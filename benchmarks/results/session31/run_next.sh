#!/usr/bin/env bash
# For the next machine session (4 GPUs if lent, else 2), after .ci/device-kit.sh's four calls (carry .devkit):
#   run_next.sh tests   tests/gpu whole at the head
#   run_next.sh dag     the DAG on every GPU, vec bs ml cg, the data-aware policies beside cupy-multi and
#                       cupy-managed (session 31's table, at cbec4b5's tie-break: cg's scalar step on each
#                       partition's GPU, not all on GPU 0)
#   run_next.sh cgab    cg with the block fallback and tie-break (the default) against GrCUDA's rules
#                       (UCXGO_DAG_FALLBACK=round-robin), two rounds alternating
#   run_next.sh cgprefetch  cg with the DAG's prefetches against none (do the prefetch calls serialise the lanes?)
#   run_next.sh cgtrace cg under minmin with the Go execution trace (which driver calls the lanes wait in)
# Everything it writes goes back as one archive (the machine returns at most 8 files). Each step fits one call.
bash benchmarks/gpu/machine.sh > /tmp/machine.log 2>&1
source .devkit/activate.sh >/dev/null 2>&1
export PYTHONPATH=/tmp/ucxxgo-site:$PYTHONPATH UCX_NET_DEVICES=lo
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/gpus.txt"
B=dag-min-transfer-size,dag-minmin-transfer-time,dag-minmax-transfer-time,cupy-multi,cupy-managed
for step in "$@"; do
case $step in
tests)
    bash benchmarks/gpu/machine.sh tests 2>&1 | grep "tests/gpu"
    grep -E "^FAILED" "$OUT/tests_gpu.txt"
    ;;
dag)
    timeout 500 python3 benchmarks/dag/run.py --multi-gpu --backends dag-round-robin,$B --budget-s 420 \
        --item-timeout 150 --out "$OUT/dag_all.json" > "$OUT/dag_all.log" 2>&1
    echo "dag rc=$?"; grep -E "^\[.*\]   |NOT met|: met" "$OUT/dag_all.log"
    ;;
cgab)
    for r in 1 2; do for fb in block round-robin; do
        UCXGO_DAG_FALLBACK=$fb timeout 100 python3 benchmarks/dag/run.py --multi-gpu --shapes cg --backends $B \
            --budget-s 80 --item-timeout 90 --out "$OUT/cg_${fb}_r$r.json" > "$OUT/cg_${fb}_r$r.log" 2>&1
        echo "cg fallback=$fb round $r rc=$?"; grep -E "^\[.*\]   (dag|cupy)" "$OUT/cg_${fb}_r$r.log"
    done; done
    ;;
cgprefetch)
    # cg with the DAG's prefetches (the default) against none (UCXGO_DAG_PREFETCH=0 and
    # UCXGO_DAG_COPY_PREFETCH_DST=0: the kernels' faults move the pages, as cupy-managed's do in its loop)
    for r in 1 2; do for pf in 1 0; do
        UCXGO_DAG_PREFETCH=$pf UCXGO_DAG_COPY_PREFETCH_DST=$pf timeout 100 python3 benchmarks/dag/run.py --multi-gpu \
            --shapes cg --backends dag-minmin-transfer-time,dag-minmax-transfer-time,cupy-managed \
            --budget-s 80 --item-timeout 90 --out "$OUT/cg_pf${pf}_r$r.json" > "$OUT/cg_pf${pf}_r$r.log" 2>&1
        echo "cg prefetch=$pf round $r rc=$?"; grep -E "^\[.*\]   (dag|cupy)" "$OUT/cg_pf${pf}_r$r.log"
    done; done
    ;;
cgtrace)
    # Where the DAG's goroutines wait in the driver on cg (cuMemPrefetchAsync, copies, launches): the Go
    # execution trace of one run; here: go tool trace -pprof=syscall cg_trace.cg > syscall.pprof, go tool pprof -top.
    timeout 100 python3 benchmarks/dag/run.py --multi-gpu --shapes cg --backends dag-minmin-transfer-time \
        --budget-s 80 --item-timeout 90 --go-trace "$OUT/cg_trace" --out "$OUT/cg_trace.json" > "$OUT/cg_trace.log" 2>&1
    echo "cg traced rc=$?"; grep -E "^\[.*\]   (dag|cupy)" "$OUT/cg_trace.log"; ls -la "$OUT"/cg_trace.cg
    ;;
esac
done
cd "$OUT" && tar czf /tmp/results.tgz . && find . -type f -delete && mv /tmp/results.tgz .
