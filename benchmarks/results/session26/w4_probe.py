"""Scratch (issue 26, GPU w4): where a gathered window of GPU sends spends its time.

python w4_probe.py OUTDIR   (one GPU, two processes per configuration)

Each configuration is a fresh server/client pair on GPU 0 moving N messages of each
size; the server receives in windows of WS (asyncio.gather, WS buffers), the client
sends in windows of WC. INLINE=default|always|never patches may_wait_inline in both.
Reports µs a message (client's clock), each side's inline fraction and the median
window time on the server; PROF=1 dumps cProfile stats, TRACE=1 a Go trace of the
timed loop of the first size.
"""
import asyncio, json, multiprocessing as mp, os, statistics, sys, time

N, WARM = 400, 12
SIZES = [1 << 20, 4 << 20]


def _patch(inline):
    from ucxx_go import _endpoint
    from ucxx_go._request import INLINE_DONE
    stats = {"inline": 0, "all": 0}
    orig = _endpoint.submit

    def counting(fn, *a):
        rid = orig(fn, *a)
        stats["all"] += 1
        stats["inline"] += bool(rid & INLINE_DONE)
        return rid
    _endpoint.submit = counting
    if inline != "default":
        _endpoint.may_wait_inline = (lambda n, mem: True) if inline == "always" else (lambda n, mem: False)
    return stats


async def _window(make, count):
    if count == 1:
        await make(0)
    else:
        await asyncio.gather(*(make(i) for i in range(count)))


def server(cfg, q, res):
    import cupy as cp
    import ucxx_go
    import ucxx_go.debug
    cp.cuda.Device(0).use()
    stats = _patch(cfg["inline"])
    prof = None
    if cfg.get("prof"):
        import cProfile
        prof = cProfile.Profile()
    out = {}

    async def main():
        done = asyncio.Event()

        async def h(ep):
            for size in SIZES:
                ws = cfg["ws"]
                bufs = [cp.empty(size, dtype=cp.uint8) for _ in range(ws)]
                for _ in range(WARM):
                    await ep.recv(bufs[0])
                for j in range(ws):
                    await ep.recv(bufs[j])
                stats.update(inline=0, all=0)
                wins = []
                if prof and size == SIZES[0]:
                    prof.enable()
                tr = ucxx_go.debug.go_trace(f"{cfg['out']}/server.trace") if cfg.get("trace") and size == SIZES[0] else None
                if tr:
                    tr.__enter__()
                for i in range(0, N, ws):
                    t0 = time.perf_counter()
                    await _window(lambda j: ep.recv(bufs[j]), min(ws, N - i))
                    wins.append(time.perf_counter() - t0)
                if tr:
                    tr.__exit__(None, None, None)
                if prof and size == SIZES[0]:
                    prof.disable()
                out[size] = {"win_med_us": round(statistics.median(wins) * 1e6, 1),
                             "inline": round(stats["inline"] / max(1, stats["all"]), 2)}
                await ep.send(bytearray(8))
            await ep.close()
            done.set()
        lst = ucxx_go.create_listener(h)
        q.put(lst.port)
        await done.wait()
        lst.close()
    asyncio.run(main())
    if prof:
        prof.dump_stats(f"{cfg['out']}/server.prof")
    res.put(out)


def client(cfg, port, res):
    import cupy as cp
    import ucxx_go
    import ucxx_go.debug
    cp.cuda.Device(0).use()
    stats = _patch(cfg["inline"])
    prof = None
    if cfg.get("prof"):
        import cProfile
        prof = cProfile.Profile()
    out = {}

    async def main():
        ep = await ucxx_go.create_endpoint("127.0.0.1", port)
        for size in SIZES:
            wc, ws = cfg["wc"], cfg["ws"]
            a = cp.arange(size, dtype=cp.uint8)
            cp.cuda.runtime.deviceSynchronize()
            for _ in range(WARM + ws):
                await ep.send(a)
            stats.update(inline=0, all=0)
            if prof and size == SIZES[0]:
                prof.enable()
            tr = ucxx_go.debug.go_trace(f"{cfg['out']}/client.trace") if cfg.get("trace") and size == SIZES[0] else None
            if tr:
                tr.__enter__()
            t0 = time.perf_counter()
            for i in range(0, N, wc):
                await _window(lambda _: ep.send(a), min(wc, N - i))
            await ep.recv(bytearray(8))
            dt = time.perf_counter() - t0
            if tr:
                tr.__exit__(None, None, None)
            if prof and size == SIZES[0]:
                prof.disable()
            out[size] = {"us_per_msg": round(dt / N * 1e6, 1), "inline": round(stats["inline"] / max(1, stats["all"]), 2)}
        await ep.close()
    asyncio.run(main())
    if prof:
        prof.dump_stats(f"{cfg['out']}/client.prof")
    res.put(out)


def run(cfg):
    os.makedirs(cfg["out"], exist_ok=True)
    ctx = mp.get_context("spawn")
    q, rs, rc = ctx.Queue(), ctx.Queue(), ctx.Queue()
    s = ctx.Process(target=server, args=(cfg, q, rs))
    s.start()
    c = ctx.Process(target=client, args=(cfg, q.get(timeout=60), rc))
    c.start()
    try:
        cr, sr = rc.get(timeout=120), rs.get(timeout=120)
    finally:
        c.join(30)
        s.join(30)
        for p in (c, s):
            if p.is_alive():
                p.kill()
    return {str(k): {"client": cr[k], "server": sr[k]} for k in cr}


def main():
    outdir = sys.argv[1]
    configs = []
    for inline in ("default", "always", "never"):
        for ws, wc in ((1, 1), (4, 4), (4, 1), (1, 4)):
            if inline != "default" and (ws, wc) != (4, 4):
                continue
            configs.append({"inline": inline, "ws": ws, "wc": wc})
    rounds = int(os.environ.get("ROUNDS", "2"))
    results = []
    for r in range(rounds):
        for cfg in configs:
            cfg = dict(cfg, out=f"{outdir}/r{r}_{cfg['inline']}_s{cfg['ws']}c{cfg['wc']}")
            try:
                res = run(cfg)
            except Exception as e:
                res = {"error": repr(e)}
            results.append({"cfg": cfg, "res": res})
            print(json.dumps(results[-1]), flush=True)
    for extra in ("prof", "trace"):
        cfg = {"inline": "default", "ws": 4, "wc": 4, extra: True, "out": f"{outdir}/{extra}"}
        try:
            res = run(cfg)
        except Exception as e:
            res = {"error": repr(e)}
        results.append({"cfg": cfg, "res": res})
        print(json.dumps(results[-1]), flush=True)
    with open(f"{outdir}/w4_probe.json", "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
