"""A probe (session 35, issue 26's GPU w4 row): what a window of sends in flight costs a message, by parts.

    python window_probe.py SIZE N [GPUS]

For each configuration (memory cuda|host, the client's window, the server's window, distinct send buffers or one),
a server process receives N messages of SIZE bytes (its window of receives posted together, as gpu_bench.py's
server does, or each posted as the last ends) and answers 8 bytes; the client sends with its window in flight
(asyncio.gather; 1: awaited one by one). Prints µs a message.
"""
import asyncio, multiprocessing as mp, os, sys, time
os.environ.setdefault("UCX_NET_DEVICES", "lo")

CONFIGS = [  # mem, client window, server window, distinct
    ("cuda", 1, 1, 0), ("cuda", 4, 4, 0), ("cuda", 4, 1, 0), ("cuda", 4, 4, 1), ("cuda", 4, "deep", 0),
    ("host", 1, 1, 0), ("host", 4, 4, 0),
]


def arrays(mem, size, count, gpu):
    if mem == "cuda":
        import cupy as cp
        cp.cuda.Device(gpu).use()
        return [cp.zeros(size, dtype=cp.uint8) for _ in range(count)]
    import numpy as np
    return [np.zeros(size, dtype="u1") for _ in range(count)]


async def gather_or_await(coros):
    if len(coros) == 1:
        return [await coros[0]]
    return await asyncio.gather(*coros)


def server(cfg, size, n, gpu, q):
    import ucxx_go, numpy as np
    mem, _, sw, _ = cfg

    async def main():
        done = asyncio.get_running_loop().create_future()

        async def handler(ep):
            deep = sw == "deep"
            w = 4 if deep else sw
            bufs = arrays(mem, size, w, gpu)
            for _ in range(2):  # warm-up round, timed round
                if deep:  # keep w receives posted: a new one as each ends
                    pending = [asyncio.ensure_future(ep.recv(bufs[i])) for i in range(w)]
                    for i in range(n):
                        await pending[i]
                        if i + w < n:
                            pending.append(asyncio.ensure_future(ep.recv(bufs[(i + w) % w])))
                else:
                    for i in range(0, n, w):
                        await gather_or_await([ep.recv(bufs[j]) for j in range(min(w, n - i))])
                await ep.send(np.ones(8, "u1"))
            await ep.close()
            done.set_result(None)

        lst = ucxx_go.create_listener(handler)
        q.put(lst.port)
        await asyncio.wait_for(done, 120)

    asyncio.run(main())


async def client(cfg, size, n, gpu, port):
    import ucxx_go, numpy as np
    mem, cw, _, distinct = cfg
    ep = await ucxx_go.create_endpoint("127.0.0.1", port)
    bufs = arrays(mem, size, cw if distinct else 1, gpu)
    ack = np.empty(8, "u1")
    dt = None
    for _ in range(2):
        t0 = time.perf_counter()
        for i in range(0, n, cw):
            await gather_or_await([ep.send(bufs[j % len(bufs)]) for j in range(min(cw, n - i))])
        await ep.recv(ack)
        dt = time.perf_counter() - t0
    await ep.close()
    return dt / n * 1e6


def main():
    size, n = int(sys.argv[1]), int(sys.argv[2])
    gpus = [int(g) for g in (sys.argv[3] if len(sys.argv) > 3 else "0,0").split(",")]
    ctx = mp.get_context("spawn")
    for rnd in range(2):
        for cfg in CONFIGS:
            q = ctx.Queue()
            p = ctx.Process(target=server, args=(cfg, size, n, gpus[1], q), daemon=True)
            p.start()
            us = asyncio.run(asyncio.wait_for(client(cfg, size, n, gpus[0], q.get(timeout=60)), 120))
            p.join(30)
            print(f"round {rnd} mem {cfg[0]} client window {cfg[1]} server window {cfg[2]} distinct {cfg[3]}: "
                  f"{us:.1f} us a message", flush=True)


if __name__ == "__main__":
    main()
