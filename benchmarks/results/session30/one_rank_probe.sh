#!/usr/bin/env bash
# Session 30's probe of the one-rank GPU test's hang (its first run: the launcher
# stopped the rank after 70 s, nothing printed; with the gate's watchdog: the rank
# queued both ordered copies, then `s.done` waited for the gate). The test's rank
# script without its warm-up (ONE_RANK_COLD=1) under CUDA's lazy loading (the
# default) and eager loading (CUDA_MODULE_LOADING=EAGER), then the test as it is.
# (Its first version skipped the cupy warm-up too, and hung in that, as session 29 did.)
# Run after benchmarks/gpu/machine.sh on the GPU machine; writes $OUT/one_rank_*.txt.
set -u
t=$(mktemp -d)
python3 - "$t" <<'PY'
import re, sys
s = open("tests/gpu/test_ordered_collectives_gpu.py").read()
body = re.search(r'ONE_RANK = r"""(.*?)"""', s, re.S).group(1).replace("@TESTS@", repr("tests/gpu"))
open(sys.argv[1] + "/rank.py", "w").write(body)
PY
run() {
    env "$@" timeout 80 python3 -m ucxx_go.launch -n 1 --timeout 70 "$t/rank.py" > "$OUT/one_rank_$v.txt" 2>&1
    echo "one-rank probe $v rc=$?: $(grep -c . "$OUT/one_rank_$v.txt") lines, last: $(tail -1 "$OUT/one_rank_$v.txt")"
}
v=cold_lazy run ONE_RANK_COLD=1
v=cold_eager run ONE_RANK_COLD=1 CUDA_MODULE_LOADING=EAGER
v=warm_lazy run X=1
