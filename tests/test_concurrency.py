"""Many operations in flight on one endpoint: matching by tag, ordering on one tag."""

import asyncio

import numpy as np

import ucxx_go


async def test_thousand_concurrent_tagged_messages(pair):
    client, server = pair
    n = 1000
    outs = [np.empty(16, dtype="<u8") for _ in range(n)]
    recvs = [asyncio.ensure_future(server.recv(outs[i], tag=i)) for i in range(n)]
    # Send in reverse order: only the tags can put each message in its buffer.
    sends = [asyncio.ensure_future(client.send(np.full(16, i, dtype="<u8"), tag=i)) for i in reversed(range(n))]
    await asyncio.wait_for(asyncio.gather(*sends, *recvs), 30)
    for i, out in enumerate(outs):
        assert (out == i).all(), f"message {i} landed in the wrong buffer"
    await client.close()
    await server.close()


async def test_order_is_kept_on_one_tag(pair):
    client, server = pair
    n = 500
    outs = [np.empty(4, dtype="<u8") for _ in range(n)]
    recvs = [asyncio.ensure_future(server.recv(o)) for o in outs]
    sends = [asyncio.ensure_future(client.send(np.full(4, i, dtype="<u8"))) for i in range(n)]
    await asyncio.wait_for(asyncio.gather(*sends, *recvs), 30)
    assert [int(o[0]) for o in outs] == list(range(n))
    await client.close()
    await server.close()


async def test_both_directions_at_once(pair):
    client, server = pair
    a, b = np.arange(1 << 18, dtype="u1"), np.arange(1 << 18, dtype="u1")[::-1].copy()
    ra, rb = np.empty_like(a), np.empty_like(b)
    await asyncio.wait_for(
        asyncio.gather(client.send(a), server.send(b), server.recv(ra), client.recv(rb)), 20
    )
    assert (ra == a).all() and (rb == b).all()
    await client.close()
    await server.close()


async def test_many_endpoints_to_one_listener():
    accepted = []
    listener = ucxx_go.create_listener(accepted.append)
    eps = await asyncio.wait_for(
        asyncio.gather(*(ucxx_go.create_endpoint("127.0.0.1", listener.port) for _ in range(50))), 30
    )
    assert len({ep.uid for ep in eps}) == 50
    for ep in eps:
        await ep.close()
    for ep in accepted:
        await ep.close()
    listener.close()


async def test_gathered_sends_and_receives_are_posted_without_waiting(pair, monkeypatch):
    """Large sends (and receives) started together post at once: no inline wait while
    the event loop has the others ready to run; small ones always may wait. Every
    message still lands in its own buffer. (Whether the last one waits depends on what
    else the loop has ready: in loop mode, often the worker's own reader.)"""
    from ucxx_go import _endpoint, _request

    client, server = pair
    size = _request._NO_WAIT_HOST_MIN
    waits = []
    submit = _endpoint.submit

    def recording_submit(fn, *args):
        waits.append((fn.__name__.rsplit("_", 1)[-1], args[-1]))
        return submit(fn, *args)

    monkeypatch.setattr(_endpoint, "submit", recording_submit)
    n = 8
    outs = [np.empty(size, dtype="u1") for _ in range(n)]
    recvs = asyncio.gather(*(server.recv(o, tag=i) for i, o in enumerate(outs)))
    sends = asyncio.gather(*(client.send(np.full(size, i, dtype="u1"), tag=i) for i in range(n)))
    await asyncio.wait_for(asyncio.gather(recvs, sends), 30)
    assert [w for op, w in waits if op == "TagRecv"] == [0] * n
    assert [w for op, w in waits if op == "TagSend"][:n - 1] == [0] * (n - 1)  # the last may wait
    for i, out in enumerate(outs):
        assert (out == i).all(), f"message {i} landed in the wrong buffer"
    waits.clear()
    small = [o[:size - 1] for o in outs]
    recvs = asyncio.gather(*(server.recv(o, tag=i) for i, o in enumerate(small)))
    sends = asyncio.gather(*(client.send(np.full(size - 1, i, dtype="u1"), tag=i) for i in range(n)))
    await asyncio.wait_for(asyncio.gather(recvs, sends), 30)
    assert [w for _, w in waits] == [1] * (2 * n)
