"""A/B: the same send_recv runs under two Pythons (two builds of ucxx-go), alternating.

    python benchmarks/ab.py --a /path/to/old/venv/bin/python --b .venv/bin/python \\
        --rounds 5 --out benchmarks/results/ab.md

Each configuration (8 B round trip, 1 MiB, 8 x 64 KiB send_multi by default) runs
`--rounds` times under each interpreter, A and B alternating within a round so drift on
a shared machine hits both. It reports the median over rounds of each run's median
round trip and of its median bandwidth, and B's ratio to A.
"""

import argparse
import statistics
import sys

from _bench_common import emit_markdown, send_recv_once

CONFIGS = {
    "8 B round trip": ["-n", "8", "--n-iter", "2000", "--n-warmup-iter", "200"],
    "1 MiB": ["-n", "1MiB", "--n-iter", "200", "--n-warmup-iter", "20"],
    "8 x 64 KiB send_multi": ["-n", "64KiB", "-x", "8", "--n-iter", "200", "--n-warmup-iter", "20"],
    "4 x 1 MiB send_multi": ["-n", "1MiB", "-x", "4", "--n-iter", "100", "--n-warmup-iter", "10"],
}

# send_multi shapes (--shapes): frames per message x bytes per frame, for the wire of
# multi-buffer messages (one UCX message per frame, or gathered); one frame is a plain
# send/recv in send_recv.py.
SHAPES = {
    f"{x} x {label} {'send_multi' if x > 1 else 'send/recv'}": ["-n", size, "-x", str(x), "--n-iter", str(iters), "--n-warmup-iter", str(max(iters // 10, 2))]
    for x in (1, 3, 8, 64)
    for label, size, iters in (("8 B", "8", 2000), ("64 KiB", "64KiB", 200), ("1 MiB", "1MiB", 100 if x < 64 else 10))
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", required=True, help="Python of build A (before)")
    p.add_argument("--b", required=True, help="Python of build B (after)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", help="also write the table (Markdown) here")
    p.add_argument("--only", action="append", choices=list(CONFIGS) + list(SHAPES), help="run only this configuration (repeatable)")
    p.add_argument("--shapes", action="store_true", help="run the send_multi shapes instead of the usual configurations")
    args = p.parse_args(argv)
    rows = []
    for name, cfg in (SHAPES if args.shapes else CONFIGS).items():
        if args.only and name not in args.only:
            continue
        got = {"A": [], "B": []}
        for r in range(args.rounds):
            for side in ("AB" if r % 2 == 0 else "BA"):
                res = send_recv_once(args.a if side == "A" else args.b, cfg)
                if res is None:
                    raise RuntimeError(f"send_recv failed under build {side}: {cfg}")
                got[side].append(res)
        med = {s: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for s, v in got.items()}
        rows.append((name, med["A"], med["B"]))
    lines = [
        f"A: `{args.a}`, B: `{args.b}`; {args.rounds} rounds, medians over rounds of each run's median.",
        "",
        "| configuration | RTT p50 A (us) | RTT p50 B (us) | B/A | bandwidth A (MB/s) | bandwidth B (MB/s) | B/A |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, a, b in rows:
        lines.append(f"| {name} | {a[0]:.1f} | {b[0]:.1f} | {b[0] / a[0]:.2f} | {a[1] / 1e6:.0f} | {b[1] / 1e6:.0f} | {b[1] / a[1]:.2f} |")
    emit_markdown(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
