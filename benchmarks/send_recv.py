"""Round-trip benchmark between two processes: ucxx_go beside RAPIDS UCXX and asyncio.

The command line and the report copy UCXX's ``python -m ucxx.benchmarks.send_recv`` so
the two can be read side by side, and one client loop drives every backend, so the
difference between backends is the library, not the benchmark:

    python benchmarks/send_recv.py -n 8 --n-iter 2000 -l ucxx-go --no-detailed-report
    python benchmarks/send_recv.py -n 64KiB -x 8 -l ucxx-async -b 0 -c 1 --json out.json

A server process echoes what the client sends; each timed iteration is one round trip
(send, then receive the echo). With ``-x N`` and N > 1 each message is N buffers sent
with send_multi/recv_multi, as in UCXX; the asyncio backend frames them over one TCP
stream (a header of sizes, then the frames), the simplest alternative. Without
``--reuse-alloc`` every iteration allocates its buffers inside the timed region, as
UCXX does.
"""

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import queue
import struct
import sys
import time

from _bench_common import (
    format_bytes,
    is_loopback,
    parse_bytes,
    print_key_value,
    print_separator,
    summarize,
)

BACKENDS = ("ucxx-go", "ucxx-async", "asyncio")
PROGRESS_MODES = ("thread", "thread-polling", "blocking", "polling")
STARTUP_TIMEOUT = 60.0  # a spawned interpreter imports numpy and UCX before it answers
EXIT_TIMEOUT = 15.0  # a finished process closes its endpoint and UCX context


class BenchmarkError(Exception):
    """A run failed: a process crashed, timed out, or a backend cannot run here."""


def _import_library(backend):
    """The module a UCX backend runs on; ucxx_go and ucxx share an asyncio API."""
    name = {"ucxx-go": "ucxx_go", "ucxx-async": "ucxx"}[backend]
    try:
        return __import__(name)
    except ImportError as exc:
        hint = " (RAPIDS UCXX: pip install ucxx-cu13, or run this script with the python of a venv that has it)"
        raise BenchmarkError(
            f"backend {backend!r} needs the {name!r} module, which {sys.executable} cannot import: {exc}"
            + (hint if name == "ucxx" else "")
        ) from None


def _array_module(object_type):
    if object_type == "numpy":
        import numpy
        return numpy
    try:
        import cupy
    except ImportError as exc:
        raise BenchmarkError(f"-o cupy needs CuPy, which {sys.executable} cannot import: {exc}") from None
    return cupy


def _library_info(lib):
    config = lib.get_config()
    return {
        "name": lib.__name__,
        "version": getattr(lib, "__version__", "unknown"),
        "ucx_version": ".".join(str(v) for v in lib.get_ucx_version()),
        "transfer_api": "TAG",
        "ucx_tls": config.get("TLS"),
        "ucx_net_devices": config.get("NET_DEVICES"),
    }


async def _ucx_server(lib, args, port_queue):
    """Echo ``n_warmup_iter + n_iter`` messages to one client, then close."""
    lib.init(progress_mode=args.progress_mode)
    xp = _array_module(args.object_type)
    done = asyncio.get_running_loop().create_future()

    async def handler(ep):
        try:
            reused = xp.zeros(args.n_bytes, dtype="u1") if args.reuse_alloc else None
            for _ in range(args.n_warmup_iter + args.n_iter):
                if args.n_buffers == 1:
                    msg = reused if reused is not None else xp.zeros(args.n_bytes, dtype="u1")
                    await ep.recv(msg)
                    await ep.send(msg)
                else:
                    await ep.send_multi(await ep.recv_multi())
            await ep.close()
        except Exception as exc:
            done.set_exception(exc)
            return
        done.set_result(None)

    listener = lib.create_listener(handler, port=args.port)
    try:
        port_queue.put(listener.port)
        await asyncio.wait_for(done, args.timeout)
    finally:
        listener.close()
        lib.stop_notifier_thread()


