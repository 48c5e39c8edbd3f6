# Session 43: Dask's own network benchmark (the rpc echo of distributed.worker.benchmark_network) between two
# workers of a LocalCluster, 100 KiB / 1 MiB / 10 MiB, for tcp and ucxgo in thread and loop mode, R rounds
# alternating; MB/s as distributed reports it (bytes echoed both ways over the second).
#   UCX_NET_DEVICES=lo R=3 python dask_rpc_echo.py
import os, sys
from distributed import Client, LocalCluster

VARIANTS = {"tcp": ("tcp", None), "ucxgo-thread": ("ucxgo", "thread"), "ucxgo-loop": ("ucxgo", "loop")}


def one(proto, mode):
    if mode:
        os.environ["UCXGO_PROGRESS_MODE"] = mode
    else:
        os.environ.pop("UCXGO_PROGRESS_MODE", None)
    with LocalCluster(n_workers=2, threads_per_worker=1, protocol=proto, dashboard_address=None) as c, Client(c) as cl:
        a, b = list(cl.scheduler_info()["workers"])

        async def bench(dask_worker, address):
            from distributed.worker import benchmark_network
            return await benchmark_network(address=address, rpc=dask_worker.rpc, sizes=("100 kiB", "1 MiB", "10 MiB"))

        return {k: v / 1e6 for k, v in cl.run(bench, address=b, workers=[a])[a].items()}


if __name__ == "__main__":
    names = os.environ.get("VARIANTS", "tcp ucxgo-thread ucxgo-loop").split()
    for rnd in range(int(os.environ.get("R", "2"))):
        order = names if rnd % 2 == 0 else names[::-1]
        for v in order:
            r = one(*VARIANTS[v])
            print(f"round {rnd} {v:13}" + "".join(f" {k} {r[k]:7.0f}" for k in r), flush=True)
