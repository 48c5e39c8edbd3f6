"""What a device collective's stream operations cost on this machine (GPUs 0 and 1, one process).
Each measure queues N operations up front and times until both streams are idle: per-op GPU-side time."""
import ctypes, time
import cupy as cp

cuda = ctypes.CDLL("libcuda.so.1")
def fn(name, *alts):
    for n in (name,) + alts:
        try:
            return getattr(cuda, n)
        except AttributeError:
            pass
    raise AttributeError(name)
write64 = fn("cuStreamWriteValue64_v2", "cuStreamWriteValue64")
wait64 = fn("cuStreamWaitValue64_v2", "cuStreamWaitValue64")
for f in (write64, wait64):
    f.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint]
    f.restype = ctypes.c_int
GEQ = 0
N = 200

def chk(r):
    if r != 0:
        raise RuntimeError(f"CUresult {r}")

GATE = [None, 1]

def gate(s, dev):
    with cp.cuda.Device(dev):
        chk(wait64(s.ptr, GATE[0], GATE[1], GEQ))

def open_gate():
    ctypes.c_uint64.from_address(GATE[0]).value = GATE[1]
    GATE[1] += 1

def pingpong(flag0, flag1, s0, s1, dev0, dev1):
    """s0: write flag0=i, wait flag1>=i; s1: wait flag0>=i, write flag1=i; N rounds, queued behind a host gate."""
    ctypes.memset(flag0, 0, 8) if dev0 == -1 else None
    gate(s0, dev0); gate(s1, dev1)
    tq0 = time.perf_counter()
    for i in range(1, N + 1):
        with cp.cuda.Device(dev0):
            chk(write64(s0.ptr, flag0, i, 0)); chk(wait64(s0.ptr, flag1, i, GEQ))
        with cp.cuda.Device(dev1):
            chk(wait64(s1.ptr, flag0, i, GEQ)); chk(write64(s1.ptr, flag1, i, 0))
    tq = time.perf_counter()
    t = time.perf_counter(); open_gate()
    with cp.cuda.Device(dev0): s0.synchronize()
    with cp.cuda.Device(dev1): s1.synchronize()
    return (time.perf_counter() - t) / N * 1e6, (tq - tq0) / N * 1e6

def main():
    ng = cp.cuda.runtime.getDeviceCount()
    d1 = 1 if ng > 1 else 0
    with cp.cuda.Device(0):
        s0 = cp.cuda.Stream(non_blocking=True)
    with cp.cuda.Device(d1):
        s1 = cp.cuda.Stream(non_blocking=True)
    # host words (pinned, mapped: UVA address usable by the device)
    host = cp.cuda.alloc_pinned_memory(4096)
    hp = host.ptr
    ctypes.memset(hp, 0, 4096)
    GATE[0], GATE[1] = hp + 2048, 0
    GATE[1] = 1  # the gate word is 0: waits for >= 1 hold until open_gate stores 1
    us, q = pingpong(hp, hp + 64, s0, s1, 0, d1)
    print(f"signal round trip through host words, GPU 0 <-> GPU {d1}: {us:.2f} us a round (host queueing {q:.2f})")
    # device words: flag0 in GPU1's memory, flag1 in GPU0's memory (each waits on its own, writes the peer's)
    if d1 != 0:
        for a, b in ((0, 1), (1, 0)):
            try:
                with cp.cuda.Device(a):
                    cp.cuda.runtime.deviceEnablePeerAccess(b)
            except cp.cuda.runtime.CUDARuntimeError:
                pass
    with cp.cuda.Device(0):
        w0 = cp.zeros(8, cp.uint64)
    with cp.cuda.Device(d1):
        w1 = cp.zeros(8, cp.uint64)
    us, q = pingpong(w1.data.ptr, w0.data.ptr, s0, s1, 0, d1)
    print(f"signal round trip through device words (write the peer's, wait on own), GPU 0 <-> GPU {d1}: {us:.2f} us a round (host queueing {q:.2f})")
    # chains on one stream: tiny peer copies, tiny kernels, writes to host
    with cp.cuda.Device(0):
        a = cp.zeros(2, cp.float32)
    with cp.cuda.Device(d1):
        b = cp.zeros(2, cp.float32)
    with cp.cuda.Device(0):
        for label, op in (("8-byte peer copy (cudaMemcpyPeerAsync)", lambda: cp.cuda.runtime.memcpyPeerAsync(b.data.ptr, d1, a.data.ptr, 0, 8, s0.ptr)),
                          ("8-byte copy to host", lambda: cp.cuda.runtime.memcpyAsync(hp + 1024, a.data.ptr, 8, 2, s0.ptr)),
                          ("write of a host word", lambda: chk(write64(s0.ptr, hp + 128, 1, 0))),
                          ("tiny kernel (a += 1)", None)):
            if op is None:
                with s0:
                    a += 1
                s0.synchronize()
            chk(wait64(s0.ptr, GATE[0], GATE[1], GEQ))
            tq0 = time.perf_counter()
            if op is None:
                with s0:
                    for _ in range(N):
                        a += 1
            else:
                for _ in range(N):
                    op()
            tq = time.perf_counter()
            t = time.perf_counter(); open_gate()
            s0.synchronize()
            print(f"{label}: {(time.perf_counter() - t) / N * 1e6:.2f} us each in a chain on the GPU (host queueing {(tq - tq0) / N * 1e6:.2f})")
        # one round of host sync
        ts = []
        for _ in range(200):
            t = time.perf_counter(); a += 1; cp.cuda.Device().synchronize(); ts.append(time.perf_counter() - t)
        ts.sort(); print(f"tiny kernel + device synchronize, awaited: {ts[100] * 1e6:.2f} us median")

main()
