"""What one signal-and-wait hop between two GPUs costs, by where the counter lives.

    python benchmarks/gpu/hop_probe.py [--iters 300] [--copy-bytes 0,1048576]

Two GPUs in one process, one non-blocking stream each. GPU 0's stream: wait until
flag A >= i, (copy copy-bytes to GPU 1), write i into flag B; GPU 1's stream: write i
into flag A, wait until flag B >= i. Every iteration's ops are queued behind a gate
(GPU 1 waits on a host word first), then the gate opens: the time until both streams
are done over the iterations is a round trip, two hops, without the host's queueing. The
flags are stream memory operations (cuStreamWriteValue64, cuStreamWaitValue64: what
the executor's GPU lanes queue) on a word in pinned host memory (the executor's
counters today) or in the waiting GPU's own memory, written by the peer through
peer access (NVLink). Prints one row per placement and copy size.

    python benchmarks/gpu/hop_probe.py --chain [--chain-mib 256,1024] [--pieces 1,4,8,16,32,64]

A broadcast's chain on every GPU (0 -> 1 -> ... -> n-1) with copy engines and stream
memory operations, as the executor's device chain plan runs it: GPU k's stream waits
for piece j's flag, copies piece j on to GPU k+1 and writes k+1's flag; pieces 1 is
one copy a hop. With --no-gate the ops are queued while the GPUs run (the clock
starts before the first is queued), GPU by GPU as the executor's lanes queue them,
each on its own host thread (Python's: slower than Go's queueing). Prints the time of
the whole broadcast (median of 5) for each size and piece count, and of a single copy
0 -> 1 of the size (the link's bytes a second).
"""

import argparse
import ctypes
import statistics
import threading
import time

import cupy as cp

libcuda = ctypes.CDLL("libcuda.so.1")


def driver_fn(*names):
    for n in names:
        try:
            f = getattr(libcuda, n)
        except AttributeError:
            continue
        f.restype = ctypes.c_int
        return f
    raise SystemExit(f"none of {names} in libcuda")


write64 = driver_fn("cuStreamWriteValue64_v2", "cuStreamWriteValue64")
write64.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint]
wait64 = driver_fn("cuStreamWaitValue64_v2", "cuStreamWaitValue64")
wait64.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint]
WAIT_GEQ = 0


def check(r, what):
    if r != 0:
        raise RuntimeError(f"{what}: CUDA error {r}")


def enable_peers(n):
    """Peer access between neighbouring GPUs of n (both ways): all a ping-pong or a chain
    needs."""
    for d in range(n):
        for p in (d - 1, d + 1):
            if 0 <= p < n:
                with cp.cuda.Device(d):
                    cp.cuda.runtime.deviceEnablePeerAccess(p)


