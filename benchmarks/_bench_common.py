"""Helpers shared by the benchmarks: byte sizes in and out, the statistics of a run's
round-trip times, UCXX's report layout, a listener that serves one client.

Only the standard library: send_recv.py runs under interpreters that hold ucxx_go, RAPIDS
ucxx or neither, and compare.py imports this before it knows which.
"""

import ipaddress
import json
import math
import os
import re
import statistics
import subprocess
import tempfile

# dask.utils.parse_bytes' units, which UCXX's benchmark accepts: decimal without "i",
# binary with it, case-insensitive ("10 Mb" is 10_000_000 bytes, "1MiB" is 1_048_576).
_UNITS = {
    "": 1, "b": 1,
    "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6,
    "g": 10**9, "gb": 10**9, "t": 10**12, "tb": 10**12,
    "ki": 2**10, "kib": 2**10, "mi": 2**20, "mib": 2**20,
    "gi": 2**30, "gib": 2**30, "ti": 2**40, "tib": 2**40,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")


def parse_bytes(text):
    """Parse "8", "1MiB", "10 MB" or "1.5 KiB" into a number of bytes.

    Raises
    ------
    ValueError
        The text is not a non-negative number with one of dask's byte units.
    """
    m = _SIZE.match(str(text))
    unit = m.group(2).lower() if m else None
    if unit not in _UNITS:
        raise ValueError(f"not a byte size: {text!r} (try 8, 64KiB, 1MiB, '10 MB')")
    return int(float(m.group(1)) * _UNITS[unit])


def format_bytes(n):
    """Binary units, as UCXX's report prints them: "8 B", "64.00 KiB", "1.00 MiB"."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"


def size_label(n):
    """A short exact name for a size, for table rows and plots: "8 B", "64 KiB", "1 MiB"."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def is_loopback(host):
    """True for 127.0.0.0/8, ::1 and "localhost": traffic that never leaves the machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def percentile(sorted_values, p):
    """Nearest-rank percentile of an ascending list: always one of the measured values."""
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def summarize(times, n_bytes, n_buffers):
    """The numbers of a run from its per-iteration round-trip times (seconds).

    Bandwidth and latency follow UCXX's definitions so they compare with its report:
    each round trip moves ``2 * n_bytes * n_buffers`` bytes, and "latency" is half a round
    trip. The round-trip percentiles and message rates are what UCXX does not print.
    """
    if not times or min(times) <= 0:
        raise ValueError("a run needs at least one positive round-trip time")
    total, median = sum(times), statistics.median(times)
    moved = 2 * n_bytes * n_buffers
    ordered = sorted(times)
    return {
        "bandwidth_avg_Bps": len(times) * moved / total,
        "bandwidth_median_Bps": moved / median,
        "latency_avg_ns": total * 1e9 / (2 * len(times)),
        "latency_median_ns": median * 1e9 / 2,
        "rtt_p50_us": percentile(ordered, 50) * 1e6,
        "rtt_p90_us": percentile(ordered, 90) * 1e6,
        "rtt_p99_us": percentile(ordered, 99) * 1e6,
        "msgs_per_s_avg": 2 * len(times) / total,
        "msgs_per_s_median": 2 / median,
    }


def print_separator(char="-", length=80):
    print(char * length)


def print_key_value(key, value, key_length=25):
    """One line of UCXX's report layout: the key padded to a fixed width, then the value."""
    print(f"{key: <{key_length}} | {value}")


def send_recv_once(python, args, env=None, timeout=600):
    """Run ucxx_go's send_recv.py once under ``python`` with extra ``args``; return its
    (round trip p50 in us, median bandwidth in bytes/s), or None if it failed."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "send_recv.py")
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [python, script, "-l", "ucxx-go", "--no-detailed-report", "--json", out.name, *args]
        res = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, timeout=timeout)
        if res.returncode != 0:
            return None
        with open(out.name) as f:
            results = json.load(f)["results"]
    return results["rtt_p50_us"], results["bandwidth_median_Bps"]


def emit_markdown(lines, out=None):
    """Print a report's lines, and write them to ``out`` too when given."""
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text)


async def serve_one_client(ucxx, handler, port_queue):
    """Run a listener of `ucxx` (ucxx_go or RAPIDS ucxx, already imported) whose
    `handler(ep)` serves one client; put its port on `port_queue`, and return once the
    first handler has returned (closing the endpoint and the listener)."""
    import asyncio

    finished = asyncio.Event()

    async def serve(ep):
        try:
            await handler(ep)
        finally:
            await ep.close()
            finished.set()

    listener = ucxx.create_listener(serve)
    port_queue.put(listener.port)
    await finished.wait()
    listener.close()


def device_copy_MBps(src_gpu, dst_gpu, size, iters):
    """Bandwidth (MB/s) of `iters` copies of `size` bytes from GPU src_gpu to dst_gpu in
    this process, timed with events: cudaMemcpyPeerAsync with peer access enabled, or
    cudaMemcpyAsync device to device on one GPU (the null stream)."""
    import cupy as cp

    with cp.cuda.Device(dst_gpu):
        dst = cp.empty(size, dtype=cp.uint8)
    with cp.cuda.Device(src_gpu):
        src = cp.ones(size, dtype=cp.uint8)
        if src_gpu != dst_gpu:
            try:
                cp.cuda.runtime.deviceEnablePeerAccess(dst_gpu)
            except cp.cuda.runtime.CUDARuntimeError:
                pass  # enabled already
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(iters):
            if src_gpu == dst_gpu:
                cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, size, cp.cuda.runtime.memcpyDeviceToDevice, 0)
            else:
                cp.cuda.runtime.memcpyPeerAsync(dst.data.ptr, dst_gpu, src.data.ptr, src_gpu, size, 0)
        end.record()
        end.synchronize()
        return size * iters / (cp.cuda.get_elapsed_time(start, end) / 1e3) / 1e6


async def await_window(make, count):
    """Await ``count`` operations made by ``make(i)`` together. One is awaited directly,
    as code that waits for each operation is written; several through asyncio.gather,
    whose task per operation costs ~10-20 µs of Python (benchmarks/RESULTS.md, session
    25: a 1 MiB put on one H200 took 14 µs awaited, 25-37 µs gathered alone)."""
    if count == 1:
        await make(0)
    else:
        import asyncio

        await asyncio.gather(*(make(i) for i in range(count)))
