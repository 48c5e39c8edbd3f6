"""What a copy between managed ranges on two GPUs does to the destination's pages.

A (64 MiB) prefetched to GPU 0, B to GPU 1; a copy B <- A queued on GPU 0's stream,
then a kernel on GPU 1 reads B. Three ways, medians of 7 (ms, wall clock, synchronized):
  fault:     the copy as is (the copy engine of GPU 0 writes B's pages where they are,
             or faults them over), then the read on GPU 1
  prefetch:  B prefetched to GPU 0 first on the copy's stream, the copy, then B
             prefetched to GPU 1 on the reader's stream, then the read
  device:    device memory on each GPU, a peer copy, then the read (the hand code's way)
"""
import statistics, time
import cupy as cp

N = 64 << 20
rt = cp.cuda.runtime


def managed(dev):
    with cp.cuda.Device(dev):
        a = cp.ndarray(N // 4, cp.float32, memptr=cp.cuda.malloc_managed(N))
        a[...] = 1.0
        rt.memPrefetchAsync(a.data.ptr, N, dev, 0)
        cp.cuda.Device(dev).synchronize()
    return a


def sync():
    for d in (0, 1):
        cp.cuda.Device(d).synchronize()


def once(kind):
    if kind == "device":
        with cp.cuda.Device(0):
            A = cp.ones(N // 4, cp.float32)
        with cp.cuda.Device(1):
            B = cp.zeros(N // 4, cp.float32)
    else:
        A, B = managed(0), managed(1)
    sync()
    with cp.cuda.Device(0):
        s0 = cp.cuda.Stream(non_blocking=True)
    with cp.cuda.Device(1):
        s1 = cp.cuda.Stream(non_blocking=True)
    t0 = time.perf_counter()
    with cp.cuda.Device(0):
        if kind == "prefetch":
            rt.memPrefetchAsync(B.data.ptr, N, 0, s0.ptr)
        rt.memcpyAsync(B.data.ptr, A.data.ptr, N, rt.memcpyDefault, s0.ptr)
        ev = s0.record()
    s0.synchronize()
    t1 = time.perf_counter()
    with cp.cuda.Device(1):
        s1.wait_event(ev)
        if kind == "prefetch":
            rt.memPrefetchAsync(B.data.ptr, N, 1, s1.ptr)
        with s1:
            total = B.sum()
        s1.synchronize()
    t2 = time.perf_counter()
    assert float(total) == N // 4, float(total)
    return (t1 - t0) * 1e3, (t2 - t1) * 1e3


for kind in ("fault", "prefetch", "device"):
    once(kind)
    runs = [once(kind) for _ in range(7)]
    c = statistics.median(r[0] for r in runs)
    r = statistics.median(r[1] for r in runs)
    print(f"{kind:9s} copy {c:8.3f} ms   read on GPU 1 {r:8.3f} ms   total {c + r:8.3f} ms  ({N >> 20} MiB)")
