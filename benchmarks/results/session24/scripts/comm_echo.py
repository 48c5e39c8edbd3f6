"""Scratch: distributed comm echo between two namespaces. ROLE PROTO ADDR PORT SIZES N"""
import asyncio, json, os, sys, time, statistics
role, proto, addr, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sizes = [int(s) for s in sys.argv[5].split(",")]; N = int(sys.argv[6])
import distributed
from distributed.comm import listen, connect
from distributed.protocol import to_serialize
async def main():
    url = f"{proto}://{addr}:{port}"
    if role == "server":
        done = asyncio.Event()
        async def handle(comm):
            while True:
                try:
                    msg = await comm.read()
                except Exception:
                    break
                if msg == "stop":
                    break
                await comm.write(msg)
            await comm.close(); done.set()
        lst = await listen(url, handle, deserialize=False)

        print("ready", flush=True)
        await asyncio.wait_for(done.wait(), 600)
        lst.stop()
    else:
        comm = await connect(url, deserialize=False)
        out = {}
        for s in sizes:
            data = os.urandom(s)
            ts = []
            for i in range(N + 5):
                t0 = time.perf_counter()
                await comm.write({"op": "echo", "data": to_serialize(data)})
                r = await comm.read()
                ts.append(time.perf_counter() - t0)
            ts = ts[5:]
            out[s] = statistics.median(ts) * 1e6
        await comm.write("stop")
        await comm.close()
        print(json.dumps(out), flush=True)
import cProfile, pstats
if os.environ.get("PROF") and role == "client":
    cProfile.run("asyncio.run(main())", "/tmp/s24/prof." + proto)
else:
    asyncio.run(main())
