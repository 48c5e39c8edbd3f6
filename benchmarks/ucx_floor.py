"""The raw UCX floor on this machine: ucx_perftest from the libucx wheel, no Go, no Python.

    python benchmarks/ucx_floor.py [--sizes 8,1MiB,64MiB] [--tls sm,self] [--iters N]
                                   [--cpus 0,1 | --no-pin] [--error-handling] [--json FILE]

A server and a client ucx_perftest process on 127.0.0.1 run, for every size, the UCP
tests `tag_lat` (ping-pong) and `tag_bw` (the client streams, the server sinks). This
is what ucxx_go's own numbers (benchmarks/demo.py, benchmarks/completion_modes.py)
can at best approach with the same transports.

Units, because ucx_perftest's are not the ones this project uses:
- ucx_perftest reports ONE-WAY latency for ping-pong tests: it times each round trip and
  divides by 2. `tag_lat_us` keeps that (median, "50.0%ile" column); `tag_lat_rtt_us`
  is twice it, the median round trip, which is what our Python benchmarks measure.
- ucx_perftest prints bandwidth in MiB/s (bytes / 2**20) under the label "MB/s".
  `tag_bw_MBps` is converted to MB/s with MB = 1e6 bytes, like the `*_MBps` keys of
  benchmarks/demo.py, so the two compare directly.

UCX_TLS: ucx_perftest exchanges addresses over its own TCP socket, so UCX_TLS need not
include tcp; the default here, "sm,self", is same-host shared memory (posix/sysv
segments for small messages, CMA for large ones). UCX_NET_DEVICES defaults to lo.

Error handling: ucxx_go creates every endpoint with peer error handling
(UCP_ERR_HANDLING_MODE_PEER, ucxx/shim.c), and in this UCX build the shared-memory
transports (self, sysv, posix) cannot give it ("no peer failure handler"): such
endpoints go over TCP on lo even between two processes of one host, and with
UCX_TLS=sm,self they cannot connect at all. --error-handling (ucx_perftest -e) measures
what such endpoints can reach; use it with --tls '' (UCX's default selection) or a
UCX_TLS that includes tcp. Without it, the result is the machine's shared-memory floor.

measure() is imported by benchmarks/compare.py (`from ucx_floor import measure`).
"""

import argparse
import importlib.util
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import time

DEFAULT_SIZES = (8, 1 << 20, 64 << 20)
DEFAULT_TLS = "sm,self"
DEFAULT_CPUS = (0, 1)

# Auto iteration count: about this many payload bytes per test, within these bounds,
# so that a test takes well under a second on shared memory and about two over TCP.
_BYTES_PER_TEST = 1 << 30
_MIN_ITERS, _MAX_ITERS = 20, 100_000

_SERVER_START_TIMEOUT_S = 10.0
_SERVER_EXIT_TIMEOUT_S = 10.0
_MIB = 1 << 20
_BATCH_FILE = "ucx_floor_batch.txt"
_TCP_LISTEN = "0A"  # st column of /proc/net/tcp for a listening socket

_SIZE_RE = re.compile(r"^(\d+)\s*([KMG]?)(?:I?B)?$")
_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    """'8', '64K', '1MiB', '64MiB' -> bytes. K/M/G are binary (KiB/MiB/GiB)."""
    m = _SIZE_RE.match(text.strip().upper())
    if m is None:
        raise ValueError(f"bad size {text!r}: expected e.g. 8, 64KiB, 1MiB")
    return int(m.group(1)) * _SIZE_UNITS[m.group(2)]


def perftest_paths():
    """(ucx_perftest, its library directory), located from the installed libucx package.

    The wheel's binary has no RPATH to the wheel's own libucp, so it needs
    LD_LIBRARY_PATH=<libucx>/lib. find_spec locates the package without importing it
    (importing is harmless too, but loads nothing we need here).
    """
    spec = importlib.util.find_spec("libucx")
    if spec is None or spec.origin is None:
        raise RuntimeError("the libucx package is not installed (pip install libucx-cu13)")
    root = os.path.dirname(os.path.abspath(spec.origin))
    binary = os.path.join(root, "bin", "ucx_perftest")
    if not os.access(binary, os.X_OK):
        raise RuntimeError(f"{binary} is missing or not executable")
    return binary, os.path.join(root, "lib")


