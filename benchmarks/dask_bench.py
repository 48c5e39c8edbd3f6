"""Dask over tcp, ucxgo and (when installed) RAPIDS' distributed-ucxx, in one run.

    python benchmarks/dask_bench.py [--protocols tcp ucxgo ucxx] [--workers 4] [--gib 1.5] [--json FILE]

For each protocol, a LocalCluster of worker processes on loopback:
  - client.benchmark_hardware()["network"]: the bandwidth of echoing 1 KiB .. 50 MiB
    between worker pairs;
  - a p2p rechunk of a random float64 array of --gib GiB (row chunks to column chunks:
    every output chunk needs a piece of every input chunk), timed: the first, which also
    pays each worker's first shuffle (its extension's run, buffers, threads), and the
    median of --rechunk-again more over the same array;
  - (x + x.T).sum() on the same array, whose tasks fetch chunks from other workers: timed,
    with the bandwidth of those fetches over 1 MB from the workers' transfer_incoming_log (p2p
    moves its data by other means and logs none);
  - 2,000 independent small tasks (`client.map` of a trivial function, gathered), timed.
"""

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("UCX_NET_DEVICES", "lo")


def run(protocol, workers, gib, rechunk_again=2):
    import dask
    import dask.array as da
    from distributed import Client, LocalCluster

    with dask.config.set({"distributed.comm.timeouts.connect": "30s", "array.rechunk.method": "p2p"}):
        with LocalCluster(protocol=protocol, n_workers=workers, threads_per_worker=1, processes=True,
                          host="127.0.0.1", dashboard_address=None, memory_limit=0) as cluster, \
                Client(cluster) as client:
            out = {"protocol": protocol}
            hw = client.benchmark_hardware()
            out["network_MBps"] = {k: v / 1e6 for k, v in hw["network"].items()}
            n = int((gib * 2**30 / 8) ** 0.5)
            x = da.random.random((n, n), chunks=(n // (2 * workers), n)).persist()
            client.wait_for_workers(workers)
            from distributed import wait

            wait(x)
            expected = x.sum().compute()
            times = []
            for _ in range(1 + rechunk_again):
                t0 = time.perf_counter()
                total = x.rechunk((n, n // (2 * workers))).sum().compute()
                times.append(time.perf_counter() - t0)
                assert abs(total - expected) < 1e-6 * n * n
            out["rechunk_s"] = times[0]
            out["rechunk_again_s"] = statistics.median(times[1:]) if rechunk_again else None
            y = da.random.random((n, n), chunks=(n // (2 * workers), n // (2 * workers))).persist()
            wait(y)
            client.run(lambda dask_worker: dask_worker.transfer_incoming_log.clear())
            t0 = time.perf_counter()
            (y + y.T).sum().compute()
            out["transpose_s"] = time.perf_counter() - t0
            logs = client.run(lambda dask_worker: list(dask_worker.transfer_incoming_log))
            # Fetches of a chunk (8 MB here), not of the sums' 8-byte partials, which
            # last the log's 1 ms floor and made the median a few kB/s: distributed's
            # own bandwidth estimate also counts only fetches over 1 MB.
            bws = [e["bandwidth"] for log in logs.values() for e in log if e.get("bandwidth") and e["total"] > 1_000_000]
            moved = sum(e["total"] for log in logs.values() for e in log)
            out["transpose_transfers"] = len(bws)
            out["transpose_bytes_moved"] = moved
            out["transfer_bandwidth_median_MBps"] = statistics.median(bws) / 1e6 if bws else None
            t0 = time.perf_counter()
            results = client.gather(client.map(_inc, range(2000), pure=False))
            out["small_tasks_s"] = time.perf_counter() - t0
            assert results == list(range(1, 2001))
            return out


def _inc(i):
    return i + 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--protocols", nargs="+", default=["tcp", "ucxgo", "ucxx"])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--gib", type=float, default=1.5)
    ap.add_argument("--rechunk-again", type=int, default=2, help="rechunks timed after the first (median)")
    ap.add_argument("--json")
    args = ap.parse_args()
    results = []
    for p in args.protocols:
        if p == "ucxx":
            try:
                import distributed_ucxx  # noqa: F401
            except ImportError as e:
                print(f"ucxx: not installed ({e}); skipped", file=sys.stderr)
                continue
        print(f"running {p} ...", file=sys.stderr, flush=True)
        results.append(run(p, args.workers, args.gib, args.rechunk_again))
    sizes = list(results[0]["network_MBps"])
    print(f"{'':24}" + "".join(f"{r['protocol']:>12}" for r in results))
    for s in sizes:
        print(f"{'network ' + s:24}" + "".join(f"{r['network_MBps'].get(s, 0):>10.0f}MB/s"[-12:] for r in results))
    print(f"{'p2p rechunk time':24}" + "".join(f"{r['rechunk_s']:>11.2f}s" for r in results))
    if all(r.get("rechunk_again_s") for r in results):
        print(f"{'p2p rechunk again':24}" + "".join(f"{r['rechunk_again_s']:>11.2f}s" for r in results))
    print(f"{'transpose-sum time':24}" + "".join(f"{r['transpose_s']:>11.2f}s" for r in results))
    print(f"{'2,000 small tasks':24}" + "".join(f"{r['small_tasks_s']:>11.2f}s" for r in results))
    print(f"{'transfer bw (median)':24}" + "".join(f"{(r['transfer_bandwidth_median_MBps'] or 0):>8.0f}MB/s" for r in results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
