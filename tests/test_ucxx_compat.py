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


def test_invalid_option_value_is_an_invalid_param_error(caplog):
    """UCXX's test_config: a value UCX rejects raises UCXInvalidParamError (ours: its
    subclass UCXConfigError), and UCX's reason is logged on "ucx" then, not during a
    later init."""
    with caplog.at_level("ERROR", logger="ucx"):
        with pytest.raises(ucxx_go.UCXInvalidParamError):
            ucxx_go.init(options={"SEG_SIZE": "invalid-size"})
        assert any("SEG_SIZE" in r.getMessage() for r in caplog.records)
        caplog.clear()
        ucxx_go.init(options={"SEG_SIZE": "3M"})
    assert not caplog.records


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


async def test_reset_with_open_objects_raises_and_still_resets(server):
    """UCXX's reset() drops its context before it complains, so the next init()
    starts afresh; what was open is aborted and closed."""
    client, srv = await server.connect()
    with pytest.raises(ucxx_go.UCXError, match="Trying to reset UCX but not all Endpoints and/or Listeners are closed"):
        ucxx_go.reset()
    assert client.closed and server.listener.closed
    ucxx_go.init()
    listener = ucxx_go.create_listener(lambda ep: None)
    listener.close()


def test_module_names(caplog):
    """UCXX's module-level names: versions, transports, worker handles, progress and
    its logger (init says how progress runs on it, at INFO)."""
    with caplog.at_level("INFO", logger="ucx"):
        ucxx_go.init()
    assert any(r.name == "ucx" and r.levelname == "INFO" for r in caplog.records)
    assert not any(r.levelno >= 40 for r in caplog.records)
    assert ucxx_go.__ucx_version__ == "%d.%d.%d" % ucxx_go.get_ucx_version()
    transports = ucxx_go.get_active_transports()
    assert {"self", "tcp"} <= transports, transports
    assert ucxx_go.get_ucp_worker() > 0 and ucxx_go.get_ucxx_worker() == ucxx_go.get_ucp_worker()
    ucxx_go.continuous_ucx_progress()
    assert ucxx_go.get_ucxpy_logger() is __import__("logging").getLogger("ucx")


def test_git_commit():
    """UCXX's __git_commit__: the commit a built distribution came from, or empty when
    it was built from no git checkout."""
    commit = ucxx_go.__git_commit__
    assert isinstance(commit, str)
    assert commit == "" or (len(commit) == 40 and int(commit, 16) >= 0), commit


async def test_endpoint_handles(pair):
    client, srv = pair
    for ep in (client, srv):
        assert ep.ucp_endpoint > 0 and ep.ucxx_endpoint == ep.ucp_endpoint
        assert ep.ucp_worker == ep.ucxx_worker == ucxx_go.get_ucp_worker()
    assert client.ucp_endpoint != srv.ucp_endpoint


@pytest.mark.parametrize("message_type", ["tag", "am"])
async def test_close_after_n_recv_is_closed_when_the_last_receive_returns(pair, message_type):
    """UCXX's test_close_after_n_recv: closed as soon as the n-th receive returned;
    setting it twice, or below what was received, raises."""
    client, srv = pair

    async def one_message(sender, receiver):
        if message_type == "tag":
            await asyncio.gather(sender.send(b"x"), receiver.recv(bytearray(1)))
        else:
            await asyncio.gather(sender.am_send(b"x"), receiver.am_recv())

    for _ in range(2):
        await one_message(client, srv)
    with pytest.raises(ucxx_go.UCXError, match="cannot be less than current recv_count"):
        srv.close_after_n_recv(1, count_from_ep_creation=True)
    await one_message(srv, client)
    client.close_after_n_recv(2)
    with pytest.raises(ucxx_go.UCXError, match="close_after_n_recv has already been set to"):
        client.close_after_n_recv(3)
    await one_message(srv, client)
    assert not client.closed
    await one_message(srv, client)
    assert client.closed


async def test_set_close_callback_on_a_closed_endpoint_raises(pair):
    client, _ = pair
    client.abort()
    with pytest.raises(RuntimeError):
        client.set_close_callback(lambda: None)


async def test_deleted_listener_with_running_handlers_warns_on_ucx_logger(caplog):
    """UCXX warns on its "ucx" logger when a listener is deleted while handlers still
    run; a running handler does not keep its listener alive; active_clients counts
    running handlers."""
    release = asyncio.Event()

    async def handler(ep):
        await release.wait()
        await ep.close()

    listener = ucxx_go.create_listener(handler)
    ep = await asyncio.wait_for(ucxx_go.create_endpoint("127.0.0.1", listener.port), TIMEOUT)
    await wait_for_condition(lambda: listener.active_clients == 1, "the handler running")
    with caplog.at_level("WARNING", logger="ucx"):
        del listener
        gc.collect()
    assert any(r.name == "ucx" and r.getMessage().startswith("Listener object is being destroyed") for r in caplog.records)
    release.set()
    await asyncio.wait_for(ep.close(), TIMEOUT)


def test_get_address_chooses_the_interface_as_ucxx(monkeypatch):
    """UCXPY_IFNAME, else the first ib*, then eth*, then en* interface (by name) that
    has an address; else OSError. lo and others are never chosen by default."""
    from ucxx_go import _address

    addresses = {"lo": "127.0.0.1", "docker0": "172.17.0.1", "enp1s0": "10.0.0.3", "eth1": "10.0.0.2",
                 "eth0": None, "ib0": None}

    def lookup(name):
        if addresses.get(name) is None:
            raise OSError(f"{name}: no address")
        return addresses[name]

    monkeypatch.setattr(_address, "_ipv4_of", lookup)
    monkeypatch.setattr(_address, "_interface_names", lambda: list(addresses))
    monkeypatch.delenv("UCXPY_IFNAME", raising=False)
    assert ucxx_go.get_address() == "10.0.0.2"  # ib0 and eth0 have none: eth1 before enp1s0
    addresses["ib0"] = "192.168.0.1"
    assert ucxx_go.get_address() == "192.168.0.1"
    monkeypatch.setenv("UCXPY_IFNAME", "docker0")
    assert ucxx_go.get_address() == "172.17.0.1"
    monkeypatch.delenv("UCXPY_IFNAME")
    for name in ("ib0", "eth1", "enp1s0"):
        addresses[name] = None
    with pytest.raises(OSError):
        ucxx_go.get_address()