class HostGate:
    """A word in pinned host memory a stream waits on before what is queued after it
    runs: hold(device, stream) queues the wait, open() releases every held stream."""

    def __init__(self, addr):
        self.addr = addr

    def hold(self, device, stream):
        ctypes.c_uint64.from_address(self.addr).value = 0
        with cp.cuda.Device(device):
            check(wait64(stream.ptr, self.addr, 1, WAIT_GEQ), "wait gate")

    def open(self):
        ctypes.c_uint64.from_address(self.addr).value = 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--copy-bytes", default="0,65536,1048576,8388608")
    ap.add_argument("--chain", action="store_true")
    ap.add_argument("--chain-mib", default="256,1024")
    ap.add_argument("--pieces", default="1,4,8,16,32,64")
    ap.add_argument("--no-gate", action="store_true")
    a = ap.parse_args()
    if a.chain:
        return chain(a)
    enable_peers(2)
    streams, bufs = [], []
    for d in (0, 1):
        with cp.cuda.Device(d):
            streams.append(cp.cuda.Stream(non_blocking=True))
            bufs.append(cp.zeros(8 << 20, dtype=cp.uint8))
    host = cp.cuda.alloc_pinned_memory(4096)
    gate = HostGate(host.ptr + 1024)
    for placement in ("host", "device"):
        for nbytes in (int(x) for x in a.copy_bytes.split(",")):
            times = []
            for _ in range(a.rounds):
                if placement == "host":
                    ctypes.memset(host.ptr, 0, 4096)
                    flag_a, flag_b = host.ptr, host.ptr + 256  # A: GPU 0 waits on it; B: GPU 1
                    keep = None
                else:
                    with cp.cuda.Device(0):
                        fa = cp.zeros(32, dtype=cp.uint64)
                    with cp.cuda.Device(1):
                        fb = cp.zeros(32, dtype=cp.uint64)
                    for d in (0, 1):
                        cp.cuda.Device(d).synchronize()
                    flag_a, flag_b, keep = fa.data.ptr, fb.data.ptr, (fa, fb)
                s0, s1 = streams[0].ptr, streams[1].ptr
                gate.hold(1, streams[1])
                for i in range(1, a.iters + 1):
                    with cp.cuda.Device(1):
                        check(write64(s1, flag_a, i, 0), "write A")
                        check(wait64(s1, flag_b, i, WAIT_GEQ), "wait B")
                    with cp.cuda.Device(0):
                        check(wait64(s0, flag_a, i, WAIT_GEQ), "wait A")
                        if nbytes:
                            cp.cuda.runtime.memcpyAsync(bufs[1].data.ptr, bufs[0].data.ptr, nbytes, 4, s0)
                        check(write64(s0, flag_b, i, 0), "write B")
                t0 = time.perf_counter()
                gate.open()
                streams[0].synchronize()
                streams[1].synchronize()
                times.append((time.perf_counter() - t0) / a.iters * 1e6)
                del keep
            print(f"{placement:6s} counters, copy {nbytes:>8d} B: {statistics.median(times):7.2f} µs a round trip "
                  f"(rounds {' '.join(f'{t:.2f}' for t in times)})", flush=True)


def chain(a):
    n = cp.cuda.runtime.getDeviceCount()
    enable_peers(n)
    top = max(int(x) for x in a.chain_mib.split(",")) << 20
    streams, bufs, flags = [], [], []
    for d in range(n):
        with cp.cuda.Device(d):
            streams.append(cp.cuda.Stream(non_blocking=True))
            bufs.append(cp.zeros(top, dtype=cp.uint8))
            flags.append(cp.zeros(32, dtype=cp.uint64))
    host = cp.cuda.alloc_pinned_memory(4096)
    gate = HostGate(host.ptr)

    def queue(k, size, pieces):
        piece = size // pieces
        with cp.cuda.Device(k):
            s = streams[k].ptr
            for j in range(1, pieces + 1):
                if k > 0:
                    check(wait64(s, flags[k].data.ptr, j, WAIT_GEQ), "wait piece")
                off = (j - 1) * piece
                cp.cuda.runtime.memcpyAsync(bufs[k + 1].data.ptr + off, bufs[k].data.ptr + off, piece, 4, s)
                check(write64(s, flags[k + 1].data.ptr, j, 0), "write piece")

    def run(size, pieces, hops):
        for d in range(n):
            with cp.cuda.Device(d):
                flags[d].fill(0)
                cp.cuda.Device(d).synchronize()
        if a.no_gate:
            t0 = time.perf_counter()
            threads = [threading.Thread(target=queue, args=(k, size, pieces)) for k in range(hops)]
            for t in reversed(threads):
                t.start()
            for t in threads:
                t.join()
        else:
            gate.hold(0, streams[0])
            for k in range(hops):
                queue(k, size, pieces)
            t0 = time.perf_counter()
            gate.open()
        for k in range(hops):
            streams[k].synchronize()
        return (time.perf_counter() - t0) * 1e6

    for mib in (int(x) for x in a.chain_mib.split(",")):
        size = mib << 20
        one = statistics.median(run(size, 1, 1) for _ in range(5))
        print(f"{mib:5d} MiB one copy 0 -> 1: {one:8.1f} µs ({size / one / 1e3:.1f} GB/s)", flush=True)
        for pieces in (int(x) for x in a.pieces.split(",")):
            t = statistics.median(run(size, pieces, n - 1) for _ in range(5))
            print(f"{mib:5d} MiB chain over {n} GPUs, {pieces:3d} pieces: {t:8.1f} µs ({size / t / 1e3:.1f} GB/s)",
                  flush=True)


if __name__ == "__main__":
    main()
