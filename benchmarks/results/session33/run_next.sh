#!/usr/bin/env bash
# Session 33's machine steps (after .ci/device-kit.sh's calls; carry .devkit), one or more a call:
#   run_next.sh gotests    the Go tests that need GPUs (ucxx, core/execution: the accessed-by advice's tests)
#   run_next.sh tests      tests/gpu whole at the head
#   run_next.sh dagmap     the DAG's managed arrays mapped on every GPU (UCXGO_DAG_MAP_MANAGED=1) and not (=0):
#                          cg, vec, bs, ml, two policies beside cupy-multi and cupy-managed, within 100 s each
#   run_next.sh dagcopies  the same with only the copies' destinations mapped (UCXGO_DAG_MAP_MANAGED=copies) against 0
#   run_next.sh cgmapped   cg mapped (UCXGO_DAG_MAP_MANAGED=1) with DAG_PROBE_TIMINGS=1: what remains of the copies'
#                          and kernels' GPU time per device (session 32's cgtimings was unmapped)
#   run_next.sh exchange   ../session32/managed_exchange.py on this machine's GPUs (CuPy only)
# Everything it writes goes back as one archive.
show() { grep -E "rc=|^\[.*\]   "; }
for step in "$@"; do
case $step in
tests | gotests)
    bash benchmarks/gpu/machine.sh "$step" 2>&1 | grep -v "^WARNING"
    ;;
dagmap)
    for m in 1 0; do
        UCXGO_DAG_MAP_MANAGED=$m DAG_SHAPES=cg,vec,bs,ml DAG_BUDGET=100 TAG=_map$m \
            DAG_BACKENDS=dag-minmin-transfer-time,dag-minmax-transfer-time,cupy-multi,cupy-managed \
            bash benchmarks/gpu/machine.sh dag 2>&1 | grep -v "^WARNING"
    done
    ;;
dagcopies)
    for m in copies 0; do
        UCXGO_DAG_MAP_MANAGED=$m DAG_SHAPES=cg,vec,bs,ml DAG_BUDGET=100 TAG=_map$m \
            DAG_BACKENDS=dag-minmin-transfer-time,dag-minmax-transfer-time,cupy-multi,cupy-managed \
            bash benchmarks/gpu/machine.sh dag 2>&1 | grep -v "^WARNING"
    done
    ;;
cgmapped)
    UCXGO_DAG_MAP_MANAGED=1 DAG_PROBE_TIMINGS=1 DAG_SHAPES=cg DAG_BUDGET=80 DAG_BACKENDS=dag-minmin-transfer-time \
        TAG=_cg_mapped_timings bash benchmarks/gpu/machine.sh dag 2>&1 | show
    python3 - "$OUT/dag_cg_mapped_timings.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["shapes"]["cg"]["backends"]
for b, r in d.items():
    t = r.get("vertex_timings") or {}
    print(b, "median", round(r.get("median_ms", 0), 2), "ms; span", t.get("span_ms"), "ms; untimed", t.get("untimed"))
    for k, g in (t.get("groups") or {}).items():
        print(f"   {k:32s} n {g['n']:4d}  gpu {g['gpu_ms']:9.3f} ms")
PY
    ;;
exchange)
    timeout 120 python3 benchmarks/results/session32/managed_exchange.py 20 | tee "$OUT/managed_exchange.txt"
    ;;
esac
done
cd "$OUT" && tar czf /tmp/results.tgz . && find . -type f -delete && mv /tmp/results.tgz .
