"""Small-message round trips with several process pairs at once: the oversubscribed case.

Runs ``send_recv.py`` K times concurrently (K server/client pairs, so 2K Python
processes, each with its own engine), for each value of ``--pairs`` and each engine
progress mode in ``--modes`` (set through ``UCXGO_PROGRESS_MODE``), interleaving the
modes round by round so that they see the same machine. Reports, per configuration,
the median over rounds of the median over pairs of the round-trip p50 (us), and the
aggregate round trips per second (the sum over pairs of 1 / mean round trip: stalls
count here, not in a p50).

    python benchmarks/oversubscribed.py --pairs 1,2,4 --modes thread,loop --rounds 5
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run_round(pairs, mode, args, tmp):
    env = dict(os.environ)
    name, *extra = mode.split("/")  # "thread/UCXGO_SPIN_US=0": a mode with more environment
    if name != "default":
        env["UCXGO_PROGRESS_MODE"] = name
    env.update(kv.split("=", 1) for kv in extra)
    procs, outs = [], []
    for i in range(pairs):
        out = os.path.join(tmp, f"{abs(hash(mode))}-{pairs}-{i}.json")
        outs.append(out)
        cmd = [sys.executable, os.path.join(HERE, "send_recv.py"), "-n", str(args.size), "--n-iter", str(args.n_iter),
               "--n-warmup-iter", str(args.warmup), "--no-detailed-report", "--json", out]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    p50s, rates = [], []
    for p, out in zip(procs, outs):
        _, err = p.communicate(timeout=args.timeout)
        if p.returncode != 0:
            raise SystemExit(f"{mode} x{pairs}: send_recv.py failed ({p.returncode}):\n{err.decode()[-2000:]}")
        with open(out) as f:
            res = json.load(f)["results"]
        p50s.append(res["rtt_p50_us"])
        rates.append(1e9 / (2 * res["latency_avg_ns"]))  # round trips/s over the pair's timed loop
    return statistics.median(p50s), sum(rates), p50s


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", default="1,2,4", help="Comma-separated numbers of concurrent pairs.")
    p.add_argument("--modes", default="thread,loop",
                   help="UCXGO_PROGRESS_MODE values ('default': unset), each optionally followed by /VAR=VALUE settings.")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--size", default="8", help="Message size (send_recv.py -n).")
    p.add_argument("--n-iter", type=int, default=5000)
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--json", help="Also write every round's numbers here.")
    args = p.parse_args()
    pairs_list = [int(x) for x in args.pairs.split(",")]
    modes = args.modes.split(",")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for pairs in pairs_list:
                for mode in modes:
                    med, rate, all_p50 = run_round(pairs, mode, args, tmp)
                    results.setdefault((pairs, mode), []).append((med, rate, all_p50))
                    print(f"round {r} pairs={pairs} mode={mode}: p50 per pair {[round(x, 1) for x in all_p50]} us, "
                          f"aggregate {rate:.0f} round trips/s", flush=True)
    print()
    print(f"size {args.size} B, {args.n_iter} iterations, {args.rounds} rounds, {os.cpu_count()} CPUs")
    print("| pairs | mode | RTT p50 (us), median over rounds of the pairs' median | aggregate round trips/s, from mean RTTs (median over rounds) |")
    print("| ---: | --- | ---: | ---: |")
    for pairs in pairs_list:
        for mode in modes:
            rows = results[(pairs, mode)]
            print(f"| {pairs} | {mode} | {statistics.median(x[0] for x in rows):.1f} "
                  f"(rounds: {', '.join(f'{x[0]:.1f}' for x in rows)}) | {statistics.median(x[1] for x in rows):.0f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({f"{k[0]}:{k[1]}": v for k, v in results.items()}, f, indent=1)


if __name__ == "__main__":
    main()
