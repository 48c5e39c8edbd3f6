"""Scratch: send_multi/recv_multi echo. ROLE BACKEND(ucx|ucxalloc) ADDR PORT SIZES N"""
import asyncio, json, os, sys, time, statistics
import numpy as np
role, backend, addr, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sizes = [int(s) for s in sys.argv[5].split(",")]; N = int(sys.argv[6]); W = 5
kw = {}
if backend == "ucxalloc":
    from distributed.protocol.utils import host_array
    kw = {"host_allocator": host_array}
async def main():
    import ucxx_go as lib
    lib.init()
    if role == "server":
        done = asyncio.get_running_loop().create_future()
        async def h(ep):
            for s in sizes:
                for _ in range(N + W):
                    fr = await ep.recv_multi(**kw); await ep.send_multi(fr)
            await ep.close(); done.set_result(None)
        l = lib.create_listener(h, port=port); print("ready", flush=True)
        await asyncio.wait_for(done, 600); l.close()
    else:
        import ucxx_go._endpoint as E
        stamps = []
        orig = E.frames_to_provide
        def ftp(b):
            stamps.append(time.perf_counter()); return orig(b)
        E.frames_to_provide = ftp
        ep = await lib.create_endpoint(addr, port); out = {}
        for s in sizes:
            frames = [b"h" * 40, np.ones(s, "u1")]; ts = []
            for _ in range(N + W):
                stamps.clear()
                t0 = time.perf_counter(); await ep.send_multi(frames); t1 = time.perf_counter(); await ep.recv_multi(**kw); t2 = time.perf_counter()
                ts.append((t2 - t0, t1 - t0, (stamps[0] - t0) if stamps else 0, (t2 - stamps[0]) if stamps else 0))
            out[s] = [round(statistics.median(x[k] for x in ts[W:]) * 1e6) for k in range(4)]
        await ep.close(); print(json.dumps(out), flush=True)
if os.environ.get("PROF") and role == "client":
    import cProfile; cProfile.run("asyncio.run(main())", "/tmp/s24/mprof." + backend)
else:
    asyncio.run(main())
