#!/usr/bin/env bash
# Prepares the peers the GPU transfer benchmarks measure against, for the GPU machine
# (no network): RAPIDS ucxx 0.52 (its wheels and their Python dependencies, without
# their own libucx: it runs on the kit's libucx-cu13 1.22, as every table in
# benchmarks/RESULTS.md says) and NIXL 1.5.1 (59 MB, with its own UCX). A device call
# carries at most 64 MiB with the working tree, so they go in three folders, three
# calls while the machine stays warm, after .ci/device-kit.sh's:
#   bash .ci/device-peers-kit.sh            # here: .devkit-tx1/ .devkit-tx2/ .devkit-tx3/
#   call, carry [".devkit-tx1"]:  mkdir -p /tmp/tx && cp .devkit-tx1/* /tmp/tx/
#   call, carry [".devkit-tx2"]:  cp .devkit-tx2/* /tmp/tx/
#   call, carry [".devkit-tx3", ".devkit"]:  cp .devkit-tx3/* /tmp/tx/ && bash benchmarks/gpu/machine.sh transfers
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
for d in /.devkit-tx1/ /.devkit-tx2/ /.devkit-tx3/; do
  grep -qx "$d" .git/info/exclude 2>/dev/null || echo "$d" >>.git/info/exclude
done
rm -rf .devkit-tx1 .devkit-tx2 .devkit-tx3
mkdir -p .devkit-tx1 .devkit-tx2 .devkit-tx3
plat=()
for n in 17 24 27 28 31 34 35; do plat+=(--platform "manylinux_2_${n}_x86_64"); done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${plat[@]}" --platform manylinux2014_x86_64 --platform linux_x86_64 -d .devkit-tx1 \
  'ucxx-cu13==0.52.*' 'libucxx-cu13==0.52.*' 'rmm-cu13==26.10.*' 'librmm-cu13==26.10.*' rapids-logger \
  'cuda-core>=0.5.1,<2' 'nvidia-ml-py>=12' 'cuda-pathfinder>=1.4.2' 'cuda-bindings==13.*' 'nixl-cu13==1.5.1'
mv .devkit-tx1/nixl_cu13-*.whl .devkit-tx2/
( cd .devkit-tx2 && split -b 30M nixl_cu13-*.whl nixl.part. && rm nixl_cu13-*.whl && mv nixl.part.ab ../.devkit-tx3/ )
du -sh .devkit-tx1 .devkit-tx2 .devkit-tx3
