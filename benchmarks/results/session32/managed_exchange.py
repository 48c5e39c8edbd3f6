"""A probe (session 32): cg's two exchanges between GPUs in managed memory, alone, with
CuPy, to learn what makes the DAG's copies slow on 4 GPUs (multigpu.vertex_timings:
copies issued on GPUs 1-3 took a median 0.7-6.5 ms each, 4-byte ones included; on GPU
0, 11 µs).

  partials  every GPU q writes its partial sum (4 B) into its own slot of its gather
            buffer, copies it into slot q of every other GPU's buffer (cudaMemcpyAsync
            on its stream), and each GPU then reduces its buffer (a kernel).
            Buffers 2 MiB apart in one allocation (the DAG's layout) or one
            allocation each (cupy-managed's).
  replicas  every GPU q rewrites its rows of its replica of p (a kernel), copies them
            into every other replica, and each GPU then reads its whole replica.

Variants (the managed pages' handling):
  plain        nothing: faults move pages (cupy-managed)
  prefetch     the DAG's: a copy's destination prefetched to the copying GPU first, a
               kernel's inputs prefetched to its GPU
  accessed     cudaMemAdviseSetAccessedBy every GPU (mapped everywhere: an access
               from elsewhere reads or writes across NVLink instead of faulting) and
               each piece prefetched to its owner once
  accessed+rd  mapped, and the readers' prefetches only (the DAG with UCXGO_DAG_MAP_MANAGED=1
               had the location model not kept the copies' destinations in place)
  accessed+pf  mapped, and both prefetches
  preferred    accessed, and each piece's preferred location its owner GPU

Prints the median time an iteration takes, per scenario and variant.
Usage: python3 managed_exchange.py [iterations]
"""

import sys
import time

import cupy as cp
import numpy as np

ADVISE_PREFERRED, ADVISE_ACCESSED_BY = 3, 5  # cudaMemAdviseSetPreferredLocation, SetAccessedBy
PAD = 2 << 20

SRC = r"""
extern "C" __global__ void produce(float *p, int n, float v) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v + i;
}
extern "C" __global__ void consume(const float *p, int n, float *out) {
    float s = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += p[i];
    if (s == -1.0f) out[0] = s;  // keeps the reads
}
"""


def main():
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    G = cp.cuda.runtime.getDeviceCount()
    mods, streams = [], []
    for d in range(G):
        with cp.cuda.Device(d):
            m = cp.RawModule(code=SRC)
            mods.append((m.get_function("produce"), m.get_function("consume")))
            streams.append(cp.cuda.Stream(non_blocking=True))
            for o in range(G):
                if o != d and cp.cuda.runtime.deviceCanAccessPeer(d, o):
                    try:
                        cp.cuda.runtime.deviceEnablePeerAccess(o)
                    except cp.cuda.runtime.CUDARuntimeError:
                        pass
    print(f"{G} GPUs; {iters} iterations a run; times: median ms per iteration")
    for scen in ("partials", "replicas"):
        for layout in (("one", "separate") if scen == "partials" else ("one",)):
            for variant in ("plain", "prefetch", "accessed", "accessed+rd", "accessed+pf", "preferred"):
                t = run(scen, layout, variant, iters, G, mods, streams)
                print(f"  {scen:9s} {layout:8s} {variant:12s} {t:9.3f}", flush=True)


def run(scen, layout, variant, iters, G, mods, streams):
    piece = PAD if scen == "partials" else 32 << 20  # one GPU's buffer / replica, bytes
    rows = 4 * G if scen == "partials" else piece // G  # bytes a GPU produces and sends
    keep = []
    if layout == "one":
        mem = cp.cuda.malloc_managed(G * piece)
        keep.append(mem)
        base = [mem.ptr + o * piece for o in range(G)]
    else:
        for o in range(G):
            keep.append(cp.cuda.malloc_managed(piece))
        base = [m.ptr for m in keep]
    sink = cp.cuda.malloc_managed(4096)
    for o in range(G):
        with cp.cuda.Device(o):
            if variant.startswith("accessed") or variant == "preferred":
                for d in range(G):
                    cp.cuda.runtime.memAdvise(base[o], piece, ADVISE_ACCESSED_BY, d)
            if variant == "preferred":
                cp.cuda.runtime.memAdvise(base[o], piece, ADVISE_PREFERRED, o)
            cp.cuda.runtime.memPrefetchAsync(base[o], piece, o, streams[o].ptr)
    for s in streams:
        s.synchronize()

    def own(o, q):  # GPU q's part of GPU o's piece
        return base[o] + (4 * q if scen == "partials" else q * rows)

    nown = 1 if scen == "partials" else rows // 4
    times = []
    for it in range(iters + 2):
        t = time.perf_counter()
        done = []
        for q in range(G):
            with cp.cuda.Device(q):
                s = streams[q]
                produce = mods[q][0]
                produce((64,), (256,), (np.uintp(own(q, q)), np.int32(nown), np.float32(it)), stream=s)
                for o in range(G):
                    if o == q:
                        continue
                    if variant in ("prefetch", "accessed+pf"):
                        cp.cuda.runtime.memPrefetchAsync(own(o, q), 4 * nown, q, s.ptr)
                    cp.cuda.runtime.memcpyAsync(own(o, q), own(q, q), 4 * nown, cp.cuda.runtime.memcpyDefault, s.ptr)
                done.append(s.record())
        for o in range(G):
            with cp.cuda.Device(o):
                s = streams[o]
                for q in range(G):
                    if q != o:
                        s.wait_event(done[q])
                if variant in ("prefetch", "accessed+rd", "accessed+pf"):
                    cp.cuda.runtime.memPrefetchAsync(base[o], piece if scen == "replicas" else 4 * G, o, s.ptr)
                consume = mods[o][1]
                n = G if scen == "partials" else piece // 4
                consume((64,), (256,), (np.uintp(base[o]), np.int32(n), np.uintp(sink.ptr)), stream=s)
        for s in streams:
            s.synchronize()
        if it >= 2:
            times.append(time.perf_counter() - t)
    del keep
    return 1e3 * float(np.median(times))


if __name__ == "__main__":
    main()
