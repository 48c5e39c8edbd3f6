#!/usr/bin/env bash
# Prepares .devkit/alt/, the source of a second ucxx_go for an A/B on the GPU machine
# (benchmarks/gpu/machine.sh's `ab` step builds it beside the working tree's and runs
# a command alternately with each): the sources of REV (default HEAD), with PATCH
# applied if one is given, and the executor's PTX regenerated when the patch touches
# a kernel (NVCC: CUDA 13.0's nvcc, as `make executor-ptx` wants). Run after
# .ci/device-kit.sh, which empties .devkit/.
#
#   bash benchmarks/gpu/alt_tree.sh [--rev REV] [PATCH]
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
rev=HEAD
if [ "${1:-}" = --rev ]; then rev=$2; shift 2; fi
patch=${1:-}
alt=.devkit/alt
rm -rf "$alt" && mkdir -p "$alt"
git archive "$rev" -- go.mod go.sum setup.py pyproject.toml Makefile README.md core pybridge notifier ucxx python | tar -x -C "$alt"
if [ -n "$patch" ]; then
  (cd "$alt" && patch -s -p1 < "$root/$patch")
  if grep -q '^+++ b/core/executor/kernels/.*\.cu' "$patch"; then
    make -s -C "$alt" executor-ptx NVCC="${NVCC:-nvcc}"
  fi
fi
echo "$rev${patch:+ + $patch}" > "$alt/ALT"
du -sh "$alt"
