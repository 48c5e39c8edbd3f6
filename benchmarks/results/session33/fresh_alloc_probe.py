"""A probe (session 33, issue 26): filling a freshly allocated buffer against a reused one, as a
receive copies into its frame. python fresh_alloc_probe.py BYTES (run it under MALLOC_TRIM_THRESHOLD_=65536)."""
import mmap, time, numpy as np, sys
n = int(sys.argv[1]); src = np.ones(n, np.uint8); k = 300
def t(f):
    t0 = time.perf_counter()
    for _ in range(k): f()
    return (time.perf_counter() - t0) / k * 1e6
def fresh():
    a = np.empty(n, np.uint8); a[:] = src
def populate():
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE)
    a = np.frombuffer(m, np.uint8); a[:] = src; del a; m.close()
keep = np.empty(n, np.uint8)
def reuse():
    keep[:] = src
for name, f in [("malloc", fresh), ("mmap populate", populate), ("reused", reuse)]:
    print(f"{n >> 20} MiB {name:14s} {t(f):8.1f} us")
