import asyncio, sys, time, os, subprocess, statistics
import ucxx_go as ucx
async def server():
    async def echo(ep):
        buf = bytearray(8)
        try:
            await ep.recv(buf); await ep.send(buf)
        except Exception: pass
    lf = ucx.create_listener(echo)
    print(lf.port, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
async def client(port, n):
    ucx.init()
    ts=[];tc=[]
    msg, back = bytearray(b"12345678"), bytearray(8)
    for i in range(n):
        t0=time.perf_counter()
        ep = await ucx.create_endpoint("127.0.0.1", port)
        t1=time.perf_counter()
        await ep.send(msg); await ep.recv(back)
        t2=time.perf_counter()
        ts.append((t2-t0)*1e3); tc.append((t1-t0)*1e3)
        await ep.close()
    print("first %.2f median %.3f create median %.3f p90 %.3f" % (ts[0], statistics.median(ts[1:]), statistics.median(tc[1:]), sorted(ts)[int(n*.9)]), file=sys.stderr)
if sys.argv[1]=="s": asyncio.run(server())
else:
    p=subprocess.Popen(([ "taskset","-c",os.environ["ZZS"]] if os.environ.get("ZZS") else [])+[sys.executable, __file__, "s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    port=int(p.stdout.readline())
    asyncio.run(client(port, int(sys.argv[2])))
    p.stdin.close(); p.wait()
