import asyncio, sys, time, statistics, os
role, backend, host, port, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
size = int(os.environ.get("SIZE", "8"))

async def asyncio_server():
    done = asyncio.Event()
    async def handle(r, w):
        try:
            while True:
                d = await r.readexactly(size)
                w.write(d)
        except asyncio.IncompleteReadError:
            done.set()
    srv = await asyncio.start_server(handle, host, port)
    print("ready", flush=True)
    await done.wait(); srv.close()

async def asyncio_client():
    r, w = await asyncio.open_connection(host, port)
    import socket
    w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg = b"x" * size; ts = []
    for i in range(n):
        t0 = time.perf_counter(); w.write(msg); await r.readexactly(size); ts.append(time.perf_counter() - t0)
    w.close()
    return ts

async def ucx_server():
    import ucxx_go as ucx, numpy as np
    done = asyncio.Event()
    async def handle(ep):
        buf = np.empty(size, np.uint8)
        for i in range(n):
            await ep.recv(buf); await ep.send(buf)
        await ep.close(); done.set()
    lst = ucx.create_listener(handle, port)
    print("ready", flush=True)
    await done.wait()

async def ucx_client():
    import ucxx_go as ucx, numpy as np
    ep = await ucx.create_endpoint(host, port)
    msg = np.zeros(size, np.uint8); buf = np.empty(size, np.uint8); ts = []
    for i in range(n):
        t0 = time.perf_counter(); await ep.send(msg); await ep.recv(buf); ts.append(time.perf_counter() - t0)
    await ep.close()
    return ts

f = {("server","asyncio"): asyncio_server, ("client","asyncio"): asyncio_client, ("server","ucxgo"): ucx_server, ("client","ucxgo"): ucx_client}[(role, backend)]
res = asyncio.run(f())
if role == "client":
    ts = res[n//10:]
    print(f"{backend} {size} B RTT median {statistics.median(ts)*1e6:.1f} us p90 {sorted(ts)[int(len(ts)*.9)]*1e6:.1f}")
