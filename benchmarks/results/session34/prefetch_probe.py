"""A probe (session 34, issue 27 item 3): how fast managed memory the host wrote moves to
the GPUs with cudaMemPrefetchAsync, against cudaMemcpyAsync from pinned host memory,
and whether issuing a GPU's prefetch in pieces from several threads (several streams)
moves it faster: what bounds the DAG's vec and bs against cupy-multi.

    python prefetch_probe.py [MiB per GPU] [reps] [quick]

quick: one plain prefetch way (a thread a GPU, one piece) instead of the sweep. Last,
the same with every buffer advised read-mostly (cudaMemAdviseSetReadMostly): the GPU
gets a copy and the host keeps its pages mapped.

Per repetition, untimed: every managed buffer prefetched to the CPU and rewritten by
the host (as the DAG benchmark's reset). Timed: from the first call to every stream
synchronized. Prints GB/s per GPU (median of reps) for each way.
"""
import statistics
import sys
import threading
import time

import cupy as cp
import numpy as np

MiB = 1 << 20
size = int(sys.argv[1]) * MiB if len(sys.argv) > 1 else 1024 * MiB
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
G = cp.cuda.runtime.getDeviceCount()
rt = cp.cuda.runtime

managed, pinned, dev, streams = [], [], [], []
for d in range(G):
    with cp.cuda.Device(d):
        managed.append(cp.cuda.malloc_managed(size))
        dev.append(cp.cuda.alloc(size))
        streams.append([cp.cuda.Stream(non_blocking=True) for _ in range(8)])
    pinned.append(cp.cuda.alloc_pinned_memory(size))


def host_reset():
    for d in range(G):
        try:
            rt.memPrefetchAsync(managed[d].ptr, size, -1, 0)  # -1: the CPU
        except cp.cuda.runtime.CUDARuntimeError:
            pass  # CuPy's call refused on CUDA 13: the host's writes below fault the pages over
    for d in range(G):
        with cp.cuda.Device(d):
            rt.deviceSynchronize()
    for d in range(G):
        # the host writes every page (ctypes memset through the managed address)
        import ctypes
        ctypes.memset(managed[d].ptr, d + 1, size)


def sync_all(gpus):
    for d in gpus:
        for s in streams[d]:
            s.synchronize()


def prefetch(d, pieces, threads):
    """GPU d's buffer in `pieces` prefetches, over `threads` threads of its own (0: the
    caller's thread, one GPU after another), piece i on stream i % 8."""
    n = size // pieces
    work = [(i * n, n if i < pieces - 1 else size - i * n) for i in range(pieces)]

    def run(k):
        with cp.cuda.Device(d):
            for i in range(k, pieces, threads):
                off, ln = work[i]
                rt.memPrefetchAsync(managed[d].ptr + off, ln, d, streams[d][i % len(streams[d])].ptr)

    if threads == 0:  # the caller's thread
        threads = 1
        run(0)
        return []
    ts = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    return ts


def timed(name, gpus, start):
    rates = []
    for _ in range(reps):
        host_reset()
        t0 = time.perf_counter()
        ts = []
        for d in gpus:
            ts += start(d) or []
        for t in ts:
            t.join()
        sync_all(gpus)
        dt = time.perf_counter() - t0
        rates.append(size / dt / 1e9)
    print(f"{name:44s} GPUs {','.join(map(str, gpus)):5s} {statistics.median(rates):6.1f} GB/s a GPU "
          f"(min {min(rates):.1f}, max {max(rates):.1f})", flush=True)


def memcpy(d):
    with cp.cuda.Device(d):
        rt.memcpyAsync(dev[d].ptr, pinned[d].ptr, size, rt.memcpyHostToDevice, streams[d][0].ptr)


def read_mostly(on):
    """cudaMemAdvise SetReadMostly (1) or UnsetReadMostly (2) on every managed buffer."""
    for d in range(G):
        rt.memAdvise(managed[d].ptr, size, 1 if on else 2, d)


print(f"{G} GPUs ({rt.getDeviceProperties(0)['name'].decode()}), {size // MiB} MiB a GPU, {reps} reps", flush=True)
for gpus in ([0], list(range(G))) if G > 1 else ([0],):
    timed("pinned memcpy", gpus, memcpy)
    sweep = ((1, 1),) if "quick" in sys.argv[3:] else ((1, 0), (1, 1), (4, 1), (4, 4), (8, 8), (16, 4))
    for pieces, threads in sweep:
        timed(f"prefetch, {pieces} pieces, {threads} threads", gpus, lambda d, p=pieces, t=threads: prefetch(d, p, t))
    try:
        read_mostly(True)
    except Exception as e:  # noqa: BLE001
        print("read-mostly advice refused:", type(e).__name__, e)
        continue
    for pieces, threads in ((1, 1), (4, 1)):
        timed(f"read-mostly prefetch, {pieces} pieces, {threads} threads", gpus,
              lambda d, p=pieces, t=threads: prefetch(d, p, t))
    read_mostly(False)
