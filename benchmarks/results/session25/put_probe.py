"""Scratch (issue 26 item 6): where an awaited CUDA put's time goes, one GPU, two processes.

python put_probe.py OUT.json [SIZES]   (env of the run applies: UCXGO_INLINE_WAIT_US, ...)

Per size, medians of per-call µs over N calls:
  ipc_copy_sync   the floor: the target's buffer opened by CUDA IPC in the client,
                  cudaMemcpyAsync + stream synchronize per copy (no UCX, no Python awaits)
  await_put       `await ep.put(view, remote)` in a loop (what a user writes)
  gather_put      `await asyncio.gather(ep.put(...))` (onesided_gpu_bench.py's w1)
  inline_frac     the fraction of puts that ended within the call (pybridge's INLINE_DONE)
  sync_put        the gopy call alone (submit) when it ended inline, µs
"""
import asyncio, json, multiprocessing as mp, os, statistics, sys, time

N = 300


def target(q_port, q_ipc, nbytes):
    import cupy as cp
    import ucxx_go
    cp.cuda.Device(0).use()
    buf = cp.zeros(nbytes, dtype=cp.uint8)
    q_ipc.put(bytes(cp.cuda.runtime.ipcGetMemHandle(buf.data.ptr)))

    async def main():
        done = asyncio.Event()

        async def handler(ep):
            region = ucxx_go.register(buf)
            await ep.send_obj(region.pack())
            try:
                await ep.recv(bytearray(8))
            except ucxx_go.UCXError:
                pass
            await ep.close()
            done.set()
        lst = ucxx_go.create_listener(handler)
        q_port.put(lst.port)
        await done.wait()
        lst.close()
    asyncio.run(main())


def med(xs):
    return round(statistics.median(xs) * 1e6, 1) if xs else None


def main():
    out_path = sys.argv[1]
    sizes = [int(s) for s in (sys.argv[2] if len(sys.argv) > 2 else "8,65536,1048576,4194304").split(",")]
    ctx = mp.get_context("spawn")
    q_port, q_ipc = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=target, args=(q_port, q_ipc, max(sizes)), daemon=True)
    p.start()
    import cupy as cp
    import ucxx_go
    from ucxx_go import _onesided
    cp.cuda.Device(0).use()
    ipc = q_ipc.get(timeout=60)
    port = q_port.get(timeout=60)
    src = cp.ones(max(sizes), dtype=cp.uint8)
    cp.cuda.get_current_stream().synchronize()
    res = {"env": {k: v for k, v in os.environ.items() if k.startswith("UCXGO_") or k.startswith("UCX_")}}
    # the floor
    dptr = cp.cuda.runtime.ipcOpenMemHandle(ipc)
    s = cp.cuda.Stream(non_blocking=True)
    for size in sizes:
        ts = []
        for i in range(N + 20):
            t0 = time.perf_counter()
            cp.cuda.runtime.memcpyAsync(dptr, src.data.ptr, size, 3, s.ptr)
            s.synchronize()
            ts.append(time.perf_counter() - t0)
        res[f"ipc_copy_sync {size}"] = med(ts[20:])
    cp.cuda.runtime.ipcCloseMemHandle(dptr)

    # count inline completions by wrapping submit as _onesided sees it
    stats = {"inline": 0, "all": 0, "sync": []}
    orig = _onesided.submit

    def counting_submit(fn, *a):
        t0 = time.perf_counter()
        rid = orig(fn, *a)
        stats["all"] += 1
        if rid & _onesided.INLINE_DONE:
            stats["inline"] += 1
            stats["sync"].append(time.perf_counter() - t0)
        return rid
    _onesided.submit = counting_submit

    async def client():
        ep = await ucxx_go.create_endpoint("127.0.0.1", port)
        remote = ep.unpack_remote(await ep.recv_obj())
        for size in sizes:
            view = ucxx_go.register(src[:size])
            for mode in ("await_put", "gather_put", "await_put"):
                for _ in range(20):
                    await ep.put(view, remote)
                await ep.flush()
                stats.update(inline=0, all=0, sync=[])
                ts = []
                for _ in range(N):
                    t0 = time.perf_counter()
                    if mode == "await_put":
                        await ep.put(view, remote)
                    else:
                        await asyncio.gather(ep.put(view, remote))
                    ts.append(time.perf_counter() - t0)
                await ep.flush()
                k = f"{mode} {size}"
                res[k] = min(res.get(k, 1e9), med(ts))
                res[f"inline_frac {mode} {size}"] = round(stats["inline"] / max(1, stats["all"]), 2)
                res[f"sync_put {mode} {size}"] = med(stats["sync"])
        await ep.send(bytearray(8))
        await ep.close()
    asyncio.run(client())
    p.join(30)
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
