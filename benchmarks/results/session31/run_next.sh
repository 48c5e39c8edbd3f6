#!/usr/bin/env bash
# For the next machine session (4 GPUs if lent, else 2), after .ci/device-kit.sh's four calls (carry .devkit).
# Each step fits one call; every step is benchmarks/gpu/machine.sh's (which builds once per machine):
#   run_next.sh tests       tests/gpu whole at the head
#   run_next.sh dag         the DAG on every GPU, vec bs ml cg, the data-aware policies beside cupy-multi and
#                           cupy-managed (session 31's table, at cbec4b5's tie-break: cg's scalar step on each
#                           partition's GPU, not all on GPU 0)
#   run_next.sh cgab        cg with the block fallback and tie-break (the default) against GrCUDA's rules
#                           (UCXGO_DAG_FALLBACK=round-robin), two rounds alternating
#   run_next.sh cgprefetch  cg with the DAG's prefetches against none (UCXGO_DAG_PREFETCH=0 and
#                           UCXGO_DAG_COPY_PREFETCH_DST=0: the kernels' faults move the pages, as cupy-managed's
#                           do in its loop): do the prefetch calls serialise the lanes?
#   run_next.sh cgtrace     cg under minmin with the Go execution trace; here: go tool trace -pprof=syscall
#                           cg_trace.cg > syscall.pprof, go tool pprof -top (which driver calls the lanes wait in)
# Everything it writes goes back as one archive (the machine returns at most 8 files).
B=dag-min-transfer-size,dag-minmin-transfer-time,dag-minmax-transfer-time,cupy-multi,cupy-managed
cg() { DAG_SHAPES=cg DAG_BUDGET=80 bash benchmarks/gpu/machine.sh dag; }
for step in "$@"; do
case $step in
tests)
    bash benchmarks/gpu/machine.sh tests 2>&1 | grep "tests/gpu"
    grep -E "^FAILED" "$OUT/tests_gpu.txt"
    ;;
dag)
    DAG_BACKENDS=dag-round-robin,$B bash benchmarks/gpu/machine.sh dag 2>&1 | grep -v "^WARNING"
    ;;
cgab)
    for r in 1 2; do for fb in block round-robin; do
        UCXGO_DAG_FALLBACK=$fb DAG_BACKENDS=$B TAG=_cg_${fb}_r$r cg 2>&1 | grep -E "rc=|^\[.*\]   "
    done; done
    ;;
cgprefetch)
    for r in 1 2; do for pf in 1 0; do
        UCXGO_DAG_PREFETCH=$pf UCXGO_DAG_COPY_PREFETCH_DST=$pf DAG_BACKENDS=dag-minmin-transfer-time,dag-minmax-transfer-time,cupy-managed \
            TAG=_cg_pf${pf}_r$r cg 2>&1 | grep -E "rc=|^\[.*\]   "
    done; done
    ;;
cgtrace)
    DAG_BACKENDS=dag-minmin-transfer-time DAG_ARGS="--go-trace $OUT/cg_trace" TAG=_cg_trace cg 2>&1 | grep -E "rc=|^\[.*\]   "
    ls -la "$OUT"/cg_trace.cg
    ;;
esac
done
cd "$OUT" && tar czf /tmp/results.tgz . && find . -type f -delete && mv /tmp/results.tgz .
