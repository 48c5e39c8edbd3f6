"""Echo of SIZE bytes across netns, one in flight: ucx send/recv, ucx put+flush+8B note, asyncio socket."""
import asyncio, json, socket, sys, time, statistics
import numpy as np, os
PAUSE = float(os.environ.get('PAUSE_MS', '0')) / 1e3
role, backend, addr, port, size, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])

async def ucx_main():
    import ucxx_go as lib
    note = np.zeros(8, "u1")
    if role == "server":
        done = asyncio.get_running_loop().create_future()
        async def handler(ep):
            buf = np.zeros(size, "u1"); reg = lib.register(buf)
            await ep.send_obj(reg.pack())
            remote = ep.unpack_remote(await ep.recv_obj())
            for i in range(n + 5):
                if backend == "send":
                    await ep.recv(buf)
                    if PAUSE: await asyncio.sleep(PAUSE)
                    await ep.send(buf)
                else:
                    await ep.recv(note); await ep.put(reg, remote); await ep.flush(); await ep.send(note)
            await ep.close(); done.set_result(None)
        lst = lib.create_listener(handler, port=port)
        print("ready", flush=True)
        await asyncio.wait_for(done, 300); lst.close()
    else:
        ep = await lib.create_endpoint(addr, port)
        buf = np.ones(size, "u1"); reg = lib.register(buf)
        remote = ep.unpack_remote(await ep.recv_obj())
        await ep.send_obj(reg.pack())
        ts = []
        for i in range(n + 5):
            t0 = time.perf_counter()
            if backend == "send":
                await ep.send(buf); await ep.recv(buf)
            else:
                await ep.put(reg, remote); await ep.flush(); await ep.send(note); await ep.recv(note)
            ts.append(time.perf_counter() - t0)
        await ep.close()
        print(json.dumps({"us": statistics.median(ts[5:]) * 1e6}), flush=True)

async def tcp_main():
    loop = asyncio.get_running_loop()
    buf = memoryview(np.ones(size, "u1")); hdr = bytearray(8)
    seg = memoryview(bytearray(256 << 10))
    async def readinto(s, mv):
        got = 0
        if backend == "tcpcopy" and len(mv) > 8:
            while got < len(mv):
                r = await loop.sock_recv_into(s, seg[:min(len(seg), len(mv) - got)])
                if r == 0: raise EOFError
                mv[got:got + r] = seg[:r]; got += r
            return
        while got < len(mv):
            r = await loop.sock_recv_into(s, mv[got:]); got += r
            if r == 0: raise EOFError
    if role == "server":
        ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((addr, port)); ls.listen(1); ls.setblocking(False)
        print("ready", flush=True)
        s, _ = await loop.sock_accept(ls); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(n + 5):
            await readinto(s, memoryview(hdr)); await readinto(s, buf)
            await loop.sock_sendall(s, hdr); await loop.sock_sendall(s, buf)
    else:
        s = socket.create_connection((addr, port)); s.setblocking(False); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        ts = []
        for i in range(n + 5):
            t0 = time.perf_counter()
            await loop.sock_sendall(s, hdr); await loop.sock_sendall(s, buf)
            await readinto(s, memoryview(hdr)); await readinto(s, buf)
            ts.append(time.perf_counter() - t0)
        print(json.dumps({"us": statistics.median(ts[5:]) * 1e6}), flush=True)

asyncio.run(tcp_main() if backend.startswith("tcp") else ucx_main())
