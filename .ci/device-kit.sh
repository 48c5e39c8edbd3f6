#!/usr/bin/env bash
# Prepares .devkit/ for building and testing on the GPU machine (no Go, no network),
# on top of ../shared/device/make-kit.sh, and says how to use it. What it adds:
# gopy's own build step runs `go build -mod=mod`, which ignores a vendor directory, so
# the Go modules travel as a file-based module proxy (.devkit/gomodproxy, ~7 MB).
#
# The whole kit (~80 MB) is more than one device call may carry (64 MiB with the
# working tree, ~22 MB of it), so it goes in four calls while the machine stays warm
# (it is given back 30 s after a call ends: make the calls back to back); the libucx
# wheel travels in two parts, which machine.sh joins:
#   bash .ci/device-kit.sh                 # here: .devkit/, .devkit-stage1/, .devkit-ucx/, .devkit-ucx2/
#   call 1, carry [".devkit-stage1"]:       mkdir -p /tmp/kit && cp .devkit-stage1/* /tmp/kit/
#   call 2, carry [".devkit-ucx"]:          cp .devkit-ucx/* /tmp/kit/
#   call 3, carry [".devkit-ucx2"]:         cp .devkit-ucx2/* /tmp/kit/
#   call 4, carry [".devkit"]:              bash benchmarks/gpu/machine.sh tests collectives
# (benchmarks/gpu/machine.sh builds ucxx_go from the working tree into /tmp/ucxxgo-site
# once per machine, then runs the steps named.)
# The transfer tables' peers (RAPIDS ucxx, NIXL) travel separately: .ci/device-peers-kit.sh.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
bash ../shared/device/make-kit.sh pytest-timeout "$@"
for d in /.devkit-stage1/ /.devkit-ucx/ /.devkit-ucx2/ /vendor/; do
  grep -qx "$d" .git/info/exclude 2>/dev/null || echo "$d" >>.git/info/exclude
done
rm -rf .devkit-stage1 .devkit-ucx .devkit-ucx2 .devkit/bin .devkit/vendor
mkdir -p .devkit-stage1 .devkit-ucx .devkit-ucx2
mv .devkit/go.tar.xz .devkit-stage1/
whl=$(ls .devkit/wheels/libucx_cu13-*.whl)
basename "$whl" > .devkit-ucx/ucx.name
split -b 24M "$whl" .devkit-ucx/ucx.part.
mv .devkit-ucx/ucx.part.a[b-z] .devkit-ucx2/
rm "$whl"
# The trimmed toolchain has no vet, which `go test` needs even with -vet=off.
xz -9 -c "$(go env GOROOT)/pkg/tool/$(go env GOOS)_$(go env GOARCH)/vet" > .devkit-stage1/vet.xz
tmp=$(mktemp -d)
GOMODCACHE=$tmp GOFLAGS=-mod=mod go mod download
cp -r "$tmp/cache/download" .devkit/gomodproxy
chmod -R u+w "$tmp" && rm -rf "$tmp"
du -sh .devkit .devkit-stage1 .devkit-ucx .devkit-ucx2
