"""Scratch (session 25): host analog of gpu_bench.py, one host, two processes: the client sends N messages of SIZE
bytes W in flight (benchmarks._bench_common.await_window), the server receives W at a time, one 8-byte ack every 32
windows (flow control: unexpected messages are bounded). Env N, SIZE, W. Prints µs a message."""
import asyncio, multiprocessing as mp, os, sys, time, statistics
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from _bench_common import await_window
N = int(os.environ.get("N", "4000")); SIZE = int(os.environ.get("SIZE", "65536")); W = int(os.environ.get("W", "4"))
def server(q):
    import numpy as np, ucxx_go
    async def main():
        done = asyncio.Event()
        async def h(ep):
            bufs = [np.empty(SIZE, "u1") for _ in range(W)]
            for i in range(0, N, W):
                await await_window(lambda j: ep.recv(bufs[j]), min(W, N - i))
                if (i // W) % 32 == 31:
                    await ep.send(np.zeros(8, "u1"))
            await ep.send(np.zeros(8, "u1")); await ep.close(); done.set()
        l = ucxx_go.create_listener(h); q.put(l.port); await done.wait(); l.close()
    asyncio.run(main())
async def client(port):
    import numpy as np, ucxx_go
    ep = await ucxx_go.create_endpoint("127.0.0.1", port)
    a = np.ones(SIZE, "u1"); ack = np.empty(8, "u1")
    t0 = time.perf_counter()
    for i in range(0, N, W):
        await await_window(lambda _: ep.send(a), min(W, N - i))
        if (i // W) % 32 == 31:
            await ep.recv(ack)
    await ep.recv(ack)
    dt = time.perf_counter() - t0
    await ep.close()
    return dt / N * 1e6
if __name__ == "__main__":
    ctx = mp.get_context("spawn"); q = ctx.Queue()
    p = ctx.Process(target=server, args=(q,)); p.start()
    port = q.get()
    if os.environ.get("PROF"):
        import cProfile, pstats
        pr = cProfile.Profile(); pr.enable(); us = asyncio.run(client(port)); pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(18)
    else:
        us = asyncio.run(client(port))
    p.join(30)
    print(f"W={W} SIZE={SIZE} us/msg={us:.1f}")
