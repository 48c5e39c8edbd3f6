"""Scratch (session 26, rerun in session 27 after the NVML lookup left the first transfer's path): what a process's first GPU transfer costs, and where.

python first_gpu_transfer.py ROUNDS   (one GPU, fresh process pairs)

gpu_bench.py's warm-up showed ucxx_go's first three 1 MiB sends of a process taking
~47 ms against RAPIDS ucxx's 3.3. Variants (each a fresh server and client on GPU 0):
  ucxx_go        as gpu_bench: cupy buffers, create_endpoint, three sends timed one by one
  ucxx_go+info   both processes call ucxx_go.info() first (NVML's start and the GPUs'
                 enumeration, which pinning the progress thread near its GPU also does)
  ucxx_go+host   one 8-byte host message each way first (the endpoint's wire-up)
  ucxx           RAPIDS ucxx, as gpu_bench
Prints, per variant and round: ms of create_endpoint, of each of the three sends, and
of info() where called (client; server in brackets).
"""
import asyncio, importlib, json, multiprocessing as mp, sys, time

SIZE = 1 << 20


def server(variant, q, res):
    import cupy as cp
    cp.cuda.Device(0).use()
    lib = importlib.import_module("ucxx" if variant == "ucxx" else "ucxx_go")
    t_info = None
    if variant == "ucxx_go+info":
        t0 = time.perf_counter()
        lib.info()
        t_info = (time.perf_counter() - t0) * 1e3

    async def main():
        done = asyncio.Event()

        async def h(ep):
            bufs = [cp.empty(SIZE, dtype=cp.uint8) for _ in range(3)]
            if variant == "ucxx_go+host":
                b = bytearray(8)
                await ep.recv(b)
                await ep.send(b)
            for b in bufs:
                await ep.recv(b)
            await ep.send(bytearray(8))
            await ep.close()
            done.set()
        lst = lib.create_listener(h)
        q.put(lst.port)
        await done.wait()
        lst.close()
    asyncio.run(main())
    res.put(t_info)


def client(variant, port, res):
    import cupy as cp
    cp.cuda.Device(0).use()
    lib = importlib.import_module("ucxx" if variant == "ucxx" else "ucxx_go")
    out = {}
    if variant == "ucxx_go+info":
        t0 = time.perf_counter()
        lib.info()
        out["info"] = (time.perf_counter() - t0) * 1e3

    async def main():
        a = cp.arange(SIZE, dtype=cp.uint8)
        cp.cuda.runtime.deviceSynchronize()
        t0 = time.perf_counter()
        ep = await lib.create_endpoint("127.0.0.1", port)
        out["connect"] = (time.perf_counter() - t0) * 1e3
        if variant == "ucxx_go+host":
            b = bytearray(8)
            t0 = time.perf_counter()
            await ep.send(b)
            await ep.recv(b)
            out["host_echo"] = (time.perf_counter() - t0) * 1e3
        sends = []
        for _ in range(3):
            t0 = time.perf_counter()
            await ep.send(a)
            sends.append(round((time.perf_counter() - t0) * 1e3, 2))
        out["sends"] = sends
        await ep.recv(bytearray(8))
        await ep.close()
    asyncio.run(main())
    res.put(out)


def run(variant):
    ctx = mp.get_context("spawn")
    q, rs, rc = ctx.Queue(), ctx.Queue(), ctx.Queue()
    s = ctx.Process(target=server, args=(variant, q, rs))
    s.start()
    c = ctx.Process(target=client, args=(variant, q.get(timeout=120), rc))
    c.start()
    try:
        out = rc.get(timeout=120)
        out["server_info"] = rs.get(timeout=60)
    finally:
        for p in (c, s):
            p.join(30)
            if p.is_alive():
                p.kill()
    return out


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    variants = ["ucxx_go", "ucxx_go+info", "ucxx_go+host"]
    try:
        importlib.import_module("ucxx")
        variants.append("ucxx")
    except Exception as e:
        print("RAPIDS ucxx skipped:", e)
    for r in range(rounds):
        for v in variants:
            try:
                out = run(v)
            except Exception as e:
                out = {"error": repr(e)}
            print(json.dumps({"round": r, "variant": v} | out), flush=True)


if __name__ == "__main__":
    main()
