# Session 44: Dask's own network benchmark (distributed.worker.benchmark_network, 1 s a size) run by NPAIRS pairs
# of workers of one LocalCluster at once, as Scheduler.benchmark_hardware runs it (there: every pair, all six
# sizes); PROTO (tcp or ucxgo) with whatever UCXGO_*/UCX_* the caller set. Prints each pair's MB/s and the mean
# over pairs (benchmark_hardware's figure).
import os
from distributed import Client, LocalCluster

SIZES = tuple(os.environ.get("SIZES", "100 kiB,1 MiB,10 MiB").split(","))


async def bench(dask_worker, partners):
    from distributed.worker import benchmark_network
    return await benchmark_network(address=partners[dask_worker.address], rpc=dask_worker.rpc, sizes=SIZES)


if __name__ == "__main__":
    n = int(os.environ.get("NPAIRS", "2"))
    with LocalCluster(n_workers=2 * n, threads_per_worker=1, protocol=os.environ["PROTO"],
                      dashboard_address=None) as c, Client(c) as cl:
        ws = list(cl.scheduler_info()["workers"])
        partners = dict(zip(ws[0::2], ws[1::2]))
        res = cl.run(bench, partners=partners, workers=list(partners))
        mean = {k: sum(r[k] for r in res.values()) / len(res) / 1e6 for k in SIZES}
        each = " | ".join(" ".join(f"{r[k] / 1e6:.0f}" for k in SIZES) for r in res.values())
        print(" ".join(f"{k} {v:7.0f}" for k, v in mean.items()) + f"   (pairs: {each})", flush=True)