async def _ucx_client(lib, args, port):
    """Connect, time the round trips, and describe the library the run used."""
    lib.init(progress_mode=args.progress_mode)
    xp = _array_module(args.object_type)
    ep = await asyncio.wait_for(lib.create_endpoint(args.server_address, port), STARTUP_TIMEOUT)
    n, k = args.n_bytes, args.n_buffers
    send_bufs = [xp.arange(n, dtype="u1") for _ in range(k)]
    recv_buf = xp.zeros(n, dtype="u1")
    times = []
    for i in range(args.n_warmup_iter + args.n_iter):
        start = time.perf_counter()
        if not args.reuse_alloc:
            send_bufs = [xp.arange(n, dtype="u1") for _ in range(k)]
            recv_buf = xp.zeros(n, dtype="u1") if k == 1 else None
        if k == 1:
            await ep.send(send_bufs[0])
            await ep.recv(recv_buf)
        else:
            await ep.send_multi(send_bufs)
            await ep.recv_multi()
        stop = time.perf_counter()
        if i >= args.n_warmup_iter:
            times.append(stop - start)
    info = _library_info(lib)
    await ep.close()
    lib.stop_notifier_thread()
    return times, info


async def _write_frames(writer, frames):
    """One message on a TCP stream: frame count, frame sizes, then the frames."""
    header = struct.pack(f"<Q{len(frames)}Q", len(frames), *(len(f) for f in frames))
    writer.writelines([header, *map(memoryview, frames)])
    await writer.drain()


async def _read_frames(reader):
    (count,) = struct.unpack("<Q", await reader.readexactly(8))
    sizes = struct.unpack(f"<{count}Q", await reader.readexactly(8 * count))
    return [await reader.readexactly(size) for size in sizes]


async def _asyncio_server(args, port_queue):
    """Echo ``n_warmup_iter + n_iter`` messages over a TCP stream to one client."""
    done = asyncio.get_running_loop().create_future()

    async def handler(reader, writer):
        try:
            for _ in range(args.n_warmup_iter + args.n_iter):
                if args.n_buffers == 1:
                    writer.write(await reader.readexactly(args.n_bytes))
                    await writer.drain()
                else:
                    await _write_frames(writer, await _read_frames(reader))
            writer.close()
            await writer.wait_closed()
        except Exception as exc:
            done.set_exception(exc)
            return
        done.set_result(None)

    server = await asyncio.start_server(handler, args.server_address, args.port or 0)
    async with server:
        port_queue.put(server.sockets[0].getsockname()[1])
        await asyncio.wait_for(done, args.timeout)


async def _asyncio_client(args, port):
    import numpy as np

    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(args.server_address, port, limit=2**30), STARTUP_TIMEOUT
    )
    n, k = args.n_bytes, args.n_buffers
    send_bufs = [np.arange(n, dtype="u1") for _ in range(k)]
    times = []
    for i in range(args.n_warmup_iter + args.n_iter):
        start = time.perf_counter()
        if not args.reuse_alloc:
            send_bufs = [np.arange(n, dtype="u1") for _ in range(k)]
        if k == 1:
            writer.write(memoryview(send_bufs[0]))
            await writer.drain()
            await reader.readexactly(n)
        else:
            await _write_frames(writer, send_bufs)
            await _read_frames(reader)
        stop = time.perf_counter()
        if i >= args.n_warmup_iter:
            times.append(stop - start)
    writer.close()
    await writer.wait_closed()
    info = {"name": "asyncio", "version": sys.version.split()[0], "transfer_api": "TCP stream",
            "ucx_tls": None, "ucx_net_devices": None}
    return times, info


def _pin(cpu):
    if cpu >= 0:
        os.sched_setaffinity(0, [cpu])


def _server_process(args, port_queue):
    _pin(args.server_cpu_affinity)
    if args.backend == "asyncio":
        coro = _asyncio_server(args, port_queue)
    else:
        coro = _ucx_server(_import_library(args.backend), args, port_queue)
    asyncio.run(coro)


def _client_process(args, port, result_queue):
    _pin(args.client_cpu_affinity)
    if args.backend == "asyncio":
        coro = _asyncio_client(args, port)
    else:
        coro = _ucx_client(_import_library(args.backend), args, port)
    times, info = asyncio.run(asyncio.wait_for(coro, args.timeout))
    result_queue.put({"times": times, "library": info})


