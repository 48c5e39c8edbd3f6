# Session 44: a process's first connection to another host against its later ones (two network namespaces on a
# veth bridge, UCX limited to TCP as tests/_netns.py sets it). Host 1 runs an echo server; host 0 a client that
# makes N connections one after the other, each connect + an 8-byte echo + a 1 MiB echo, and prints each one's
# times (the library started first, not timed). WARM=1: the client calls ucxx_go.warm_up() first (not timed);
# SWARM=1: so does the server.
#   sudo python first_connect_netns.py [N]
import asyncio, json, os, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests"))


async def server(ip):
    import numpy as np
    import ucxx_go as ucxx

    async def handler(ep):
        for n in (8, 1 << 20):
            buf = np.empty(n, "u1")
            await ep.recv(buf)
            await ep.send(buf)

    if os.environ.get("SWARM"):
        ucxx.init()
        await ucxx.warm_up()
    lst = ucxx.create_listener(handler, ip=ip)
    print(lst.port, flush=True)
    await asyncio.Event().wait()


async def client(ip, port, n):
    import numpy as np
    import ucxx_go as ucxx
    ucxx.init()  # the library's start is not the connection's
    if os.environ.get("WARM"):
        await ucxx.warm_up()
    out = []
    for _ in range(n):
        mark = os.environ.get("MARK") and os.open("/dev/null", os.O_WRONLY)
        if mark:
            os.write(mark, b"CONNECT-START")
        t0 = time.perf_counter()
        ep = await ucxx.create_endpoint(ip, port)
        t1 = time.perf_counter()
        if mark:
            os.write(mark, b"CONNECT-END")
            os.close(mark)
        small = np.ones(8, "u1")
        await ep.send(small); await ep.recv(small)
        t2 = time.perf_counter()
        big = np.ones(1 << 20, "u1")
        await ep.send(big); await ep.recv(big)
        t3 = time.perf_counter()
        await ep.close()
        out.append([round((t1 - t0) * 1e3, 2), round((t2 - t1) * 1e3, 2), round((t3 - t2) * 1e3, 2)])
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["server"]:
        asyncio.run(server(sys.argv[2]))
    elif sys.argv[1:2] == ["client"]:
        asyncio.run(client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
    else:
        from _netns import Hosts
        n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
        hosts = Hosts(2)
        try:
            srv = hosts[1].run([sys.executable, __file__, "server", hosts[1].ipv4], stdout=subprocess.PIPE, text=True)
            port = srv.stdout.readline().strip()
            pre = os.environ.get("CLIENT_PREFIX", "").split()
            cl = hosts[0].run(pre + [sys.executable, __file__, "client", hosts[1].ipv4, port, str(n)],
                              stdout=subprocess.PIPE, text=True)
            res = json.loads(cl.communicate(timeout=120)[0])
            print("connect ms / 8 B echo ms / 1 MiB echo ms, first:", res[0], " later (median):",
                  [sorted(r[i] for r in res[1:])[len(res[1:]) // 2] for i in range(3)])
            # A second client process against the server its predecessor warmed: its own side's share.
            cl = hosts[0].run(pre + [sys.executable, __file__, "client", hosts[1].ipv4, port, "1"],
                              stdout=subprocess.PIPE, text=True)
            print("  a second client process, its first connection:", json.loads(cl.communicate(timeout=120)[0])[0])
            srv.kill(); srv.wait()
        finally:
            hosts.close()
