"""Helpers shared by the tests: a listener that hands over its endpoints, spawned peers,
bounded waits. Fixtures built on them live in conftest.py."""

import asyncio
import multiprocessing

import numpy as np

import ucxx_go

TIMEOUT = 10.0  # bound on any await that a bug could leave hanging
STARTUP = 30.0  # a spawned interpreter imports numpy and ucxx_go before it answers

mp = multiprocessing.get_context("spawn")


class Server:
    """A listener that hands each accepted endpoint to the test, and aborts them at the end.

    `listener_kwargs` go to ucxx_go.create_listener (port, endpoint_error_handling, ...)."""

    def __init__(self, handler=None, **listener_kwargs):
        self.accepted = asyncio.Queue()
        self.endpoints = []
        self._handler = handler
        self.listener = ucxx_go.create_listener(self._on_accept, **listener_kwargs)

    def _on_accept(self, ep):
        self.endpoints.append(ep)
        self.accepted.put_nowait(ep)
        if self._handler is not None:
            return self._handler(ep)

    async def connect(self, **kwargs):
        """Connect a client; return (client endpoint, server endpoint)."""
        client = await asyncio.wait_for(
            ucxx_go.create_endpoint("127.0.0.1", self.listener.port, **kwargs), TIMEOUT
        )
        server = await asyncio.wait_for(self.accepted.get(), TIMEOUT)
        return client, server

    def close(self):
        for ep in self.endpoints:
            ep.abort()
        self.listener.close()


async def exchange(sender, receiver, payload, **tags):
    """Send `payload` from `sender`, receive it on `receiver`, check it arrived whole."""
    out = np.zeros(len(payload), dtype="u1")
    n, _ = await asyncio.wait_for(asyncio.gather(receiver.recv(out, **tags), sender.send(payload, **tags)), TIMEOUT)
    assert n == len(payload)
    assert out.tobytes() == bytes(payload)


def start(processes, target, *args):
    p = mp.Process(target=target, args=args, daemon=True)
    p.start()
    processes.append(p)
    return p


async def queue_get(q, timeout=STARTUP):
    """Get from a multiprocessing queue without blocking the event loop."""
    return await asyncio.get_running_loop().run_in_executor(None, q.get, True, timeout)
