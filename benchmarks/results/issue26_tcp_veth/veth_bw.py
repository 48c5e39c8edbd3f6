"""One-way bandwidth: client sends N messages of SIZE, K in flight; server receives, acks 1 byte."""
import asyncio, json, socket, sys, time
import numpy as np

role, backend, addr, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
plan = [(int(s), int(n)) for s, n in (p.split("x") for p in sys.argv[5].split(","))]  # SIZExN
K = int(sys.argv[6])
WARM = 3

async def ucx_main():
    import ucxx_go as lib
    lib.init()
    if role == "server":
        done = asyncio.get_running_loop().create_future()
        async def handler(ep):
            try:
                for size, n in plan:
                    bufs = [np.empty(size, "u1") for _ in range(K)]
                    for rep in range(2):
                        cnt = WARM if rep == 0 else n
                        ts = []
                        for i in range(cnt):
                            if i >= K:
                                await ts[i - K]
                            ts.append(asyncio.ensure_future(ep.recv(bufs[i % K])))
                        await asyncio.gather(*ts)
                        await ep.send(np.ones(1, "u1"))
                await ep.close()
                done.set_result(None)
            except Exception as e:
                done.set_exception(e)
        lst = lib.create_listener(handler, port=port)
        print("ready", flush=True)
        await asyncio.wait_for(done, 300)
        lst.close()
    else:
        ep = await lib.create_endpoint(addr, port)
        out = {}
        ack = np.empty(1, "u1")
        for size, n in plan:
            bufs = [np.ones(size, "u1") for _ in range(K)]
            for rep in range(2):
                cnt = WARM if rep == 0 else n
                t0 = time.perf_counter()
                ts = []
                for i in range(cnt):
                    if i >= K:
                        await ts[i - K]
                    ts.append(asyncio.ensure_future(ep.send(bufs[i % K])))
                await asyncio.gather(*ts)
                await ep.recv(ack)
                dt = time.perf_counter() - t0
            out[size] = size * n / dt / 1e6
        await ep.close()
        print(json.dumps(out), flush=True)
    lib.stop_notifier_thread()

async def tcp_main():
    loop = asyncio.get_running_loop()
    if role == "server":
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((addr, port)); ls.listen(1); ls.setblocking(False)
        print("ready", flush=True)
        s, _ = await loop.sock_accept(ls)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        hdr = bytearray(8)
        async def readinto(mv):
            got = 0
            while got < len(mv):
                r = await loop.sock_recv_into(s, mv[got:])
                if r == 0: raise EOFError
                got += r
        for size, n in plan:
            buf = memoryview(np.empty(size, "u1"))
            for rep in range(2):
                cnt = WARM if rep == 0 else n
                for _ in range(cnt):
                    await readinto(memoryview(hdr))
                    await readinto(buf)
                await loop.sock_sendall(s, b"a")
        s.close()
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        await loop.sock_connect(s, (addr, port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        out = {}
        for size, n in plan:
            buf = np.ones(size, "u1")
            hdr = size.to_bytes(8, "little")
            for rep in range(2):
                cnt = WARM if rep == 0 else n
                t0 = time.perf_counter()
                for _ in range(cnt):
                    await loop.sock_sendall(s, hdr)
                    await loop.sock_sendall(s, buf)
                await loop.sock_recv(s, 1)
                dt = time.perf_counter() - t0
            out[size] = size * n / dt / 1e6
        s.close()
        print(json.dumps(out), flush=True)

asyncio.run(ucx_main() if backend == "ucx" else tcp_main())
