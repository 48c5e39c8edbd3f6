"""A probe (session 33, issue 26): distributed's benchmark_network echo between two
processes, without a cluster: a distributed.core.Server in a child process, an rpc
echoing to_serialize(random bytes) for a while, as Worker.benchmark_network does.

    python dask_echo_probe.py tcp|ucxgo SIZE SECONDS [prof]

prof: cProfile of the client; SERVER_PROF=S (env): the server runs S seconds under
cProfile and prints its top functions. Run it with MALLOC_TRIM_THRESHOLD_=65536 for the
condition of a Dask worker started by a nanny (distributed.nanny.pre-spawn-environ).
"""
import asyncio, os, sys, time, random, multiprocessing as mp
os.environ.setdefault("UCX_NET_DEVICES", "lo")

def serve(proto, q):
    import ucxx_go.distributed_backend  # registers ucxgo
    from distributed.core import Server
    async def main():
        s = Server({})
        await s.listen(f"{proto}://127.0.0.1:0")
        q.put(s.address)
        await asyncio.sleep(float(os.environ.get("SERVER_PROF", "3600")))
    if os.environ.get("SERVER_PROF"):
        import cProfile, pstats
        pr = cProfile.Profile(); pr.enable()
        asyncio.run(main())
        pr.disable(); pstats.Stats(pr).sort_stats("tottime").print_stats(14)
        sys.stdout.flush()
        return
    asyncio.run(main())

async def client(addr, size, dur, prof):
    import ucxx_go.distributed_backend
    from distributed.core import rpc
    from distributed.protocol import to_serialize
    data = to_serialize(random.randbytes(size))
    async with rpc(addr) as r:
        for _ in range(20):
            await r.echo(data=data)
        n = 0; t0 = time.perf_counter()
        while time.perf_counter() < t0 + dur:
            await r.echo(data=data); n += 1
        dt = time.perf_counter() - t0
    return 2 * size * n / dt / 1e6, dt / n * 1e6

if __name__ == "__main__":
    proto, size, dur = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    mp.set_start_method("spawn")
    q = mp.Queue(); p = mp.Process(target=serve, args=(proto, q), daemon=True); p.start()
    addr = q.get(timeout=60)
    if len(sys.argv) > 4:
        import cProfile, pstats
        pr = cProfile.Profile(); pr.enable()
        mb, us = asyncio.run(client(addr, size, dur, True))
        pr.disable(); pstats.Stats(pr).sort_stats("tottime").print_stats(18)
    else:
        mb, us = asyncio.run(client(addr, size, dur, False))
    print(f"{proto} {size} B: {mb:.0f} MB/s, {us:.0f} us an echo")
    p.join(timeout=30); p.kill()
