"""A probe (session 34, issue 26): dask_bench.py's p2p rechunk alone, repeated in one cluster.

    python rechunk_probe.py tcp|ucxgo [reps] [gib] [warm]

warm: a p2p rechunk of a 64 MiB array first, untimed (each worker's first shuffle paid ahead).

Prints each repetition's time (the first includes the workers' connections).
UCXGO_PROGRESS_MODE=thread|loop|auto picks ucxgo's progress in the workers (Dask's default: auto).
"""
import os, sys, time
os.environ.setdefault("UCX_NET_DEVICES", "lo")

def main():
    import dask, dask.array as da
    from distributed import Client, LocalCluster, wait
    proto = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    gib = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    if proto == "ucxgo":
        import ucxx_go.distributed_backend  # noqa: F401
    with dask.config.set({"distributed.comm.timeouts.connect": "30s", "array.rechunk.method": "p2p"}):
        with LocalCluster(protocol=proto, n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None, memory_limit=0) as cluster, Client(cluster) as client:
            n = int((gib * 2**30 / 8) ** 0.5)
            x = da.random.random((n, n), chunks=(n // 4, n)).persist()
            wait(x)
            ref = x.sum().compute()
            if "warm" in sys.argv[4:]:
                m = int((2**26 / 8) ** 0.5)
                w = da.random.random((m, m), chunks=(m // 4, m)).persist()
                wait(w)
                w.rechunk((m, m // 4)).sum().compute()
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                total = x.rechunk((n, n // 4)).sum().compute()
                times.append(time.perf_counter() - t0)
                assert abs(total - ref) < 1e-6 * n * n
            print(proto, os.environ.get("UCXGO_PROGRESS_MODE", "-"), "warm" if "warm" in sys.argv[4:] else "cold",
                  " ".join(f"{t:.2f}" for t in times), flush=True)

if __name__ == "__main__":
    main()
