# Session 41, dev VM: a p2p rechunk of 1 GiB on 2 workers, 3 in a row per process, with the send time distributed logs
# for its p2p comms (digests_total, ("p2p", span, "background-comms", "send", "seconds"), summed over workers and
# concurrent sends). Run: UCX_NET_DEVICES=lo python p2p_metrics.py tcp|ucxgo [WORKERS [GIB]] (defaults 2 and 1;
# session 42 ran it with 4 and 1.5 on the GPU machine's 16 cores)
import sys, time, collections
import dask, dask.array as da
from distributed import Client, LocalCluster, wait
def main():
    proto = sys.argv[1]
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    gib = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    with dask.config.set({"array.rechunk.method": "p2p"}):
        with LocalCluster(protocol=proto, n_workers=workers, threads_per_worker=1, host="127.0.0.1", dashboard_address=None, memory_limit=0) as c, Client(c) as client:
            n = int((gib * 2**30 / 8) ** 0.5)
            x = da.random.random((n, n), chunks=(n // 4, n)).persist(); wait(x)
            for i in range(3):
                client.run(lambda dask_worker: dask_worker.digests_total.clear())
                t0 = time.perf_counter(); x.rechunk((n, n // 4)).sum().compute(); dt = time.perf_counter() - t0
                d = client.run(lambda dask_worker: {k: v for k, v in dask_worker.digests_total.items() if isinstance(k, tuple) and k and k[0] in ("p2p", "execute")})
                agg = collections.defaultdict(float)
                for w in d.values():
                    for k, v in w.items():
                        if k[-1] == "seconds":
                            agg[(k[0],) + tuple(x for x in k[2:-1] if isinstance(x, str))] += v
                top = sorted(agg.items(), key=lambda kv: -kv[1])[:12]
                print(proto, f"run {i} {dt:.2f}s", "; ".join(f"{'/'.join(k)}={v:.2f}" for k, v in top), flush=True)

if __name__ == '__main__':
    main()
