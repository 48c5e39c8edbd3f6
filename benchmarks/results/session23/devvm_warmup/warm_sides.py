import asyncio, sys, time, os, subprocess
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
async def one(port):
    msg, back = bytearray(b"12345678"), bytearray(8)
    t0=time.perf_counter()
    ep = await ucx.create_endpoint("127.0.0.1", port)
    await ep.send(msg); await ep.recv(back)
    t=(time.perf_counter()-t0)*1e3
    await ep.close()
    return t
async def client(ports):
    ucx.init()
    out=[]
    for p in ports: out.append("%.2f" % await one(p))
    print(" ".join(out), file=sys.stderr, flush=True)
def spawn():
    p=subprocess.Popen([sys.executable, __file__, "s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    return p, int(p.stdout.readline())
mode=sys.argv[1]
if mode=="s": asyncio.run(server())
elif mode=="c": asyncio.run(client([int(x) for x in sys.argv[2:]]))
else:
    (a,p1),(b,p2)=spawn(),spawn()
    time.sleep(0.3)
    run=lambda ports: subprocess.run([sys.executable, __file__, "c"]+[str(p) for p in ports], stderr=subprocess.PIPE, text=True).stderr.strip()
    if mode=="cold": print("cold first:", run([p1]))
    if mode=="srvwarm": run([p1]); print("server warmed, fresh client first:", run([p1]))
    if mode=="bothwarm": run([p1]); print("both warmed: (client's warm-up to other server, then) first:", run([p2, p1]))
    for p in (a,b): p.stdin.close(); p.wait()
