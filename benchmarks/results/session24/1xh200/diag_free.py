"""Why a dropped received frame is not freed under Python 3.12 (GPU machine): the
referrers of a frame after every name for it is gone."""
import asyncio, gc, sys, weakref, numpy as np
import ucxx_go
from ucxx_go import _frames
freed = []
real = _frames._free
_frames._free = lambda a: (freed.append(a), real(a))


def chain(obj, depth=0, seen=None):
    seen = seen if seen is not None else set()
    if depth > 4 or id(obj) in seen:
        return
    seen.add(id(obj))
    for r in gc.get_referrers(obj):
        if r is seen or isinstance(r, type(sys._getframe())) and r.f_code.co_name == "chain":
            continue
        d = type(r).__name__
        if isinstance(r, dict):
            d += " keys=" + ",".join(map(str, list(r)[:6]))
        elif hasattr(r, "__qualname__"):
            d += " " + r.__qualname__
        elif type(r).__name__ == "frame":
            d += " " + r.f_code.co_name
        print("  " * depth + "<- " + d[:140])
        if not isinstance(r, (list,)) or depth < 2:
            chain(r, depth + 1, seen)


async def main():
    ucxx_go.init()
    eps = asyncio.Queue()
    l = ucxx_go.create_listener(lambda ep: eps.put_nowait(ep))
    client = await ucxx_go.create_endpoint("127.0.0.1", l.port)
    server = await eps.get()
    got, _ = await asyncio.wait_for(asyncio.gather(server.recv_multi(), client.send_multi([np.ones(1 << 20, "u1"), b"small"])), 10)
    w = weakref.ref(got[0])
    del got
    gc.collect()
    print("freed after del:", freed, "frame0 alive:", w() is not None)
    if w() is not None:
        chain(w())
    await client.close(); await server.close(); l.close()
asyncio.run(main())
print(sys.version, np.__version__)
