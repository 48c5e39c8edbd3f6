"""Behaviours of RAPIDS UCXX's asyncio API that code written for it relies on, tested on
ucxx_go (issue: drop-in for RAPIDS UCXX). Where UCXX raises an exception class, ours
raises that class or a subclass of it; deliberate differences are listed in the README
("Differences from RAPIDS UCXX").
"""

import asyncio
import gc
import signal

import numpy as np
import pytest

import ucxx_go
from _support import TIMEOUT, join, mp, queue_get, start, wait_for_condition

import _peers


@pytest.mark.parametrize("message_type", ["tag", "am"])
async def test_receive_pending_when_the_peer_closes_is_canceled(pair, message_type):
    """UCXX's test_server_shutdown: the peer's close cancels what is pending here."""
    client, srv = pair
    pending = asyncio.ensure_future(client.recv(np.empty(10**6)) if message_type == "tag" else client.am_recv())
    await asyncio.sleep(0)  # the receive is submitted
    await asyncio.wait_for(srv.close(), TIMEOUT)
    with pytest.raises(ucxx_go.UCXCanceledError) as info:
        await asyncio.wait_for(pending, TIMEOUT)
    assert type(info.value) is ucxx_go.UCXCanceledError, "the peer closed gracefully: cancelled, not reset"


async def test_receive_pending_when_the_peer_dies_is_canceled_and_reset(processes, server):
    """UCXX cancels what is pending when its peer dies (UCXCanceledError); ours says
    more (UCXConnectionResetError), a subclass of UCXX's class."""
    ready = mp.Queue()
    peer = start(processes, _peers.connect_and_hang, server.listener.port, ready)
    await queue_get(ready)
    ep = await server.accept()
    pending = asyncio.ensure_future(ep.recv(bytearray(64)))
    await asyncio.sleep(0)
    peer.kill()
    with pytest.raises(ucxx_go.UCXCanceledError) as info:
        await asyncio.wait_for(pending, TIMEOUT)
    assert isinstance(info.value, ucxx_go.UCXConnectionResetError)
    await join(peer, TIMEOUT)
    assert peer.exitcode == -signal.SIGKILL
    ep.abort()


def test_invalid_option_value_is_an_invalid_param_error():
    """UCXX's test_config: a value UCX rejects raises UCXInvalidParamError (ours: its
    subclass UCXConfigError)."""
    with pytest.raises(ucxx_go.UCXInvalidParamError):
        ucxx_go.init(options={"SEG_SIZE": "invalid-size"})


async def test_deleted_listener_stops_listening():
    """UCXX: "when this object is deleted, the listening stops", as close() does; the
    endpoints it accepted stay open."""
    accepted = []
    listener = ucxx_go.create_listener(accepted.append)
    port = listener.port
    ep = await asyncio.wait_for(ucxx_go.create_endpoint("127.0.0.1", port), TIMEOUT)
    await wait_for_condition(lambda: accepted, "the accept")
    del listener
    gc.collect()
    with pytest.raises(ucxx_go.UCXError):
        await asyncio.wait_for(ucxx_go.create_endpoint("127.0.0.1", port), TIMEOUT)
    assert ep.alive and accepted[0].alive
    await asyncio.wait_for(asyncio.gather(ep.close(), accepted[0].close()), TIMEOUT)


def test_reset_after_a_test_that_dropped_its_listener():
    """UCXX's tests drop listeners without closing them and call reset() between tests:
    reset() finds nothing open once the objects are gone, cycles included."""

    class Holder:
        pass

    holder = Holder()
    holder.listener = ucxx_go.create_listener(lambda ep: holder)  # a reference cycle
    del holder
    ucxx_go.reset()
