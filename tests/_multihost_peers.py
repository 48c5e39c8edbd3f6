"""Programs the multi-host tests (test_multihost.py) run inside network namespaces:

    python _multihost_peers.py echo-server IP PORT CONNECTIONS
    python _multihost_peers.py echo-client IP PORT SIZE...
    python _multihost_peers.py paused-client IP PORT COUNT PAUSE_MS
    python _multihost_peers.py dask-client SCHEDULER WORKERS

Each prints one JSON line per event the test waits for ({"ready": port}, {"result":
...}) and exits 0 when all went well.
"""

import asyncio
import json
import sys
import time

import numpy as np

TIMEOUT = 60.0


def say(**what):
    print(json.dumps(what), flush=True)


async def echo_server(ip, port, connections):
    import ucxx_go

    served = asyncio.Queue()

    async def handler(ep):
        try:
            transports = None  # read while the peer is connected: it closes after its last message
            while True:
                head = np.empty(1, dtype="<u8")
                await ep.recv(head)
                if head[0] == 0:
                    break
                msg = np.empty(int(head[0]), dtype="u1")
                await ep.recv(msg)
                transports = transports or ep.get_active_transports()
                await ep.send(msg)
            await served.put(transports)
        finally:
            await ep.close()

    listener = ucxx_go.create_listener(handler, port=port, ip=ip)
    say(ready=listener.port)
    for _ in range(connections):
        say(served=await asyncio.wait_for(served.get(), TIMEOUT))
    listener.close()


async def echo_client(ip, port, sizes):
    import ucxx_go

    ep = await asyncio.wait_for(ucxx_go.create_endpoint(ip, port), TIMEOUT)
    # Read while the peer is connected: it closes once it has our last message.
    result = {"transports": ep.get_active_transports(), "local": ep.local_address, "peer": ep.peer_address}
    rng = np.random.default_rng(3)
    for size in sizes:
        msg = rng.integers(0, 256, size, dtype="u1")
        out = np.empty_like(msg)
        await asyncio.wait_for(ep.send(np.array([size], dtype="<u8")), TIMEOUT)
        await asyncio.wait_for(ep.send(msg), TIMEOUT)
        await asyncio.wait_for(ep.recv(out), TIMEOUT)
        if not np.array_equal(out, msg):
            raise SystemExit(f"{size} bytes came back different")
    await asyncio.wait_for(ep.send(np.zeros(1, dtype="<u8")), TIMEOUT)
    say(result=result)
    await asyncio.wait_for(ep.close(), TIMEOUT)


async def paused_client(ip, port, count, pause):
    """COUNT echoes of 8 bytes through an echo-server, each after PAUSE_MS of silence
    (long enough for both sides' progress to go to sleep): the result names the
    transports and the slowest echo's seconds."""
    import ucxx_go

    ep = await asyncio.wait_for(ucxx_go.create_endpoint(ip, port), TIMEOUT)
    result = {"transports": ep.get_active_transports()}
    msg, out = np.arange(8, dtype="u1"), np.empty(8, dtype="u1")
    slowest = 0.0
    for _ in range(count):
        await asyncio.sleep(pause / 1e3)
        t0 = time.perf_counter()
        await asyncio.wait_for(ep.send(np.array([msg.size], dtype="<u8")), TIMEOUT)
        await asyncio.wait_for(ep.send(msg), TIMEOUT)
        await asyncio.wait_for(ep.recv(out), TIMEOUT)
        slowest = max(slowest, time.perf_counter() - t0)
        if not np.array_equal(out, msg):
            raise SystemExit("the echo came back different")
    await asyncio.wait_for(ep.send(np.zeros(1, dtype="<u8")), TIMEOUT)
    result["slowest_s"] = slowest
    say(result=result)
    await asyncio.wait_for(ep.close(), TIMEOUT)


def dask_client(scheduler, workers):
    import dask.array as da
    from distributed import Client

    with Client(scheduler, timeout=TIMEOUT) as client:
        client.wait_for_workers(workers, timeout=TIMEOUT)
        x = da.random.RandomState(5).random((1200, 1200), chunks=(100, 1200))
        # A p2p rechunk: every worker sends shards to every other (a shuffle).
        y = x.rechunk((1200, 100), method="p2p")
        total, expected = client.compute([y.sum(), x.sum()], sync=True)
        if not np.isclose(total, expected):
            raise SystemExit(f"shuffled sum {total} != {expected}")
        say(result={"workers": sorted(client.scheduler_info()["workers"]), "sum": float(total)})


def main(argv):
    role, args = argv[0], argv[1:]
    if role == "echo-server":
        asyncio.run(echo_server(args[0], int(args[1]), int(args[2])))
    elif role == "echo-client":
        asyncio.run(echo_client(args[0], int(args[1]), [int(a) for a in args[2:]]))
    elif role == "paused-client":
        asyncio.run(paused_client(args[0], int(args[1]), int(args[2]), float(args[3])))
    elif role == "dask-client":
        dask_client(args[0], int(args[1]))
    else:
        raise SystemExit(f"unknown role {role}")


if __name__ == "__main__":
    main(sys.argv[1:])
