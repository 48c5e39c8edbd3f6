import asyncio, sys, time, statistics, subprocess, os
import numpy as np
import ucxx_go

async def server(port_file):
    async def handler(ep):
        buf = np.empty(8, dtype="u1")
        try:
            await ep.recv(buf)
            await ep.send(buf)
        except Exception:
            pass
    lst = ucxx_go.create_listener(handler)
    open(port_file, "w").write(str(lst.port))
    await asyncio.sleep(60)

async def client(port):
    msg = np.arange(8, dtype="u1"); out = np.empty(8, dtype="u1")
    c, s, e = [], [], []
    for i in range(80):
        t0 = time.perf_counter()
        ep = await ucxx_go.create_endpoint("127.0.0.1", port)
        t1 = time.perf_counter()
        await ep.send(msg)
        t2 = time.perf_counter()
        await ep.recv(out)
        t3 = time.perf_counter()
        if i >= 5:
            c.append((t1-t0)*1e6); s.append((t2-t1)*1e6); e.append((t3-t2)*1e6)
        await ep.close()
    med = statistics.median
    print(f"connect {med(c):.0f} us, first send {med(s):.0f} us, echo back {med(e):.0f} us, total {med([a+b+d for a,b,d in zip(c,s,e)]):.0f}")

if sys.argv[1] == "server":
    asyncio.run(server(sys.argv[2]))
else:
    asyncio.run(client(int(sys.argv[2])))
