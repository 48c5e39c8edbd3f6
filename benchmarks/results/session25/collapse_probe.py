"""Scratch (issue 26 item 6): do whole runs of two-sided GPU sends collapse, and how?

python collapse_probe.py RUNS OUT.json   (one GPU, two processes per run, 1 MiB x 400, w1)

Each run: a fresh server process receiving into one cupy buffer and a fresh client
process sending; the client records each send's µs and whether it ended in its call.
Prints per run: median, p90, p99, max µs, inline fraction, server recv inline fraction.
"""
import asyncio, json, multiprocessing as mp, statistics, sys, time

SIZE, N, WARM = 1 << 20, 400, 20


def _count_inline(mod):
    stats = {"inline": 0, "all": 0}
    from ucxx_go._request import INLINE_DONE
    orig = mod.submit

    def counting(fn, *a):
        rid = orig(fn, *a)
        stats["all"] += 1
        stats["inline"] += bool(rid & INLINE_DONE)
        return rid
    mod.submit = counting
    return stats


def server(q, res):
    import cupy as cp
    import ucxx_go
    from ucxx_go import _endpoint
    cp.cuda.Device(0).use()
    stats = _count_inline(_endpoint)

    async def main():
        done = asyncio.Event()

        async def h(ep):
            buf = cp.empty(SIZE, dtype=cp.uint8)
            for _ in range(N + WARM):
                await ep.recv(buf)
            await ep.send(bytearray(8))
            await ep.close()
            done.set()
        lst = ucxx_go.create_listener(h)
        q.put(lst.port)
        await done.wait()
        lst.close()
    asyncio.run(main())
    res.put(round(stats["inline"] / max(1, stats["all"]), 2))


def client(port, res):
    import cupy as cp
    import ucxx_go
    from ucxx_go import _endpoint
    cp.cuda.Device(0).use()
    stats = _count_inline(_endpoint)

    async def main():
        ep = await ucxx_go.create_endpoint("127.0.0.1", port)
        a = cp.arange(SIZE, dtype=cp.uint8)
        cp.cuda.runtime.deviceSynchronize()
        ts = []
        for i in range(N + WARM):
            if i == WARM:
                stats.update(inline=0, all=0)
            t0 = time.perf_counter()
            await ep.send(a)
            ts.append(time.perf_counter() - t0)
        await ep.recv(bytearray(8))
        await ep.close()
        return ts[WARM:]
    ts = sorted(asyncio.run(main()))
    q = lambda p: round(ts[int(p * (len(ts) - 1))] * 1e6, 1)
    res.put({"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": q(1.0),
             "send_inline": round(stats["inline"] / max(1, stats["all"]), 2)})


def main():
    runs, out = int(sys.argv[1]), sys.argv[2]
    ctx = mp.get_context("spawn")
    rows = []
    for r in range(runs):
        q, sres, cres = ctx.Queue(), ctx.Queue(), ctx.Queue()
        s = ctx.Process(target=server, args=(q, sres))
        s.start()
        port = q.get(timeout=60)
        c = ctx.Process(target=client, args=(port, cres))
        c.start()
        row = cres.get(timeout=120)
        row["recv_inline"] = sres.get(timeout=60)
        c.join(30)
        s.join(30)
        rows.append(row)
        print(r, row, flush=True)
    with open(out, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
