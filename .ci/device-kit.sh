#!/usr/bin/env bash
# Prepares .devkit/ for building and testing on the GPU machine (no Go, no network),
# on top of ../shared/device/make-kit.sh, and says how to use it. What it adds:
# gopy's own build step runs `go build -mod=mod`, which ignores a vendor directory, so
# the Go modules travel as a file-based module proxy (.devkit/gomodproxy, ~7 MB).
#
# The whole kit (~80 MB) is more than one device call may carry (64 MiB), so it goes
# in two calls while the machine stays warm:
#   bash .ci/device-kit.sh                # here: builds .devkit/ and .devkit-stage1/
#   call 1, carry [".devkit-stage1"]:      mkdir -p /tmp/kit && cp .devkit-stage1/* /tmp/kit/
#   call 2, carry [".devkit"]:             cp /tmp/kit/go.tar.xz .devkit/ && source .devkit/activate.sh &&
#       xz -dc /tmp/kit/vet.xz > $GOROOT/pkg/tool/linux_amd64/vet && chmod +x $GOROOT/pkg/tool/linux_amd64/vet &&
#       export GOPROXY=file://$PWD/.devkit/gomodproxy GOSUMDB=off GOFLAGS=-mod=mod UCX_NET_DEVICES=lo &&
#       python3 -m pip install --no-build-isolation --no-deps --target /tmp/ucxxgo-site . &&
#       export PYTHONPATH=/tmp/ucxxgo-site:$PYTHONPATH && python3 -m pytest -q tests
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
bash ../shared/device/make-kit.sh pytest-timeout "$@"
for d in /.devkit-stage1/ /vendor/; do
  grep -qx "$d" .git/info/exclude 2>/dev/null || echo "$d" >>.git/info/exclude
done
rm -rf .devkit-stage1 .devkit/bin .devkit/vendor
mkdir -p .devkit-stage1
mv .devkit/go.tar.xz .devkit-stage1/
# The trimmed toolchain has no vet, which `go test` needs even with -vet=off.
xz -9 -c "$(go env GOROOT)/pkg/tool/$(go env GOOS)_$(go env GOARCH)/vet" > .devkit-stage1/vet.xz
tmp=$(mktemp -d)
GOMODCACHE=$tmp GOFLAGS=-mod=mod go mod download
cp -r "$tmp/cache/download" .devkit/gomodproxy
chmod -R u+w "$tmp" && rm -rf "$tmp"
du -sh .devkit .devkit-stage1
