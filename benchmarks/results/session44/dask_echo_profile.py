# Session 44: a 10 MiB rpc echo between two Dask workers, timed per echo (median); run under py-spy for the
# profile in README.md:  py-spy record -s -r 500 -f raw -o prof.txt -- python dask_echo_profile.py ucxgo  (N=150)
import os, sys
from distributed import Client, LocalCluster


async def bench(dask_worker, address, n=int(__import__("os").environ.get("N", "30"))):
    import random, os
    from time import perf_counter
    from distributed.protocol import to_serialize
    out = {}
    async with dask_worker.rpc(address) as r:
        for size in [int(os.environ.get("SIZE", 10 << 20))]:
            data = to_serialize(random.randbytes(size))
            ts = []
            for i in range(n):
                t = perf_counter()
                await r.echo(data=data)
                ts.append(perf_counter() - t)
            ts.sort()
            out[size] = round(ts[len(ts) // 2] * 1e3, 2)
    return out


def main(proto):
    with LocalCluster(n_workers=2, threads_per_worker=1, protocol=proto, dashboard_address=None) as c, Client(c) as cl:
        a, b = list(cl.scheduler_info()["workers"])
        print(proto, os.environ.get("UCXGO_PROGRESS_MODE"), cl.run(bench, address=b, workers=[a])[a], flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
