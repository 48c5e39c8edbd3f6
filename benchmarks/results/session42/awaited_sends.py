# Session 42: N awaited ep.send calls of SIZE bytes (default 3,000 of 1 MiB) from one process to a
# sinking peer; p50/p90 of a call (first 10 % left out) and the mean over all. TAG labels the line.
#   UCX_NET_DEVICES=lo python awaited_sends.py
import asyncio, multiprocessing as mp, os, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from _bench_common import serve_one_client
N = int(os.environ.get("N", "3000")); SIZE = int(os.environ.get("SIZE", str(1 << 20)))
def server(q):
    import numpy as np, ucxx_go
    async def handler(ep):
        buf = np.empty(SIZE, "u1")
        for _ in range(N):
            await ep.recv(buf)
        await ep.send(b"k")
    asyncio.run(serve_one_client(ucxx_go, handler, q))
async def client(port):
    import numpy as np, ucxx_go
    ep = await ucxx_go.create_endpoint("127.0.0.1", port)
    buf = np.zeros(SIZE, "u1"); ack = bytearray(1); ts = []
    t00 = time.perf_counter()
    for _ in range(N):
        t0 = time.perf_counter(); await ep.send(buf); ts.append(time.perf_counter() - t0)
    await ep.recv(ack); tot = time.perf_counter() - t00
    await ep.close()
    ts = sorted(ts[N // 10:])
    print(f"{os.environ.get('TAG','')}: p50 {ts[len(ts)//2]*1e6:.1f} us p90 {ts[int(len(ts)*.9)]*1e6:.1f} mean {tot/N*1e6:.1f} us/msg")
if __name__ == "__main__":
    q = mp.get_context("spawn").Queue(); p = mp.get_context("spawn").Process(target=server, args=(q,)); p.start()
    asyncio.run(client(q.get())); p.join(30)