def _get_from(proc, q, timeout, what):
    """What ``proc`` puts on ``q``, or BenchmarkError once it dies or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return q.get(timeout=0.2)
        except queue.Empty:
            pass
        if not proc.is_alive():
            try:  # it may have put its answer just before it exited
                return q.get(timeout=1.0)
            except queue.Empty:
                raise BenchmarkError(f"the {what} process exited with code {proc.exitcode} before answering") from None
        if time.monotonic() > deadline:
            raise BenchmarkError(f"the {what} process did not answer within {timeout:.0f} s")


def _join(proc, what, timeout):
    proc.join(timeout)
    if proc.is_alive():
        raise BenchmarkError(f"the {what} process did not exit within {timeout:.0f} s")
    if proc.exitcode != 0:
        raise BenchmarkError(f"the {what} process exited with code {proc.exitcode}")


def run(args):
    """Start the server and client processes (spawned, as UCXX does) and return the
    client's result: ``{"times": [...], "library": {...}}``, or None with --server-only."""
    ctx = mp.get_context("spawn")
    started = []
    try:
        if args.client_only:
            port = args.port
        else:
            port_queue = ctx.Queue()
            server = ctx.Process(target=_server_process, args=(args, port_queue))
            server.start()
            started.append((server, "server"))
            port = _get_from(server, port_queue, STARTUP_TIMEOUT, "server")
            print(f"Server Running at {args.server_address}:{port}")
        if args.server_only:
            _join(server, "server", args.timeout)
            return None
        print(f"Client connecting to server at {args.server_address}:{port}")
        result_queue = ctx.Queue()
        client = ctx.Process(target=_client_process, args=(args, port, result_queue))
        client.start()
        started.append((client, "client"))
        result = _get_from(client, result_queue, STARTUP_TIMEOUT + args.timeout, "client")
        for proc, what in started:
            _join(proc, what, EXIT_TIMEOUT)
        return result
    finally:
        for proc, _ in started:
            if proc.is_alive():
                proc.kill()
                proc.join(EXIT_TIMEOUT)


