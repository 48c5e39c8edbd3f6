# Session 44: Dask's own network benchmark (distributed.worker.benchmark_network: the rpc echo, 1 s a size)
# between two workers of a LocalCluster, for PROTO (tcp or ucxgo) with whatever UCXGO_*/UCX_* the caller set;
# prints MB/s as distributed reports it (bytes echoed both ways over the second).
import os
from distributed import Client, LocalCluster


async def bench(dask_worker, address):
    from distributed.worker import benchmark_network
    return await benchmark_network(address=address, rpc=dask_worker.rpc, sizes=("100 kiB", "1 MiB", "10 MiB"))


if __name__ == "__main__":
    with LocalCluster(n_workers=2, threads_per_worker=1, protocol=os.environ["PROTO"], dashboard_address=None) as c, \
            Client(c) as cl:
        a, b = list(cl.scheduler_info()["workers"])
        r = cl.run(bench, address=b, workers=[a])[a]
        print(" ".join(f"{k} {v / 1e6:7.0f}" for k, v in r.items()), flush=True)
