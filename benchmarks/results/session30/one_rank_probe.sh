#!/usr/bin/env bash
# Session 30's probe of the one-rank GPU test's hang (session 30's first run: the launcher
# stopped the rank after 70 s, nothing printed): the test's rank script, with the
# progress lines and the gate's watchdog (Python stacks at 30 s, then Go stacks and
# the gate opened), run with the allocation the first version made behind the gate
# (`doubled = out * 2`, PROBE_ALLOC=1) and without (the test as it now is).
# Run after benchmarks/gpu/machine.sh on the GPU machine; writes $OUT/one_rank_*.txt.
set -u
t=$(mktemp -d)
python3 - "$t" <<'PY'
import sys, re
sys.path.insert(0, "tests/gpu")
import test_ordered_collectives_gpu as m
body = m.ONE_RANK.replace("@TESTS@", repr("tests/gpu"))
open(sys.argv[1] + "/now.py", "w").write(body)
alloc = body.replace("cp.multiply(out, 2, out=doubled)  # after", "doubled = out * 2  # after")
assert alloc != body
open(sys.argv[1] + "/alloc.py", "w").write(alloc)
PY
for v in alloc now; do
    timeout 80 python3 -m ucxx_go.launch -n 1 --timeout 70 "$t/$v.py" > "$OUT/one_rank_$v.txt" 2>&1
    echo "one-rank probe $v rc=$?: $(grep -c . "$OUT/one_rank_$v.txt") lines, last: $(tail -1 "$OUT/one_rank_$v.txt")"
done
