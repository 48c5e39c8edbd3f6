"""distributed rpc echo (benchmark_network's) across netns. ROLE PROTO ADDR PORT SIZE SECONDS"""
import asyncio, os, sys, time, random, json
role, proto, addr, port, size, dur = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
import ucxx_go.distributed_backend
from distributed.core import Server, rpc
from distributed.protocol import to_serialize
async def serve():
    s = Server({})
    await s.listen(f"{proto}://{addr}:{port}")
    print("ready", flush=True)
    await asyncio.sleep(dur + 30)
async def client():
    data = to_serialize(random.randbytes(size))
    async with rpc(f"{proto}://{addr}:{port}") as r:
        for _ in range(20):
            await r.echo(data=data)
        n = 0; t0 = time.perf_counter()
        while time.perf_counter() < t0 + dur:
            await r.echo(data=data); n += 1
        dt = time.perf_counter() - t0
    print(json.dumps({"us": dt / n * 1e6}), flush=True)
if role == "server":
    if os.environ.get("PROF"):
        import cProfile, pstats
        pr = cProfile.Profile(); pr.enable()
        try: asyncio.run(asyncio.wait_for(serve(), dur + 5))
        except BaseException: pass
        pr.disable(); pstats.Stats(pr).sort_stats("tottime").print_stats(16); sys.stdout.flush()
    else:
        asyncio.run(serve())
else:
    if os.environ.get("PROF"):
        import cProfile, pstats
        pr = cProfile.Profile(); pr.enable(); asyncio.run(client()); pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(16)
    else:
        asyncio.run(client())
