#!/usr/bin/env bash
# Session 32's machine steps (after .ci/device-kit.sh's four calls; carry .devkit), one or more a call:
#   run_next.sh tests      tests/gpu whole at the head
#   run_next.sh dag        the DAG on every GPU, vec bs ml cg, the data-aware policies beside cupy-multi and
#                          cupy-managed (session 31's table, now at cbec4b5's tie-break)
#   run_next.sh cgvar      cg under minmin beside cupy-managed, one switch at a time: the default;
#                          UCXGO_DAG_COPY_PREFETCH_DST=0 alone (copies leave their destination's pages where
#                          they are); --max-streams 1 and 2 (fewer streams a GPU: are concurrent faulting
#                          kernels the loss?); --parent-stream multigpu-disjoint
#   run_next.sh cgtimings  cg with DAG_PROBE_TIMINGS=1: each kernel's and copy's GPU time per device
#                          (multigpu.vertex_timings), dag-1gpu beside minmin: which vertices grow on several GPUs
#   run_next.sh dagmap     the DAG's managed arrays mapped on every GPU (UCXGO_DAG_MAP_MANAGED=1) and not (=0):
#                          cg first, then vec bs ml, two policies beside cupy-multi and cupy-managed, within 100 s
#                          each (session 32's change, not measured in the DAG when it landed)
#   run_next.sh coll       4 GPUs: the cells of issue 27 item 2 still below NCCL: three rounds of stream-ordered calls
#                          8 B-2 MiB beside NCCL (session 31's allgather 512 KiB / 2 MiB at 0.93-0.94 in one round),
#                          then one bus-bandwidth round 16 MiB-1 GiB (session 27's 0.89 cell); ~300 s
#   run_next.sh exchange   managed_exchange.py again, now with the mapped readers-only prefetch variant (CuPy only:
#                          what the DAG would do mapped without b0d56a6's in-place copies; with them it is "accessed")
#   run_next.sh gotests    the Go tests that need GPUs (ucxx, core/execution: the accessed-by advice's tests)
# Everything it writes goes back as one archive.
cg() { DAG_SHAPES=cg DAG_BUDGET=80 bash benchmarks/gpu/machine.sh dag; }
show() { grep -E "rc=|^\[.*\]   "; }
for step in "$@"; do
case $step in
tests | gotests)
    bash benchmarks/gpu/machine.sh "$step" 2>&1 | grep -v "^WARNING"
    ;;
dag)
    DAG_BACKENDS=dag-round-robin,dag-min-transfer-size,dag-minmin-transfer-time,dag-minmax-transfer-time,cupy-multi,cupy-managed \
        bash benchmarks/gpu/machine.sh dag 2>&1 | grep -v "^WARNING"
    ;;
dagmap)
    for m in 1 0; do
        UCXGO_DAG_MAP_MANAGED=$m DAG_SHAPES=cg,vec,bs,ml DAG_BUDGET=100 TAG=_map$m \
            DAG_BACKENDS=dag-minmin-transfer-time,dag-minmax-transfer-time,cupy-multi,cupy-managed \
            bash benchmarks/gpu/machine.sh dag 2>&1 | grep -v "^WARNING"
    done
    ;;
coll)
    for r in 1 2 3; do
        ROUNDS=1 BUDGET=6 ITERS=40 LIBS="ucxx-ordered nccl" TAG=_latency_r$r bash benchmarks/gpu/machine.sh collectives 2>&1 | grep rc=
    done
    ROUNDS=1 ITERS=32 MINB=16777216 MAXB=1073741824 BUDGET=60 LIBS="ucxx-ordered nccl ucxx" TAG=_busbw \
        bash benchmarks/gpu/machine.sh collectives 2>&1 | grep rc=
    ;;
exchange)
    timeout 120 python3 benchmarks/results/session32/managed_exchange.py 20 | tee "$OUT/managed_exchange.txt"
    ;;
cgvar)
    B=dag-minmin-transfer-time,cupy-managed
    DAG_BACKENDS=$B TAG=_cg_default cg 2>&1 | show
    UCXGO_DAG_COPY_PREFETCH_DST=0 DAG_BACKENDS=$B TAG=_cg_nodstpf cg 2>&1 | show
    DAG_BACKENDS=$B DAG_ARGS="--max-streams 1" TAG=_cg_streams1 cg 2>&1 | show
    DAG_BACKENDS=$B DAG_ARGS="--max-streams 2" TAG=_cg_streams2 cg 2>&1 | show
    DAG_BACKENDS=$B DAG_ARGS="--parent-stream multigpu-disjoint" TAG=_cg_disjoint cg 2>&1 | show
    ;;
cgtimings)
    DAG_PROBE_TIMINGS=1 DAG_BACKENDS=dag-minmin-transfer-time TAG=_cg_timings cg 2>&1 | show
    python3 - "$OUT/dag_cg_timings.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["shapes"]["cg"]["backends"]
for b, r in d.items():
    t = r.get("vertex_timings") or {}
    print(b, "median", round(r.get("median_ms", 0), 2), "ms; span", t.get("span_ms"), "ms; untimed", t.get("untimed"))
    for k, g in (t.get("groups") or {}).items():
        print(f"   {k:32s} n {g['n']:4d}  gpu {g['gpu_ms']:9.3f} ms")
PY
    ;;
esac
done
cd "$OUT" && tar czf /tmp/results.tgz . && find . -type f -delete && mv /tmp/results.tgz .
