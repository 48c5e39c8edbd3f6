"""UCX settings study: ucxx_go's send_recv under several UCX configurations, side by side.

    python benchmarks/ucx_settings.py --rounds 3 --out benchmarks/ucx_settings.md

Every variant (a set of UCX_* variables) runs every shape (message size, buffers per
message) once per round, the variants in alternating order round by round, so that
drift on a shared machine hits them alike. The table gives, per shape, the median over
rounds of each run's median round trip and bandwidth. Variables a variant does not name
are removed from the environment, so ucxx_go's own defaults (core/ucxdefaults.go) apply
to them; rows that name UCX's defaults set those variables to UCX's built-in values.
"""

import argparse
import os
import platform
import statistics
import sys

from _bench_common import emit_markdown, format_bytes, send_recv_once


# (name, environment). Transport groups first, then protocol choices on each.
VARIANTS = {
    "UCX defaults": {"UCX_MM_ERROR_HANDLING": "n", "UCX_TCP_TX_SEG_SIZE": "8K", "UCX_TCP_RX_SEG_SIZE": "64K"},
    "MM_ERROR_HANDLING=y": {"UCX_MM_ERROR_HANDLING": "y", "UCX_TCP_TX_SEG_SIZE": "8K", "UCX_TCP_RX_SEG_SIZE": "64K"},
    "MM_ERROR_HANDLING=y, RNDV_SCHEME=put_zcopy": {"UCX_MM_ERROR_HANDLING": "y", "UCX_RNDV_SCHEME": "put_zcopy",
                                                   "UCX_TCP_TX_SEG_SIZE": "8K", "UCX_TCP_RX_SEG_SIZE": "64K"},
    "ucxx_go defaults": {},
    "tcp,self, UCX defaults": {"UCX_TLS": "tcp,self", "UCX_TCP_TX_SEG_SIZE": "8K", "UCX_TCP_RX_SEG_SIZE": "64K"},
    "tcp,self, RNDV_SCHEME=put_zcopy": {"UCX_TLS": "tcp,self", "UCX_RNDV_SCHEME": "put_zcopy",
                                        "UCX_TCP_TX_SEG_SIZE": "8K", "UCX_TCP_RX_SEG_SIZE": "64K"},
    "tcp,self, PROTO_ENABLE=n": {"UCX_TLS": "tcp,self", "UCX_PROTO_ENABLE": "n",
                                 "UCX_TCP_TX_SEG_SIZE": "8K", "UCX_TCP_RX_SEG_SIZE": "64K"},
    "tcp,self, TCP_TX/RX_SEG_SIZE=64K": {"UCX_TLS": "tcp,self", "UCX_TCP_TX_SEG_SIZE": "64K", "UCX_TCP_RX_SEG_SIZE": "64K"},
    "tcp,self, ucxx_go defaults": {"UCX_TLS": "tcp,self"},
}
# (bytes, buffers, iterations)
SHAPES = [(8, 1, 2000), (64 << 10, 1, 1000), (1 << 20, 1, 200), (64 << 20, 1, 10), (64 << 10, 8, 300)]
STUDIED = ("UCX_TLS", "UCX_MM_ERROR_HANDLING", "UCX_RNDV_SCHEME", "UCX_PROTO_ENABLE", "UCX_TCP_TX_SEG_SIZE",
           "UCX_TCP_RX_SEG_SIZE")


def run_once(env_vars, n_bytes, n_buffers, n_iter, timeout):
    env = {k: v for k, v in os.environ.items() if k not in STUDIED}
    env.setdefault("UCX_NET_DEVICES", "lo")
    env.update(env_vars)
    args = ["--reuse-alloc", "-b", "0", "-c", "1", "-n", str(n_bytes), "-x", str(n_buffers), "--n-iter", str(n_iter),
            "--n-warmup-iter", str(max(2, n_iter // 10)), "--timeout", str(timeout)]
    return send_recv_once(sys.executable, args, env, timeout + 60)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--variants", help="semicolon-separated subset of variant names")
    p.add_argument("--timeout", type=int, default=120)
    p.add_argument("--out", help="also write the Markdown here")
    args = p.parse_args(argv)
    variants = VARIANTS
    if args.variants:
        variants = {k: VARIANTS[k] for k in args.variants.split(";")}
    got = {(v, s): [] for v in variants for s in SHAPES}
    names = list(variants)
    for r in range(args.rounds):
        for v in (names if r % 2 == 0 else names[::-1]):
            for s in SHAPES:
                res = run_once(variants[v], *s, args.timeout)
                if res is not None:
                    got[(v, s)].append(res)
                print(f"round {r} {v} {s}: {res}", file=sys.stderr, flush=True)
    shape_names = [f"{format_bytes(n)}" + (f" x {k}" if k > 1 else "") for n, k, _ in SHAPES]
    lines = [
        "# UCX settings study: ucxx_go send_recv under UCX configurations",
        "",
        f"Command: `python benchmarks/ucx_settings.py --rounds {args.rounds}`. Machine: {platform.node() and 'this machine'}"
        f" ({os.cpu_count()} CPUs, {platform.machine()}), loopback (`UCX_NET_DEVICES=lo`), server on CPU 0, client on CPU 1,"
        " buffers reused. Medians over rounds of each run's median; a variant's other settings are ucxx_go's defaults.",
        "",
        "Round-trip p50 (µs) / ping-pong bandwidth (MB/s, both directions as UCXX counts):",
        "",
        "| variant | " + " | ".join(shape_names) + " |",
        "| --- |" + " ---: |" * len(SHAPES),
    ]
    for v in variants:
        cells = []
        for s in SHAPES:
            runs = got[(v, s)]
            if not runs:
                cells.append("failed")
                continue
            rtt = statistics.median(x[0] for x in runs)
            bw = statistics.median(x[1] for x in runs) / 1e6
            cells.append(f"{rtt:,.1f} µs / {bw:,.0f}")
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    emit_markdown(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
