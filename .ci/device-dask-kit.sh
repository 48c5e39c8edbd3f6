#!/usr/bin/env bash
# Prepares Dask for the GPU machine (no network), for machine.sh's `dask` and `netns` steps
# (host benchmarks on its 16 cores): dask and distributed, at the versions the dev
# environment tests, with their Python dependencies but numpy (the machine has its own).
# The `netns` step also needs iproute2, which the machine lacks: this machine's `ip` and
# its libraries go in .devkit-ip/, run through the loader (so `ip netns exec` passes no
# LD_LIBRARY_PATH on). About 7 MB; carried with the last of .ci/device-kit.sh's calls:
#   bash .ci/device-dask-kit.sh             # here: .devkit-dask/ .devkit-ip/
#   call, carry [".devkit-ucx2", ".devkit", ".devkit-dask", ".devkit-ip"]:
#       cp .devkit-ucx2/* /tmp/kit/ && bash benchmarks/gpu/machine.sh dask netns
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
for d in /.devkit-dask/ /.devkit-ip/; do
  grep -qx "$d" .git/info/exclude 2>/dev/null || echo "$d" >>.git/info/exclude
done
rm -rf .devkit-dask .devkit-ip && mkdir -p .devkit-dask .devkit-ip/lib
v=$(python3 -c 'import importlib.metadata as m; print(m.version("distributed"))' 2>/dev/null ||
    .venv/bin/python -c 'import importlib.metadata as m; print(m.version("distributed"))')
plat=()
for n in 17 24 27 28 31 34 35; do plat+=(--platform "manylinux_2_${n}_x86_64"); done
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  "${plat[@]}" --platform manylinux2014_x86_64 --platform linux_x86_64 -d .devkit-dask \
  "dask==$v" "distributed==$v"
rm -f .devkit-dask/numpy-*.whl
ip=$(command -v ip)
cp -L "$ip" .devkit-ip/ip.bin
ldd "$ip" | awk '$3 ~ /^\// && $1 !~ /^libc\.so/ {print $3}' | xargs -I{} cp -L {} .devkit-ip/lib/
cat > .devkit-ip/ip <<'IP'
#!/bin/sh
# iproute2's ip from the dev machine, with its libraries, found by the loader.
d=$(dirname "$(readlink -f "$0")")
exec /lib64/ld-linux-x86-64.so.2 --library-path "$d/lib" "$d/ip.bin" "$@"
IP
chmod +x .devkit-ip/ip
du -sh .devkit-dask .devkit-ip
