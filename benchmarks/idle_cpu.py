"""CPU used by an idle process: a listener and two connected endpoints, nothing moving.

    python benchmarks/idle_cpu.py [--seconds 10] [--rounds 3]

One process listens, connects two endpoints to its own listener, echoes one message on
each (so every lane is wired up), then sleeps in its event loop. Measured: the process's
CPU time (user + system, all threads) over the idle window, as a percentage of one core;
the median over rounds. A second line gives the same for a process that only imported
ucxx_go and started its engine (no endpoints), to separate the engine from the
connections.
"""

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("UCX_NET_DEVICES", "lo")

MODES = {"connected": "listener + 2 endpoints", "engine": "engine only"}


def cpu_seconds():
    """User + system CPU time of the whole process (every thread), to the nanosecond
    (CLOCK_PROCESS_CPUTIME_ID; os.times counts 10 ms ticks)."""
    return time.process_time()


async def idle_window(seconds):
    c0, w0 = cpu_seconds(), time.monotonic()
    await asyncio.sleep(seconds)
    return 100.0 * (cpu_seconds() - c0) / (time.monotonic() - w0)


async def measure(seconds, connect):
    import numpy as np

    import ucxx_go

    ucxx_go.init()
    if not connect:
        return await idle_window(seconds)

    served = []

    async def echo(ep):
        buf = np.empty(8, dtype="u1")
        await ep.recv(buf)
        await ep.send(buf)
        served.append(ep)  # kept open: an idle connection

    listener = ucxx_go.create_listener(echo)
    eps = [await ucxx_go.create_endpoint("127.0.0.1", listener.port) for _ in range(2)]
    for ep in eps:
        await ep.send(np.arange(8, dtype="u1"))
        await ep.recv(np.empty(8, dtype="u1"))
    await asyncio.sleep(0.5)  # past the progress thread's spin after the last work
    pct = await idle_window(seconds)
    for ep in eps:
        await ep.close()
    listener.close()
    return pct


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--one", choices=MODES, help=argparse.SUPPRESS)  # one round, in this process
    args = ap.parse_args()
    if args.one:
        print(asyncio.run(measure(args.seconds, connect=args.one == "connected")))
        return
    for mode, label in MODES.items():
        runs = []
        for _ in range(args.rounds):
            out = subprocess.run([sys.executable, __file__, "--seconds", str(args.seconds), "--one", mode],
                                 check=True, capture_output=True, text=True).stdout
            runs.append(float(out.strip().splitlines()[-1]))
        print(f"{label}: {statistics.median(runs):.2f}% of a core (rounds: "
              + ", ".join(f"{r:.2f}" for r in runs) + f"; {args.seconds:g} s idle each)")


if __name__ == "__main__":
    main()
