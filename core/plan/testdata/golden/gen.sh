#!/bin/bash
# Regenerates chunks.tsv: the real MSCCL++ v0.9.0 parser's chunk arithmetic for
# every fixture the Go package parses and for synthetic/*.json, at many sizes.
# Needs: the parser harness of /work/notes/parser-harness (its stub headers and
# build.sh, which fetches execution_plan.cc etc. at tag v0.9.0 from the mscclpp
# mirror, and nlohmann json), g++ and python3.
#   ./gen.sh [harness_dir]   (default /work/notes/parser-harness)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
H=${1:-/work/notes/parser-harness}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$H"/. "$work"/
(cd "$work" && ./build.sh >/dev/null)
cp "$here/golden.cc" "$work/src/"
g++ -std=c++17 -O1 -I "$work/include" -I "$work/src" "$work/src/execution_plan.cc" "$work/src/golden.cc" -o "$work/golden"
python3 "$here/gen.py" "$work/golden" > "$here/chunks.tsv"
echo "wrote $here/chunks.tsv ($(wc -l < "$here/chunks.tsv") lines)"
