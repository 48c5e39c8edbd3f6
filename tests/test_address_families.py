"""IPv4, IPv6 and wildcard listeners and endpoints.

UCX's TCP transport uses one address family per context (UCX_TCP_AF_PRIO). UCX 1.22
corrupts its heap when its connection manager accepts a connection of the other family
(the process aborted in malloc), so with UCXGO_CONNECT=manager ucxx_go gives a context
made by an IPv6 listener or connection IPv6 TCP interfaces, and refuses the other family
with UCXUnsupportedError before UCX sees it. Connections by address exchange (the
default) go through a socket of ucxx_go's own, of either family in any context. Each
test starts with no context (conftest.py's fresh_context).
"""

import asyncio

import numpy as np
import pytest

import ucxx_go
from _support import TIMEOUT, Server, by_address, exchange, needs_manager


async def echo_through(listen_ip, connect_ip):
    """Connect to a listener on listen_ip through connect_ip; move 100 kB each way."""
    listening = Server(ip=listen_ip)
    try:
        client, server = await listening.connect(connect_ip)
        payload = np.arange(100_000, dtype="u1")
        await exchange(client, server, payload)
        await exchange(server, client, payload[::-1].copy())
        await client.close()
        await server.close()
    finally:
        listening.close()


@pytest.mark.parametrize(
    "listen_ip, connect_ip",
    [("127.0.0.1", "127.0.0.1"), ("0.0.0.0", "127.0.0.1"), ("", "127.0.0.1"),
     ("::1", "::1"), ("::", "::1")],
)
async def test_listener_and_endpoint(listen_ip, connect_ip):
    await echo_through(listen_ip, connect_ip)


@needs_manager
async def test_ipv4_context_refuses_ipv6():
    await echo_through("127.0.0.1", "127.0.0.1")
    with pytest.raises(ucxx_go.UCXUnsupportedError, match="TCP_AF_PRIO"):
        ucxx_go.create_listener(lambda ep: None, ip="::1")
    with pytest.raises(ucxx_go.UCXUnsupportedError):
        await asyncio.wait_for(ucxx_go.create_endpoint("::1", 1), TIMEOUT)
    await echo_through("127.0.0.1", "127.0.0.1")  # the context goes on


@needs_manager
async def test_ipv6_context_refuses_ipv4():
    ucxx_go.init(options={"TCP_AF_PRIO": "inet6"})
    await echo_through("::", "::1")
    with pytest.raises(ucxx_go.UCXUnsupportedError):
        ucxx_go.create_listener(lambda ep: None, ip="127.0.0.1")
    with pytest.raises(ucxx_go.UCXUnsupportedError):
        await asyncio.wait_for(ucxx_go.create_endpoint("127.0.0.1", 1), TIMEOUT)
    await echo_through("", "::1")  # "" is the IPv6 wildcard here


@by_address
async def test_both_families_in_one_context():
    await echo_through("127.0.0.1", "127.0.0.1")
    await echo_through("::1", "::1")
    await echo_through("", "127.0.0.1")
    await echo_through("", "::1")