def report(args, result):
    """Print UCXX's report layout, plus round-trip percentiles; return the JSON record."""
    times, lib = result["times"], result["library"]
    if len(times) != args.n_iter:
        raise BenchmarkError(f"the client timed {len(times)} iterations, expected {args.n_iter}")
    stats = summarize(times, args.n_bytes, args.n_buffers)
    print("Roundtrip benchmark")
    print_separator("=")
    print_key_value("Iterations", f"{args.n_iter}")
    print_key_value("Bytes", format_bytes(args.n_bytes))
    print_key_value("Number of buffers", f"{args.n_buffers}")
    print_key_value("Object type", args.object_type)
    print_key_value("Reuse allocation", f"{args.reuse_alloc}")
    print_key_value("Backend", args.backend)
    print_key_value("Library", f"{lib['name']} {lib['version']}"
                    + (f" (UCX {lib['ucx_version']})" if lib.get("ucx_version") else ""))
    print_key_value("Transfer API", lib["transfer_api"])
    if args.backend != "asyncio":
        print_key_value("Progress mode", args.progress_mode)
        print_key_value("UCX_TLS", lib["ucx_tls"])
        print_key_value("UCX_NET_DEVICES", lib["ucx_net_devices"])
    print_separator("=")
    print_key_value("Device(s)", "CPU-only" if args.object_type == "numpy" else "GPU 0")
    for key, cpu in (("Server CPU", args.server_cpu_affinity), ("Client CPU", args.client_cpu_affinity)):
        print_key_value(key, cpu if cpu >= 0 else "affinity not set")
    print_separator("=")
    print_key_value("Bandwidth (average)", f"{format_bytes(stats['bandwidth_avg_Bps'])}/s")
    print_key_value("Bandwidth (median)", f"{format_bytes(stats['bandwidth_median_Bps'])}/s")
    print_key_value("Latency (average)", f"{int(stats['latency_avg_ns'])} ns")
    print_key_value("Latency (median)", f"{int(stats['latency_median_ns'])} ns")
    print_key_value("Round trip p50/p90/p99",
                    f"{stats['rtt_p50_us']:.1f} / {stats['rtt_p90_us']:.1f} / {stats['rtt_p99_us']:.1f} us")
    if args.n_buffers > 1:
        print_key_value("Messages/s (median)", f"{stats['msgs_per_s_median']:.0f}")
    if not args.no_detailed_report:
        print_separator("=")
        print_key_value("Iterations", "Bandwidth, Latency")
        print_separator("-")
        for i, t in enumerate(times):
            print_key_value(i, f"{format_bytes(2 * args.n_bytes * args.n_buffers / t)}/s, {int(t * 1e9 / 2)}ns")
    config = {k: getattr(args, k) for k in (
        "backend", "n_bytes", "n_buffers", "n_iter", "n_warmup_iter", "object_type", "reuse_alloc",
        "progress_mode", "server_address", "server_cpu_affinity", "client_cpu_affinity")}
    config["UCX_TLS_env"] = os.environ.get("UCX_TLS")
    return {"benchmark": "send_recv", "command": sys.argv, "python": sys.version.split()[0],
            "config": config, "library": lib, "results": stats, "times_s": times}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Roundtrip benchmark (UCXX's send_recv command line)")
    p.add_argument("-n", "--n-bytes", metavar="BYTES", default="10 Mb", type=parse_bytes,
                   help="Message size, e.g. 8, 64KiB, '10 MB' (default '10 Mb').")
    p.add_argument("-x", "--n-buffers", default=1, type=int,
                   help="Buffers per message; above 1 uses send_multi/recv_multi (default 1).")
    p.add_argument("--n-iter", metavar="N", default=10, type=int, help="Timed iterations (default 10).")
    p.add_argument("--n-warmup-iter", default=10, type=int, help="Untimed warm-up iterations (default 10).")
    p.add_argument("-b", "--server-cpu-affinity", metavar="N", default=-1, type=int,
                   help="CPU for the server process (default -1: not set).")
    p.add_argument("-c", "--client-cpu-affinity", metavar="N", default=-1, type=int,
                   help="CPU for the client process (default -1: not set).")
    p.add_argument("-o", "--object_type", "--object-type", default="numpy", choices=["numpy", "cupy"],
                   help="In-memory array type.")
    p.add_argument("-s", "--server-address", metavar="ip", default="127.0.0.1",
                   help="Server address (default 127.0.0.1).")
    p.add_argument("-p", "--port", default=None, type=int,
                   help="Port the server binds (default: any free one); needed with --client-only.")
    p.add_argument("--server-only", action="store_true", help="Start only the server process.")
    p.add_argument("--client-only", action="store_true", help="Start only the client (needs -p).")
    p.add_argument("-l", "--backend", default="ucxx-go", choices=BACKENDS, help="Library (default ucxx-go).")
    p.add_argument("--progress-mode", default="thread", choices=PROGRESS_MODES,
                   help="UCX progress mode of the UCX backends (default thread).")
    p.add_argument("--reuse-alloc", action="store_true",
                   help="Allocate buffers once instead of in every timed iteration.")
    p.add_argument("--no-detailed-report", action="store_true", help="Do not print every iteration.")
    p.add_argument("--json", metavar="PATH", help="Also write the results as JSON.")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="Seconds a run may take before its processes are killed (default 300).")
    args = p.parse_args(argv)
    if args.n_bytes < 1 or args.n_buffers < 1 or args.n_iter < 1 or args.n_warmup_iter < 0:
        p.error("--n-bytes, -x and --n-iter must be positive, --n-warmup-iter not negative")
    if args.client_only and (args.server_only or args.port is None):
        p.error("--client-only needs -p/--port and excludes --server-only")
    if args.backend == "asyncio" and args.object_type != "numpy":
        p.error("the asyncio backend moves host memory only (-o numpy)")
    return args


def main(argv=None):
    args = parse_args(argv)
    if is_loopback(args.server_address):
        os.environ.setdefault("UCX_NET_DEVICES", "lo")  # loopback sockaddr needs UCX's lo device
    try:
        if args.backend != "asyncio":
            _import_library(args.backend)  # fail here, clearly, not in a spawned process
        _array_module(args.object_type)
        result = run(args)
        if result is None:
            return 0
        record = report(args, result)
    except BenchmarkError as exc:
        print(f"send_recv: {exc}", file=sys.stderr)
        return 1
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
