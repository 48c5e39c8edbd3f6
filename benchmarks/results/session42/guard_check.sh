#!/usr/bin/env bash
# Session 42, on the GPU machine after machine.sh (which unpacked Go and linked .ucx): the
# RMA guard's GPU test as built, then with the guard taken out (ucxx_rma_guard_install
# made to refuse), where the cases with one-sided off must fail; the tree is restored, and
# core's GPU tests (one-sided, semaphores, transfers, streams) run with the guard.
set -u
out=${OUT:-/tmp/s42}
source .devkit/activate.sh >/dev/null 2>&1
export GOPROXY=file://$PWD/.devkit/gomodproxy GOSUMDB=off GOFLAGS=-mod=mod UCX_NET_DEVICES=lo
ucx=$(python3 -c 'import libucx, os; print(os.path.dirname(os.path.abspath(libucx.__file__)))') || exit 1
ln -sfn "$ucx" .ucx
run() {
    LD_LIBRARY_PATH=$ucx/lib timeout 200 go test -vet=off -count=1 -v -run "${2:-TestRMAGuardActive|TestPeersCannot}" ./core > "$out/guard_$1.txt" 2>&1
    local rc=$? f=$out/guard_$1.txt
    echo "guard $1 rc=$rc: $(grep -cE -- '--- PASS' "$f") passed, $(grep -cE -- '--- SKIP' "$f") skipped;" \
        "$(grep -E '^(\s*--- FAIL|FAIL|ok)|rmaguard_test' "$f" | tr -s ' ' | tr '\n' ' ')"
}
run built
cp ucxx/rmaguard.c /tmp/rmaguard.c.orig
sed -i 's/^\( *\)int ok = plausible(.*$/\1int ok = 0;/' ucxx/rmaguard.c
grep -q "int ok = 0;" ucxx/rmaguard.c || { echo "guard_check: the patch did not apply"; exit 2; }
run removed
cp /tmp/rmaguard.c.orig ucxx/rmaguard.c
run gpu-core 'CUDA|Semaphore|Put|Get|OneSided|Region|Transfer|Stream|RMAGuard|PeersCannot'