def _free_port():
    """A TCP port nothing listens on now (the server binds it right after)."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _is_listening(port):
    """True once some socket listens on `port` (Linux /proc; the UCX wheel is Linux-only).

    ucx_perftest's "Waiting for connection..." is block-buffered when its stdout is not
    a terminal, and probing the port with a connect would be taken as the client, so
    the kernel's socket table is the readiness signal.
    """
    suffix = f":{port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)  # header
                for line in f:
                    fields = line.split()
                    if fields[1].endswith(suffix) and fields[3] == _TCP_LISTEN:
                        return True
        except FileNotFoundError:
            continue
    return False


def _wait_listening(server, port, deadline):
    while not _is_listening(port):
        if server.poll() is not None:
            raise RuntimeError(f"ucx_perftest server exited early (rc={server.returncode})")
        if time.monotonic() > deadline:
            raise TimeoutError(f"ucx_perftest server not listening on port {port} "
                               f"after {_SERVER_START_TIMEOUT_S} s")
        time.sleep(0.02)


def _auto_iters(size):
    return max(_MIN_ITERS, min(_MAX_ITERS, _BYTES_PER_TEST // size))


def _batch_lines(sizes, iters):
    """One ucx_perftest batch line per (test, size): '<name> <options>'."""
    lines = []
    for test in ("tag_lat", "tag_bw"):
        for size in sizes:
            n = iters or _auto_iters(size)
            warmup = max(1, min(10_000, n // 10))
            lines.append(f"{test}_{size} -t {test} -s {size} -n {n} -w {warmup}")
    return lines


def _parse_csv(stdout, batch_name):
    """Rows of ucx_perftest's `-f -v` output, by test name.

    Columns (after the test name): iterations, 50.0_percentile_lat, avg_lat,
    overall_lat (us, one-way for ping-pong), avg_bw, overall_bw (MiB/s), avg_mr,
    overall_mr (msg/s).
    """
    rows = {}
    for line in stdout.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 9 or fields[0] == batch_name:
            continue
        name, _iters, p50_lat, _avg_lat, _overall_lat, _avg_bw, overall_bw, _, _ = fields
        rows[name] = {"p50_lat_us": float(p50_lat), "bw_MiBps": float(overall_bw)}
    return rows


def measure(sizes=DEFAULT_SIZES, tls=DEFAULT_TLS, iters=None, cpus=DEFAULT_CPUS,
            timeout=120.0, error_handling=False):
    """Run tag_lat and tag_bw for every size between two ucx_perftest processes.

    sizes: message sizes in bytes. tls: UCX_TLS for both processes (None or "": UCX's
    default selection). iters: iterations per test (None: about 1 GiB of payload per
    test, 20 to 100000). cpus: (server CPU, client CPU) for ucx_perftest's -c, or None
    for no pinning. timeout: seconds for the whole client run. error_handling: create
    the endpoints with peer error handling, as ucxx_go does (see the module docstring).

    Returns {"command", "tls", "error_handling", "tag_lat_us", "tag_lat_rtt_us",
    "tag_bw_MBps"}; the last three are keyed by str(size). Latencies are medians in
    microseconds (one-way as ucx_perftest reports it, and the round trip); bandwidth is
    in MB/s of 1e6 bytes.
    """
    sizes = list(dict.fromkeys(int(s) for s in sizes))  # batch test names must be unique
    if not sizes or min(sizes) < 1:
        raise ValueError(f"sizes must be positive: {sizes}")
    binary, libdir = perftest_paths()

    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (libdir, env.get("LD_LIBRARY_PATH")) if p)
    env.setdefault("UCX_NET_DEVICES", "lo")
    if tls:
        env["UCX_TLS"] = tls
    else:
        env.pop("UCX_TLS", None)

    pin_server, pin_client = [], []
    if cpus is not None:
        server_cpu, client_cpu = cpus
        allowed = os.sched_getaffinity(0)
        if not {server_cpu, client_cpu} <= allowed:
            raise ValueError(f"cpus {cpus} not all in this process's CPU set {sorted(allowed)}")
        pin_server, pin_client = ["-c", str(server_cpu)], ["-c", str(client_cpu)]

    port = _free_port()
    lines = _batch_lines(sizes, iters)
    env_words = [f"{k}={env[k]}" for k in ("LD_LIBRARY_PATH", "UCX_NET_DEVICES", "UCX_TLS")
                 if k in env]
    # Both sides read the same batch file and run its tests in order, one connection
    # each. It is named relative to the working directory so that `command` can be
    # pasted into a shell anywhere.
    common = ["-b", _BATCH_FILE, *(["-e"] if error_handling else [])]
    server_cmd = [binary, "-p", str(port), *pin_server, *common]
    client_cmd = [binary, "127.0.0.1", "-p", str(port), *pin_client, *common, "-f", "-v"]
    command = "\n".join([
        f"cat > {_BATCH_FILE} <<'EOF'", *lines, "EOF",
        shlex.join(["env", *env_words, *server_cmd]) + " &",
        shlex.join(["env", *env_words, *client_cmd]),
    ])

    with tempfile.TemporaryDirectory(prefix="ucx_floor_") as tmp:
        with open(os.path.join(tmp, _BATCH_FILE), "w") as f:
            f.write("\n".join(lines) + "\n")
        server_log_path = os.path.join(tmp, "server.log")

        def server_output():
            with open(server_log_path) as f:
                return f.read()

        with open(server_log_path, "w") as server_log:
            server = subprocess.Popen(server_cmd, cwd=tmp, env=env, stdout=server_log,
                                      stderr=subprocess.STDOUT)
            try:
                _wait_listening(server, port, time.monotonic() + _SERVER_START_TIMEOUT_S)
                client = subprocess.run(client_cmd, cwd=tmp, env=env, capture_output=True,
                                        text=True, timeout=timeout)
                if client.returncode == 0:
                    # A failed client can leave the server waiting: the finally kills it.
                    server.wait(timeout=_SERVER_EXIT_TIMEOUT_S)
            except (RuntimeError, TimeoutError, subprocess.TimeoutExpired) as exc:
                raise RuntimeError(f"{exc}\nucx_perftest server output:\n{server_output()}") \
                    from exc
            finally:
                if server.poll() is None:
                    server.kill()
                    server.wait()
        if client.returncode != 0:
            raise RuntimeError(
                f"ucx_perftest client failed (rc={client.returncode}) with UCX_TLS={tls!r}\n"
                f"client:\n{client.stdout}{client.stderr}\nserver:\n{server_output()}")

    rows = _parse_csv(client.stdout, _BATCH_FILE)
    missing = [line.split()[0] for line in lines if line.split()[0] not in rows]
    if missing:
        raise RuntimeError(f"ucx_perftest gave no result for {missing}:\n{client.stdout}"
                           f"{client.stderr}")
    one_way = {str(s): rows[f"tag_lat_{s}"]["p50_lat_us"] for s in sizes}
    return {
        "command": command,
        "tls": tls,
        "error_handling": bool(error_handling),
        "tag_lat_us": one_way,
        "tag_lat_rtt_us": {k: round(2 * v, 3) for k, v in one_way.items()},
        "tag_bw_MBps": {str(s): round(rows[f"tag_bw_{s}"]["bw_MiBps"] * _MIB / 1e6, 2)
                        for s in sizes},
    }


def _print_table(result):
    print(f"UCX_TLS={result['tls'] or '(UCX default)'}, peer error handling "
          f"{'on' if result['error_handling'] else 'off'}")
    print(f"{'size (B)':>10} {'tag_lat one-way p50':>20} {'round trip p50':>15} "
          f"{'tag_bw':>14}")
    for size, one_way in result["tag_lat_us"].items():
        print(f"{size:>10} {one_way:>17.3f} us {result['tag_lat_rtt_us'][size]:>12.3f} us "
              f"{result['tag_bw_MBps'][size]:>9.1f} MB/s")
    print("(MB = 1e6 bytes; ucx_perftest's own 'MB/s' column is MiB/s)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,1MiB,64MiB",
                    help="comma-separated sizes; K/M/G suffixes are binary (default: %(default)s)")
    ap.add_argument("--tls", default=DEFAULT_TLS,
                    help="UCX_TLS for both processes; '' for UCX's default (default: %(default)s)")
    ap.add_argument("--iters", type=int, default=None,
                    help="iterations per test (default: about 1 GiB of payload per test)")
    pin = ap.add_mutually_exclusive_group()
    pin.add_argument("--cpus", default="0,1",
                     help="server,client CPUs for ucx_perftest -c (default: %(default)s)")
    pin.add_argument("--no-pin", action="store_true", help="do not pin either process")
    ap.add_argument("--error-handling", action="store_true",
                    help="endpoints with peer error handling, as ucxx_go's (ucx_perftest -e)")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds allowed for the whole client run (default: %(default)s)")
    ap.add_argument("--json", help="write the result to this file")
    args = ap.parse_args(argv)

    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    cpus = None if args.no_pin else tuple(int(c) for c in args.cpus.split(","))
    if cpus is not None and len(cpus) != 2:
        ap.error("--cpus takes two CPUs: server,client")
    result = measure(sizes, args.tls, iters=args.iters, cpus=cpus, timeout=args.timeout,
                     error_handling=args.error_handling)
    print(result["command"])
    print()
    _print_table(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
