# Session 44: an awaited ping-pong of one buffer between two processes (ucxx_go, send then recv), median
# round trip per size; SIZES (bytes, comma-separated), N round trips after 5 warm-ups; CUDA=1: cupy buffers.
#   python pingpong.py server   (prints its port)  |  python pingpong.py client PORT
import asyncio, os, sys, time
import numpy as np
if os.environ.get("CUDA"):
    import cupy as np
import ucxx_go as ucxx
SIZES = [int(x) for x in os.environ.get("SIZES", "1048576,8388608").split(",")]
N = int(os.environ.get("N", "50")) + 5

async def server():
    done = asyncio.Event()
    async def handler(ep):
        for n in SIZES:
            buf = np.empty(n, "u1")
            for _ in range(N):
                await ep.recv(buf); await ep.send(buf)
        done.set()
    lst = ucxx.create_listener(handler)
    print(lst.port, flush=True)
    await done.wait()

async def client(port):
    ep = await ucxx.create_endpoint("127.0.0.1", port)
    for n in SIZES:
        buf = np.ones(n, "u1"); out = np.empty(n, "u1"); ts = []
        for i in range(N):
            t = time.perf_counter(); await ep.send(buf); await ep.recv(out); ts.append(time.perf_counter() - t)
        ts = sorted(ts[5:]); print(f"{n} {ts[len(ts)//2]*1e6:.0f} us", flush=True)

if sys.argv[1] == "server":
    asyncio.run(server())
else:
    asyncio.run(client(int(sys.argv[2])))
