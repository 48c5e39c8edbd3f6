"""A probe (session 34, issue 26): large messages between two processes whose event loops share the GIL
with a busy thread, as a Dask worker's do with its tasks (the p2p rechunk). Each side runs a thread of
pure-Python work; the client sends N messages of SIZE bytes (send_multi, a header frame and the payload,
W in flight), the server receives them (recv_multi, own_host_min as the Dask comm) and acks the last.

    python busy_loop_probe.py SIZE N [W] [busy]

busy: both sides run the GIL-holding thread (default: idle sides). Run it under UCXGO_PROGRESS_MODE=loop
(Dask's auto on a 2-CPU machine) or thread, and with or without UCX settings that let large sends use
CMA's rendezvous (e.g. UCX_CMA_BW=11145MBs UCX_RNDV_THRESH=auto,intra:4M,inter:256K). Prints MB/s.
"""
import asyncio
import multiprocessing as mp
import os
import sys
import threading
import time

os.environ.setdefault("UCX_NET_DEVICES", "lo")
SIZE, N = int(sys.argv[1]), int(sys.argv[2])
W = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3].isdigit() else 4
BUSY = "busy" in sys.argv[3:]


def burn(stop):
    """Pure-Python work in slices, as a task thread holds the GIL between its releases."""
    x = 0
    while not stop.is_set():
        for i in range(20000):
            x += i * i


def server(q):
    import ucxx_go as lib

    async def main():
        lib.init()
        done = asyncio.get_running_loop().create_future()

        async def handle(ep):
            for _ in range(N):
                frames = await ep.recv_multi(own_host_min=64 << 10)
                del frames
            await ep.send(bytearray(1))
            await ep.close()
            done.set_result(None)

        listener = lib.create_listener(handle)
        q.put(listener.port)
        await asyncio.wait_for(done, 600)
        listener.close()

    stop = threading.Event()
    if BUSY:
        threading.Thread(target=burn, args=(stop,), daemon=True).start()
    asyncio.run(main())
    stop.set()


async def client(port):
    import numpy as np

    import ucxx_go as lib

    lib.init()
    ep = await lib.create_endpoint("127.0.0.1", port)
    payload = np.ones(SIZE, "u1")
    frames = [b"h" * 40, payload]
    t0 = time.perf_counter()
    pending = set()
    for _ in range(N):
        if len(pending) >= W:
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        pending.add(asyncio.ensure_future(ep.send_multi(frames)))
    await asyncio.gather(*pending)
    await ep.recv(bytearray(1))
    dt = time.perf_counter() - t0
    await ep.close()
    return SIZE * N / dt / 1e6


if __name__ == "__main__":
    mp.set_start_method("spawn")
    q = mp.Queue()
    p = mp.Process(target=server, args=(q,), daemon=True)
    p.start()
    port = q.get(timeout=60)
    stop = threading.Event()
    if BUSY:
        threading.Thread(target=burn, args=(stop,), daemon=True).start()
    mbs = asyncio.run(client(port))
    stop.set()
    p.join(timeout=30)
    mode = os.environ.get("UCXGO_PROGRESS_MODE", "thread")
    cma = "cma" if os.environ.get("UCX_CMA_BW") else "default"
    print(f"{SIZE} B x {N}, {W} in flight, {'busy' if BUSY else 'idle'}, {mode}, {cma}: {mbs:.0f} MB/s", flush=True)
