"""Dask `distributed` over ucxx_go: the ucxgo:// comm backend, from one comm to a cluster.

The comm-level checks mirror distributed's own (distributed/comm/tests/test_comms.py:
check_client_server, check_comm_closed_*, check_connect_timeout, check_many_listeners,
check_deserialize*, check_addresses, test_comm_closed_on_read_error), written afresh for
ucxgo://. The cluster checks follow test_ws.py, as plain async tests that start and close
Scheduler, Workers and Client themselves (bounded), then LocalCluster with worker
processes, the dask command line, and a worker killed mid-computation.

UCX stays on loopback (conftest: UCX_NET_DEVICES=lo), so a wildcard listener's contact
address is the loopback's (test_wildcard_contact_address_*).
"""

import pytest

distributed = pytest.importorskip("distributed")

import asyncio  # noqa: E402
import contextlib  # noqa: E402
import gc  # noqa: E402
import importlib.metadata  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import numpy as np  # noqa: E402
from distributed import Client, LocalCluster, Scheduler, Worker  # noqa: E402
from distributed.comm import (  # noqa: E402
    CommClosedError,
    connect,
    get_address_host,
    get_local_address_for,
    listen,
    parse_address,
    parse_host_port,
    resolve_address,
)
from distributed.comm.addressing import get_address_host_port  # noqa: E402
from distributed.comm.registry import backends, get_backend  # noqa: E402
from distributed.protocol import Serialized, deserialize, serialize, to_serialize  # noqa: E402
from distributed.utils import get_ip  # noqa: E402
from distributed.utils_test import gen_cluster  # noqa: E402

import ucxx_go  # noqa: E402
from _support import TIMEOUT, CloseCallback, started, wait_for_condition  # noqa: E402  (TIMEOUT: comm-level)
from ucxx_go import distributed_backend  # noqa: E402

CLUSTER_STARTUP = 60.0  # bound on starting or stopping a cluster (spawned processes import a lot)
COMPUTE = 60.0  # bound on a computation

ADDRS = ["ucxgo://127.0.0.1", "ucxgo://0.0.0.0", "ucxgo://"]
WILDCARD_HOSTS = ("0.0.0.0", "")


def wait(aw, timeout=TIMEOUT):
    return asyncio.wait_for(aw, timeout)


# -- fixtures and helpers ----------------------------------------------------------------


@pytest.fixture(autouse=True)
def nothing_left_open():
    """Fail a test that leaves ucxx_go endpoints or listeners open, and close them so the
    next test still starts clean (conftest's reset() refuses while any is open)."""
    yield
    gc.collect()
    ctx = ucxx_go._context._context
    if ctx is None:
        return
    eps, listeners = ctx.live_objects()
    for ep in eps:
        ep.abort()
    for lst in listeners:
        lst.close()
    if eps or listeners:
        pytest.fail(f"left open: {eps} {listeners}")


def free_port():
    """A TCP port nothing listens on, below the ephemeral range (the launcher's pick:
    a port the kernel picked and this process released may go to another connection
    before the test listens there)."""
    from ucxx_go.launch import _free_port

    return _free_port("127.0.0.1")


@contextlib.asynccontextmanager
async def listening(addr, handler, **kwargs):
    listener = listen(addr, handler, **kwargs)
    await wait(listener.start())
    try:
        yield listener
    finally:
        listener.stop()


async def comm_pair(addr, **kwargs):
    """(client comm, server comm), connected through a listener that is gone again."""
    accepted = asyncio.Queue()

    async def handle_comm(comm):
        await accepted.put(comm)

    async with listening(addr, handle_comm, **kwargs) as listener:
        client = await wait(connect(listener.contact_address, **kwargs))
        server = await wait(accepted.get())
    return client, server


async def transfer(writer, reader, msg):
    """Write `msg` while the peer reads it: (bytes written, message read). A large message
    goes by UCX rendezvous, so its write ends once the peer reads, not before (TCP's ends
    sooner, while the message fits the socket buffers)."""
    return await wait(asyncio.gather(writer.write(msg), reader.read()))


async def close_all(*comms):
    for comm in comms:
        await wait(comm.close())


def assert_concrete(address):
    """A full ucxgo:// address with a real host and port: no wildcard, no placeholder."""
    scheme, loc = parse_address(address)
    assert scheme == "ucxgo", address
    host, port = parse_host_port(loc)
    assert host not in WILDCARD_HOSTS, address
    socket.inet_aton(host)  # a numeric IPv4 address
    assert 0 < port < 65536, address


@contextlib.asynccontextmanager
async def running(obj, timeout=CLUSTER_STARTUP):
    """Start a distributed Scheduler, Worker, Client or cluster and close it on the way
    out, both bounded."""
    try:
        await wait(obj, timeout)
        yield obj
    finally:
        await wait(obj.close(), timeout)


@contextlib.asynccontextmanager
async def small_cluster():
    """An in-process Scheduler and two one-thread Workers over ucxgo://127.0.0.1, and an
    asynchronous Client."""
    # No active memory manager: it would drop the replicas who_has is asked about.
    with dask.config.set({"distributed.scheduler.active-memory-manager.start": False}):
        scheduler = Scheduler(protocol="ucxgo", host="127.0.0.1", dashboard=False, dashboard_address=":0")
    async with running(scheduler) as s:
        # host: a worker given none listens on all interfaces and advertises get_ip(),
        # which UCX on lo cannot reach (distributed hands tcp:// alone a default_host).
        worker_a = Worker(s.address, nthreads=1, host="127.0.0.1")
        worker_b = Worker(s.address, nthreads=1, host="127.0.0.1")
        async with running(worker_a) as a, running(worker_b) as b:
            async with running(Client(s.address, asynchronous=True)) as c:
                yield s, a, b, c


# -- the backend ---------------------------------------------------------------------------


def test_backend_found_through_entry_point(monkeypatch):
    (ep,) = [e for e in importlib.metadata.entry_points(group="distributed.comm.backends") if e.name == "ucxgo"]
    assert ep.value == "ucxx_go.distributed_backend:UCXGoBackend"
    monkeypatch.delitem(backends, "ucxgo", raising=False)
    backend = get_backend("ucxgo")
    assert isinstance(backend, distributed_backend.UCXGoBackend)
    assert backends["ucxgo"] is backend


def test_address_functions():
    assert resolve_address("ucxgo://127.0.0.1:123") == "ucxgo://127.0.0.1:123"
    assert resolve_address("ucxgo://localhost:456") == "ucxgo://127.0.0.1:456"
    assert resolve_address("ucxgo://0.0.0.0:456") == "ucxgo://0.0.0.0:456"
    assert get_address_host("ucxgo://127.0.0.1:123") == "127.0.0.1"
    assert get_address_host_port("ucxgo://127.0.0.1:123") == ("127.0.0.1", 123)
    assert get_local_address_for("ucxgo://127.0.0.1:80") == "ucxgo://127.0.0.1"


async def test_unknown_connection_args_are_ignored():
    args = {"ssl_context": None, "require_encryption": False, "extra_conn_args": {}, "xxx": "foo"}

    async def echo(comm):
        await wait(comm.write(await wait(comm.read())))
        await wait(comm.close())

    async with listening("ucxgo://127.0.0.1", echo, **args) as listener:
        comm = await wait(connect(listener.contact_address, **args))
        await wait(comm.write({"op": "ping"}))
        assert await wait(comm.read()) == {"op": "ping"}
        await close_all(comm)


# -- listeners and addresses ---------------------------------------------------------------


@pytest.mark.parametrize(
    "addr, host",
    [("ucxgo://127.0.0.1", "127.0.0.1"), ("ucxgo://0.0.0.0", "0.0.0.0"), ("ucxgo://", "0.0.0.0")],
)
async def test_listen_address(addr, host):
    """As tcp://: the bound host, 0.0.0.0 when none is given, and a port of its own."""
    async with listening(addr, lambda comm: None) as listener:
        scheme, loc = parse_address(listener.listen_address)
        assert scheme == "ucxgo"
        assert parse_host_port(loc)[0] == host
        assert 1023 < parse_host_port(loc)[1] < 65536


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0", ""])
async def test_listen_on_given_port(host):
    port = free_port()
    async with listening(f"ucxgo://{host}:{port}", lambda comm: None) as listener:
        assert listener.listen_address == f"ucxgo://{host or '0.0.0.0'}:{port}"


@pytest.mark.parametrize("addr", ["ucxgo://0.0.0.0", "ucxgo://"])
async def test_wildcard_contact_address_is_concrete(addr):
    """Contact address: one UCX may use. With UCX_NET_DEVICES=lo, the loopback's (tcp
    would give get_ip(), the outward address, which UCX restricted to lo cannot reach,
    so peers could not connect); the listener is bound to the wildcard."""
    accepted = asyncio.Queue()

    async def handle_comm(comm):
        await accepted.put(comm)

    async with listening(addr, handle_comm) as listener:
        port = parse_host_port(parse_address(listener.listen_address)[1])[1]
        assert listener.contact_address == f"ucxgo://127.0.0.1:{port}"
        assert_concrete(listener.contact_address)
        comm = await wait(connect(listener.contact_address))
        server = await wait(accepted.get())
    await close_all(comm, server)


@pytest.mark.parametrize(
    "devices,host,want",
    [
        ("all", "0.0.0.0", "outward"),
        ("lo", "0.0.0.0", "127.0.0.1"),
        ("lo", "::", "::1"),
        ("mlx5_0:1", "0.0.0.0", "outward"),  # not a network interface: tcp's choice
        ("lo,{nic}", "0.0.0.0", "nic"),  # never the loopback when another is allowed
        ("lo", "10.1.2.3", "10.1.2.3"),  # a concrete host stays
    ],
)
def test_wildcard_contact_address_follows_ucx_devices(monkeypatch, devices, host, want):
    import ucxx_go
    from ucxx_go import distributed_backend

    nic = next((n for n in ("eth0", "ens3", "enp0s3") if _has_ipv4(n)), None)
    if "{nic}" in devices and nic is None:
        pytest.skip("no eth0/ens3/enp0s3 with an IPv4 address here")
    monkeypatch.setattr(ucxx_go, "get_config", lambda: {"NET_DEVICES": devices.format(nic=nic)})
    expected = {"outward": get_ip(), "nic": nic and ucxx_go.get_address(ifname=nic)}.get(want, want)
    assert distributed_backend._concrete_host(host) == expected


def _has_ipv4(name):
    import ucxx_go

    try:
        ucxx_go.get_address(ifname=name)
        return True
    except OSError:
        return False


async def test_listen_on_hostname():
    """As tcp://localhost: the listener binds the name's address and says so."""

    async def echo(comm):
        await wait(comm.write(await wait(comm.read())))
        await wait(comm.close())

    async with listening("ucxgo://localhost", echo) as listener:
        assert listener.listen_address == listener.contact_address
        assert listener.contact_address.startswith("ucxgo://127.0.0.1:")
        comm = await wait(connect(listener.contact_address))
        await wait(comm.write("ping"))
        assert await wait(comm.read()) == "ping"
        await close_all(comm)


@pytest.mark.parametrize("addr", ADDRS)
async def test_many_listeners(addr):
    listeners = []
    try:
        for _ in range(64):
            listener = listen(addr, lambda comm: None)
            await wait(listener.start())
            listeners.append(listener)
        assert len({lst.listen_address for lst in listeners}) == len(listeners)
        assert len({lst.contact_address for lst in listeners}) == len(listeners)
    finally:
        for listener in listeners:
            listener.stop()


async def test_ipv6_comms():
    """Over IPv6 loopback: the context speaks IPv6 (the first address says so) and the
    comms' addresses are bracketed as distributed writes them."""
    client, server = await comm_pair("ucxgo://[::1]")
    try:
        for comm in (client, server):
            for address in (comm.local_address, comm.peer_address):
                assert address.startswith("ucxgo://[::1]:"), address
                assert parse_host_port(parse_address(address)[1])[0] == "::1"
        msg = {"op": "ping", "data": to_serialize(np.arange(1000, dtype="u1"))}
        _, got = await transfer(client, server, msg)
        np.testing.assert_array_equal(np.asarray(got["data"]), msg["data"].data)
    finally:
        await close_all(client, server)


def test_config_keys_with_underscores_count(monkeypatch):
    """DASK_DISTRIBUTED__COMM__UCXGO__... variables reach dask with underscores in
    their keys; the backend reads them as the hyphenated ones."""
    monkeypatch.setenv("DASK_DISTRIBUTED__COMM__UCXGO__UCX_OPTIONS", '{"SEG_SIZE": "3M"}')
    monkeypatch.setenv("DASK_DISTRIBUTED__COMM__UCXGO__MULTI_BUFFER_LIMITS", '{"max_frames": 77}')
    dask.config.refresh()
    try:
        distributed_backend._init_from_config()
        assert ucxx_go.get_config()["SEG_SIZE"] == "3M"
        assert ucxx_go._context._context.limits["max_frames"] == 77
    finally:
        monkeypatch.delenv("DASK_DISTRIBUTED__COMM__UCXGO__UCX_OPTIONS")
        monkeypatch.delenv("DASK_DISTRIBUTED__COMM__UCXGO__MULTI_BUFFER_LIMITS")
        dask.config.refresh()


async def test_listener_host_port():
    """As TCPListener.get_host_port: refused before start, then the bound (host, port)."""
    listener = listen("ucxgo://127.0.0.1", lambda comm: None)
    with pytest.raises(ValueError):
        listener.get_host_port()
    await wait(listener.start())
    try:
        host, port = listener.get_host_port()
        assert listener.listen_address == f"ucxgo://{host}:{port}" and host == "127.0.0.1"
    finally:
        listener.stop()


@pytest.mark.parametrize(
    "peer, local", [("ucxgo://127.0.0.1:80", "ucxgo://127.0.0.1"), ("ucxgo://[::1]:80", "ucxgo://[::1]")]
)
def test_local_address_for_warns_nothing(peer, local):
    """distributed runs its tests with warnings as errors; get_ipv6 is deprecated."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert get_local_address_for(peer) == local


async def test_stop_aborts_comms_in_their_handshake():
    """A peer that connects but never sends distributed's handshake: stopping the
    listener as distributed's servers do (stop, then abort_handshaking_comms) aborts
    that comm, the handler never sees it, and the peer learns of it."""
    handled = []
    async with listening("ucxgo://127.0.0.1", handled.append) as listener:
        ep = await wait(ucxx_go.create_endpoint("127.0.0.1", listener.get_host_port()[1]))
        try:
            # The listener's side writes its half of the handshake first.
            await wait(ep.recv_multi())
            listener.stop()
            listener.abort_handshaking_comms()
            with pytest.raises(ucxx_go.UCXError):
                await wait(ep.recv_multi())
        finally:
            ep.abort()
    assert handled == []


# -- comms ---------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [8, 16 << 20])
async def test_both_sides_write_then_read(size):
    """A write returns once the message is queued, as tcp's does, so two tasks that
    each write and then read finish, however large the message (16 MiB goes by UCX
    rendezvous, which the peer completes by reading)."""
    client, server = await comm_pair("ucxgo://127.0.0.1")
    payload = np.arange(size, dtype="u1")

    async def write_then_read(comm, name):
        await wait(comm.write({"from": name, "data": to_serialize(payload)}))
        return await wait(comm.read())

    got_by_client, got_by_server = await wait(
        asyncio.gather(write_then_read(client, "client"), write_then_read(server, "server"))
    )
    assert got_by_client["from"] == "server" and got_by_server["from"] == "client"
    for got in (got_by_client, got_by_server):
        np.testing.assert_array_equal(np.asarray(got["data"]), payload)
    await close_all(client, server)


async def test_large_array_goes_as_one_frame(monkeypatch):
    """An array over distributed's shard size (64 MiB) goes as one frame: shards in
    separate allocations could only be joined again by copying. Negotiated
    handshake options (compression, pickle protocol) reach the serialiser."""
    client, server = await comm_pair("ucxgo://127.0.0.1")
    sent = []
    real = client._ep._start_send_multi
    monkeypatch.setattr(client._ep, "_start_send_multi", lambda frames: (sent.append([memoryview(f).nbytes for f in frames]), real(frames))[1])
    payload = np.ones(80 << 20, dtype="u1")
    try:
        _, got = await transfer(client, server, {"data": to_serialize(payload)})
        assert max(sent[0]) == payload.nbytes, sent
        assert np.asarray(got["data"]).nbytes == payload.nbytes
    finally:
        await close_all(client, server)


async def test_write_failing_after_it_returned_fails_the_next_read():
    """A write that returned and then failed (its peer went away before taking the
    rendezvous message) is reported by the comm's next operation, once."""
    client, server = await comm_pair("ucxgo://127.0.0.1")
    await wait(client.write({"data": to_serialize(np.zeros(16 << 20, dtype="u1"))}))
    server.abort()
    with pytest.raises(CommClosedError, match="after a failed write|read"):
        await wait(client.read())
    assert client.closed()
    await wait(client.close())


@pytest.mark.parametrize("addr", ADDRS)
async def test_client_server(addr):
    """check_client_server: 20 clients at once, each: ping, a last message, pong; the
    server closes; addresses checked on both ends."""
    clients = 20
    server_peers, client_locals, errors = set(), set(), []
    pinged = []
    all_pinged = asyncio.Event()

    async def handle_comm(comm):
        try:
            server_peers.add(comm.peer_address)
            msg = await wait(comm.read())
            assert msg["op"] == "ping"
            pinged.append(msg["data"])
            if len(pinged) == clients:
                all_pinged.set()
            await wait(all_pinged.wait())  # every client's comm is open at once
            msg["op"] = "pong"
            await wait(comm.write(msg))
            assert (await wait(comm.read()))["op"] == "foobar"
        except BaseException as e:
            errors.append(e)
            raise
        finally:
            await wait(comm.close())

    async with listening(addr, handle_comm, xxx="bar") as listener:
        assert parse_address(listener.listen_address)[0] == "ucxgo"
        assert_concrete(listener.contact_address)
        listen_port = parse_host_port(parse_address(listener.listen_address)[1])[1]
        assert parse_host_port(parse_address(listener.contact_address)[1])[1] == listen_port

        async def client(key):
            comm = await wait(connect(listener.contact_address, xxx="foo"))
            try:
                assert comm.peer_address == listener.contact_address
                assert_concrete(comm.local_address)
                client_locals.add(comm.local_address)
                await wait(comm.write({"op": "ping", "data": key}))
                await wait(comm.write({"op": "foobar"}))
                assert await wait(comm.read()) == {"op": "pong", "data": key}
                with pytest.raises(CommClosedError):
                    await wait(comm.read())  # the server closes once it has read foobar
            finally:
                await wait(comm.close())
            return key

        assert await wait(asyncio.gather(*(client(i) for i in range(clients)))) == list(range(clients))
    assert not errors, errors
    assert sorted(pinged) == list(range(clients))
    for peer in server_peers:
        assert_concrete(peer)
    assert server_peers == client_locals  # each side names the other's real address


@pytest.mark.parametrize("addr", ADDRS)
async def test_comm_addresses(addr):
    """check_addresses and check_repr: each end's local address is the other's peer."""
    a, b = await comm_pair(addr)
    try:
        for address in (a.local_address, a.peer_address, b.local_address, b.peer_address):
            assert_concrete(address)
        assert a.local_address in repr(b) and b.local_address in repr(a)
        assert "closed" not in repr(a) and "closed" not in repr(b)
        assert a.peer_address == b.local_address
        assert a.local_address == b.peer_address
    finally:
        await close_all(a, b)
    assert "closed" in repr(a) and "closed" in repr(b)


@pytest.mark.parametrize("addr", ADDRS)
async def test_comm_closed_implicit(addr):
    """A server that closes at once: the client's write or read raises CommClosedError."""

    async def handle_comm(comm):
        await wait(comm.close())

    async with listening(addr, handle_comm) as listener:
        comm = await wait(connect(listener.contact_address))
        with pytest.raises(CommClosedError):
            await wait(comm.write({}))
            await wait(comm.read())
        await close_all(comm)

        comm = await wait(connect(listener.contact_address))
        with pytest.raises(CommClosedError):
            await wait(comm.read())
        await close_all(comm)


@pytest.mark.parametrize("how", ["dropped", "aborted", "closed"])
async def test_server_read_fails_promptly_when_client_goes(how):
    """The client drops (garbage), aborts or closes its comm: the server's pending read
    raises CommClosedError within a second or two."""
    outcome = asyncio.get_running_loop().create_future()
    handling = asyncio.Event()  # past the handshake: the client may go now

    async def handle_comm(comm):
        handling.set()
        started = time.monotonic()
        try:
            await wait(comm.read())
        except BaseException as e:
            outcome.set_result((e, time.monotonic() - started, comm.closed()))
        else:
            outcome.set_result((None, 0, False))
        finally:
            await wait(comm.close())

    async with listening("ucxgo://127.0.0.1", handle_comm) as listener:
        comm = await wait(connect(listener.contact_address))
        await wait(handling.wait())
        if how == "dropped":
            del comm
            gc.collect()  # the ucxx_go Endpoint's finalizer aborts the connection
        elif how == "aborted":
            comm.abort()
        else:
            await close_all(comm)
        exc, elapsed, closed = await wait(outcome)
    assert isinstance(exc, CommClosedError), exc
    assert elapsed < 2.0 and closed


@pytest.mark.parametrize("addr", ADDRS)
async def test_comm_closed_explicit(addr):
    """check_comm_closed_explicit: reads in flight on both ends fail when one closes;
    later reads and writes fail on both."""
    a, b = await comm_pair(addr)
    a_read, b_read = await started(a.read(), b.read())  # both reads have posted their receives
    await close_all(a)
    with pytest.raises(CommClosedError):
        await wait(a_read)
    with pytest.raises(CommClosedError):
        await wait(b_read)
    for comm in (a, b):
        with pytest.raises(CommClosedError):
            await wait(comm.read())
        with pytest.raises(CommClosedError):
            await wait(comm.write({}))
    assert a.closed() and b.closed()
    await close_all(b)


async def test_messages_written_before_close_are_read_first():
    """close() flushes: what a comm wrote before it closed is still read by the peer,
    then the peer's next read raises CommClosedError (as with TCP's FIN)."""
    a, b = await comm_pair("ucxgo://127.0.0.1")
    b_ep_closed = CloseCallback(b._ep)  # the close reaching b's endpoint (the comm does not say)
    await wait(a.write({"last": 1}))
    await wait(a.write({"last": 2}))
    await close_all(a)
    await b_ep_closed.wait(TIMEOUT)
    assert not b._ep.alive
    try:
        assert await wait(b.read()) == {"last": 1}
        assert await wait(b.read()) == {"last": 2}
        with pytest.raises(CommClosedError):
            await wait(b.read())
    finally:
        await close_all(b)


async def test_connect_timeout():
    """check_connect_timeout: nobody listening, timeout=0.15: OSError after the timeout."""
    started = time.monotonic()
    with pytest.raises(OSError):
        await wait(connect(f"ucxgo://127.0.0.1:{free_port()}", timeout=0.15))
    assert 0.1 <= time.monotonic() - started <= 2.0


async def test_write_returns_bytes_written():
    a, b = await comm_pair("ucxgo://127.0.0.1")
    try:
        small = await wait(a.write({"op": "ping"}))  # small: ends before the peer reads
        assert small > 0
        assert await wait(b.read()) == {"op": "ping"}
        arr = np.arange(1 << 17, dtype="f8")  # 1 MiB
        n, got = await transfer(a, b, {"x": to_serialize(arr)})
        assert n >= arr.nbytes
        np.testing.assert_array_equal(got["x"], arr)
    finally:
        await close_all(a, b)


async def test_read_cancelled_by_timeout_closes_comm():
    """test_comm_closed_on_read_error: a read cut short leaves the stream unusable, so the
    comm is closed, and the peer learns it."""
    reader, writer = await comm_pair("ucxgo://127.0.0.1")
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(reader.read(), 0.01)
    assert reader.closed()
    with pytest.raises(CommClosedError):
        await wait(writer.read())
    await close_all(reader, writer)


async def test_concurrent_read_and_write():
    """One reader and one writer at a time on each comm, but both at once."""
    a, b = await comm_pair("ucxgo://127.0.0.1")
    count = 50

    async def send(comm, who):
        for i in range(count):
            await wait(comm.write({"who": who, "i": i, "x": to_serialize(np.full(1000, i))}))

    async def receive(comm):
        got = []
        for _ in range(count):
            got.append(await wait(comm.read()))
        return got

    try:
        _, _, from_b, from_a = await wait(asyncio.gather(send(a, "a"), send(b, "b"), receive(a), receive(b)))
        for who, got in (("b", from_b), ("a", from_a)):
            assert [m["i"] for m in got] == list(range(count))
            assert all(m["who"] == who and (m["x"] == m["i"]).all() for m in got)
    finally:
        await close_all(a, b)


async def test_frames_read_share_no_memory():
    """Several large arrays in one message arrive in writable buffers, none overlapping."""
    a, b = await comm_pair("ucxgo://127.0.0.1")
    try:
        sent = [np.full(1 << 21, i, dtype="u1") for i in range(4)]  # 2 MiB each
        _, got = await transfer(a, b, {"arrays": [to_serialize(x) for x in sent]})
        got = got["arrays"]
        assert len(got) == len(sent)
        for i, x in enumerate(got):
            assert isinstance(x, np.ndarray) and x.flags.writeable
            np.testing.assert_array_equal(x, sent[i])
            for y in got[i + 1:]:
                assert not np.shares_memory(x, y)
        got[0][:] = 255
        for i, x in enumerate(got[1:], 1):
            assert (x == i).all()
    finally:
        await close_all(a, b)


def _owner(a):
    """The object at the end of `a`'s chain of buffers (numpy bases, memoryview
    exporters): what keeps `a`'s memory alive."""
    o = a
    while True:
        nxt = o.obj if isinstance(o, memoryview) else getattr(o, "base", None)
        if nxt is None:
            return o
        o = nxt


@pytest.mark.parametrize("big", [1 << 20, 50_000_000])
async def test_each_frame_owns_memory_of_its_size(big, monkeypatch):
    """A 1,000-byte array read beside a large one owns 1,000 bytes, not the message's,
    and dropping the large one frees its memory while the small one lives:
    distributed's memory accounting is true. Before, every frame was a view of one
    ownerless block, and the small array kept 50,001,472 bytes alive. The small one is
    in a numpy-allocated host_array (get_host_array, distributed's test helper, finds
    it); the large one in the engine's allocation of that frame alone."""
    from distributed.protocol.utils_test import get_host_array

    from ucxx_go import _frames

    freed = []
    real_release = _frames._release_host_frame
    monkeypatch.setattr(_frames, "_release_host_frame",
                        lambda address: (freed.append(address), real_release(address)))
    a, b = await comm_pair("ucxgo://127.0.0.1")
    try:
        small, large = np.arange(1000, dtype="u1"), np.ones(big, dtype="u1")
        _, got = await transfer(a, b, {"small": to_serialize(small), "large": to_serialize(large)})
        await asyncio.sleep(0)  # the gather's callbacks still queued hold its result (Python 3.12)
        np.testing.assert_array_equal(got["small"], small)
        np.testing.assert_array_equal(got["large"], large)
        assert get_host_array(got["small"]).nbytes == small.nbytes
        owner = _owner(got["large"])
        assert isinstance(owner, memoryview) and owner.nbytes == large.nbytes
        assert not np.shares_memory(got["small"], got["large"])
        at = got["large"].__array_interface__["data"][0]
        freed.clear()
        kept = got["small"]
        del got, owner
        gc.collect()
        assert at in freed, "dropping the large array did not give its frame back"
        np.testing.assert_array_equal(kept, small)
    finally:
        await close_all(a, b)


# -- deserialization -----------------------------------------------------------------------


async def read_through_listener(addr, deserialize, msg):
    """Send `msg` from a client; return what a listener with `deserialize` read."""
    received = asyncio.get_running_loop().create_future()

    async def handle_comm(comm):
        try:
            received.set_result(await wait(comm.read()))
        except BaseException as e:
            received.set_exception(e)
        finally:
            await wait(comm.close())

    async with listening(addr, handle_comm, deserialize=deserialize) as listener:
        comm = await wait(connect(listener.contact_address))
    try:
        await wait(comm.write(msg))
        return await wait(received)
    finally:
        await close_all(comm)


async def read_through_connector(addr, deserialize, msg):
    """Send `msg` from a listener; return what a client with `deserialize` read."""
    done = asyncio.Event()

    async def handle_comm(comm):
        try:
            await wait(comm.write(msg))
            await wait(done.wait())
        finally:
            await wait(comm.close())

    async with listening(addr, handle_comm) as listener:
        comm = await wait(connect(listener.contact_address, deserialize=deserialize))
    try:
        return await wait(comm.read())
    finally:
        done.set()
        await close_all(comm)


def check_deserialized(out, expected_to_ser, expected_ser, plain):
    """deserialize=True: Serialize/Serialized values arrive as the objects themselves."""
    assert list(out.pop("to_ser")) == [expected_to_ser]
    assert out.pop("ser") == expected_ser
    assert out == plain


def check_serialized(out, expected_to_ser, expected_ser, plain):
    """deserialize=False: they arrive still serialized (to_serialize may pass through)."""
    (to_ser,) = out.pop("to_ser")
    ser = out.pop("ser")
    assert isinstance(ser, Serialized)
    assert deserialize(ser.header, ser.frames) == expected_ser
    if isinstance(to_ser, Serialized):
        assert deserialize(to_ser.header, to_ser.frames) == expected_to_ser
    else:
        assert to_ser == to_serialize(expected_to_ser)
    assert out == plain


@pytest.mark.parametrize("size", ["small", "8MB"])
async def test_deserialize_flag(size):
    """check_deserialize: the flag on listen() and connect(), for small values and for
    8 MB bytestrings."""
    if size == "small":
        plain, to_ser, ser = {"op": "update", "x": b"abc"}, 123, 456
    else:
        big = os.urandom(1 << 20) * 8
        plain, to_ser, ser = {"op": "update", "x": big}, big, big
    msg = dict(plain, to_ser=(to_serialize(to_ser),), ser=Serialized(*serialize(ser)))
    for read in (read_through_listener, read_through_connector):
        check_serialized(await read("ucxgo://127.0.0.1", False, msg), to_ser, ser, plain)
        check_deserialized(await read("ucxgo://127.0.0.1", True, msg), to_ser, ser, plain)


@pytest.mark.parametrize("should_deserialize", [True, False])
async def test_deserialize_roundtrip(should_deserialize):
    """check_deserialize_roundtrip, 4 MB: bytes and a numpy array in a dict go there and
    back, deserialized or passed through serialized."""
    blob = os.urandom(1 << 20) * 4
    arr = np.random.default_rng(3).random(1 << 19)  # 4 MiB of float64
    msg = {
        "op": "update",
        "x": blob,
        "to_ser": [to_serialize(blob)],
        "ser": Serialized(*serialize(blob)),
        "arr": {"data": to_serialize(arr)},
    }
    a, b = await comm_pair("ucxgo://127.0.0.1", deserialize=should_deserialize)
    try:
        _, got = await transfer(a, b, msg)
        _, got = await transfer(b, a, got)
    finally:
        await close_all(a, b)
    assert sorted(got) == sorted(msg)
    assert got["op"] == "update" and got["x"] == blob
    if should_deserialize:
        assert bytes(got["to_ser"][0]) == blob
        assert bytes(got["ser"]) == blob
        np.testing.assert_array_equal(got["arr"]["data"], arr)
    else:
        assert isinstance(got["to_ser"][0], (Serialized, type(to_serialize(0))))
        assert isinstance(got["ser"], Serialized)
        data = got["arr"]["data"]
        assert isinstance(data, (Serialized, type(to_serialize(0))))
        if isinstance(data, Serialized):
            np.testing.assert_array_equal(deserialize(data.header, data.frames), arr)


def _raise_eoferror():
    raise EOFError


class _EOFRaising:
    def __reduce__(self):
        return _raise_eoferror, ()


async def test_deserialize_eoferror_closes_comm():
    """check_deserialize_eoferror: EOFError while deserializing closes the comm."""
    server_read = asyncio.get_running_loop().create_future()

    async def handle_comm(comm):
        try:
            await wait(comm.write({"data": to_serialize(_EOFRaising())}))
            try:
                await wait(comm.read())
            except BaseException as e:
                server_read.set_result(e)
            else:
                server_read.set_result(None)
        finally:
            await wait(comm.close())

    async with listening("ucxgo://127.0.0.1", handle_comm) as listener:
        comm = await wait(connect(listener.contact_address, deserialize=True))
        with pytest.raises(CommClosedError):
            await wait(comm.read())
        assert comm.closed()
        assert isinstance(await wait(server_read), CommClosedError)
    await close_all(comm)


# -- clusters in this process --------------------------------------------------------------


@gen_cluster(
    client=True,
    scheduler_kwargs={"protocol": "ucxgo"},
    # reader: no notifier thread for gen_cluster's thread-leak check to count.
    config={"distributed.comm.ucxgo.completion-mode": "reader"},
    timeout=COMPUTE,
)
async def test_gen_cluster_roundtrip(c, s, a, b):
    """test_ws.py's roundtrip, under gen_cluster: its checks fail on comms, threads or
    processes left behind."""
    assert s.address.startswith("ucxgo://127.0.0.1:") and a.address.startswith("ucxgo://127.0.0.1:")
    x = np.arange(100)
    future = await c.scatter(x, workers=[a.address])
    np.testing.assert_array_equal(await future, x)
    assert await c.submit(np.sum, future, workers=[b.address]) == x.sum()


async def test_cluster_submit_and_array():
    async with small_cluster() as (s, a, b, c):
        assert s.address.startswith("ucxgo://127.0.0.1:")
        assert a.address.startswith("ucxgo://127.0.0.1:") and b.address.startswith("ucxgo://127.0.0.1:")
        assert c.scheduler.address == s.address
        assert await wait(c.submit(lambda x: x + 1, 10), COMPUTE) == 11
        futures = c.map(lambda x: x * x, range(20))
        assert await wait(c.gather(futures), COMPUTE) == [i * i for i in range(20)]

        arr = np.random.default_rng(5).random((400, 400))
        x = da.from_array(arr, chunks=100)
        result = await wait(c.compute((x + x.T).sum()), COMPUTE)
        assert np.isclose(result, (arr + arr.T).sum())


async def test_cluster_scatter_gather_12mb():
    async with small_cluster() as (s, a, b, c):
        arr = np.random.default_rng(6).random(12 * 2**20 // 8)  # 12 MiB: offloaded serialization
        [future] = await wait(c.scatter([arr], workers=[a.address]), COMPUTE)
        back = await wait(c.gather(future), COMPUTE)
        np.testing.assert_array_equal(back, arr)
        assert not np.shares_memory(back, arr)
        # Worker to worker: b computes on a's array.
        total = c.submit(np.sum, future, workers=[b.address], allow_other_workers=False)
        assert np.isclose(await wait(total, COMPUTE), arr.sum())
        assert any(future.key in log["keys"] and log["who"] == a.address for log in b.transfer_incoming_log)


async def test_cluster_data_moves_between_workers():
    """A task that needs data held on both workers: one fetches from the other."""
    async with small_cluster() as (s, a, b, c):
        x = c.submit(np.arange, 100_000, workers=[a.address], key="x")
        y = c.submit(np.ones, 100_000, workers=[b.address], key="y")
        z = c.submit(np.add, x, y, workers=[a.address], key="z")
        np.testing.assert_array_equal(await wait(z, COMPUTE), np.arange(100_000) + 1)
        who_has = await wait(c.who_has([x, y, z]), COMPUTE)
        assert set(who_has["x"]) == {a.address}
        assert set(who_has["y"]) == {a.address, b.address}  # a now holds a replica
        assert set(who_has["z"]) == {a.address}
        [log] = [log for log in a.transfer_incoming_log if "y" in log["keys"]]
        assert log["who"] == b.address and log["total"] >= 800_000
        assert not b.transfer_incoming_log


# -- worker processes ----------------------------------------------------------------------


def local_cluster():
    return LocalCluster(
        protocol="ucxgo",
        processes=True,
        n_workers=2,
        threads_per_worker=1,
        host="127.0.0.1",
        dashboard_address=None,
        asynchronous=True,
    )


async def test_local_cluster_processes():
    """Nannies spawn worker processes; each finds the backend through the entry point."""

    def backend_of_this_process():
        from distributed.comm.registry import backends

        return os.getpid(), type(backends["ucxgo"]).__module__

    async with running(local_cluster()) as cluster, running(Client(cluster, asynchronous=True)) as c:
        await wait(c.wait_for_workers(2), CLUSTER_STARTUP)
        workers = (await wait(c.scheduler.identity()))["workers"]
        assert len(workers) == 2 and all(w.startswith("ucxgo://127.0.0.1:") for w in workers)
        found = await wait(c.run(backend_of_this_process), COMPUTE)
        assert {module for _, module in found.values()} == {"ucxx_go.distributed_backend"}
        assert os.getpid() not in {pid for pid, _ in found.values()}
        total = await wait(c.compute(da.ones((4000, 4000), chunks=500).sum()), COMPUTE)
        assert total == 16_000_000


async def test_worker_processes_take_the_configured_engine_progress(monkeypatch):
    """distributed.comm.ucxgo.engine-progress reaches nanny-spawned workers: with
    "loop", their event loops drive their workers (no progress thread)."""
    monkeypatch.delenv("UCXGO_PROGRESS_MODE", raising=False)

    def engine_progress():
        from ucxx_go import _context

        return _context._context.engine_progress

    with dask.config.set({"distributed.comm.ucxgo.engine-progress": "loop"}):
        async with running(local_cluster()) as cluster, running(Client(cluster, asynchronous=True)) as c:
            await wait(c.wait_for_workers(2), CLUSTER_STARTUP)
            assert set((await wait(c.run(engine_progress), COMPUTE)).values()) == {"loop"}
            assert await wait(c.submit(lambda x: x + 1, 1), COMPUTE) == 2


async def test_worker_processes_warm_up_when_configured(monkeypatch):
    """distributed.comm.ucxgo.warm-up reaches nanny-spawned workers: each warmed up when
    it started, so asking again returns that warm-up's result without trying the
    address given (one of no device here, which a first warm-up would fail on)."""
    monkeypatch.delenv("UCXGO_WARM_UP", raising=False)

    async def warmed():
        import ucxx_go

        await asyncio.wait_for(ucxx_go.warm_up("192.0.2.1"), 30)
        return True

    with dask.config.set({"distributed.comm.ucxgo.warm-up": True}):
        async with running(local_cluster()) as cluster, running(Client(cluster, asynchronous=True)) as c:
            await wait(c.wait_for_workers(2), CLUSTER_STARTUP)
            assert set((await wait(c.run(warmed), COMPUTE)).values()) == {True}


def test_engine_progress_choice(monkeypatch):
    """A Dask process's engine progress: the environment, else the config, else auto."""
    from ucxx_go.distributed_backend import _engine_progress

    monkeypatch.delenv("UCXGO_PROGRESS_MODE", raising=False)
    assert _engine_progress({}) == "auto"
    assert _engine_progress({"engine-progress": "thread"}) == "thread"
    monkeypatch.setenv("UCXGO_PROGRESS_MODE", "loop")
    assert _engine_progress({"engine-progress": "thread"}) == "loop"


async def test_worker_killed_mid_computation():
    """SIGKILL one of two worker processes while tasks run: its nanny starts a new one,
    the scheduler reruns what was lost, the result is right."""
    released = "ucxgo-test-worker-killed"

    def held_inc(i):
        # Tasks past the first ten wait until the test has killed a worker: the kill then
        # lands mid-computation, with a task running on each worker.
        if i >= 10 and not distributed.Event(released).wait(COMPUTE):
            raise TimeoutError("the test never released the tasks")
        return i + 1

    tasks = 100
    async with running(local_cluster()) as cluster, running(Client(cluster, asynchronous=True)) as c:
        await wait(c.wait_for_workers(2), CLUSTER_STARTUP)
        futures = c.map(held_inc, range(tasks), pure=False)
        total = c.submit(sum, futures)
        await wait(c.gather(futures[:10]), COMPUTE)
        assert not total.done()

        nanny = next(iter(cluster.workers.values()))
        victim = nanny.worker_address
        state = cluster.scheduler.workers[victim]
        assert state.processing or state.has_what  # it has work to lose
        pid = nanny.process.process.pid
        os.kill(pid, signal.SIGKILL)
        await wait(distributed.Event(released, client=c).set())

        assert await wait(total, COMPUTE) == sum(i + 1 for i in range(tasks))
        [removed] = [msg for _, msg in cluster.scheduler.get_events(victim) if msg["action"] == "remove-worker"]
        assert not removed["expected"]
        assert removed["processing-tasks"] or removed["lost-computed-tasks"]
        await wait(c.wait_for_workers(2), CLUSTER_STARTUP)
        assert nanny.process is not None and nanny.process.process.pid != pid  # restarted


# -- the dask command line -----------------------------------------------------------------


@pytest.fixture
async def processes():
    """Subprocesses the test started; any still running at the end are stopped."""
    started = []
    yield started
    for proc in started:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                await wait(proc.wait())
            except asyncio.TimeoutError:
                proc.kill()
                await wait(proc.wait())


async def start_process(processes, log, *args, env_extra=None):
    env = dict(os.environ)
    env.setdefault("UCX_NET_DEVICES", "lo")  # as conftest: UCX on loopback
    env.update(env_extra or {})
    out = open(log, "wb")
    try:
        proc = await wait(asyncio.create_subprocess_exec(
            *args, stdout=out, stderr=asyncio.subprocess.STDOUT, env=env,
        ))
    finally:
        out.close()
    processes.append(proc)
    return proc


def tail(path, lines=30):
    with open(path, "rb") as f:
        return "\n".join(f.read().decode(errors="replace").splitlines()[-lines:])


async def stop_process(proc, log, timeout=30.0):
    """SIGTERM, then wait; SIGKILL if it does not exit in time. Returns the exit code."""
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return await wait(proc.wait(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await wait(proc.wait(), timeout)
        pytest.fail(f"pid {proc.pid} ignored SIGTERM for {timeout} s:\n{tail(log)}")


@pytest.mark.parametrize("engine_progress", ["auto", "loop"])
async def test_cli_scheduler_and_workers(processes, tmp_path, engine_progress):
    """dask's own commands with the ucxgo protocol, in the progress mode Dask's processes
    choose (auto) and forced into loop mode (where an exit once left UCX unmatched
    messages to warn of: the owner did not drain the unexpected queue before resting)."""
    mode_env = {"UCXGO_PROGRESS_MODE": engine_progress}
    dask_exe = os.path.join(os.path.dirname(sys.executable), "dask")
    if not os.path.exists(dask_exe):
        pytest.skip(f"no dask command beside {sys.executable}")
    # Run by this interpreter, not the one its #! line names: a copied virtualenv's
    # scripts still name the original's, whose ucxx_go may be another build.
    dask_cmd = (sys.executable, dask_exe)
    scheduler_file = tmp_path / "scheduler.json"
    scheduler_log = tmp_path / "scheduler.log"
    scheduler = await start_process(
        processes, scheduler_log, *dask_cmd, "scheduler", "--protocol", "ucxgo", "--host", "127.0.0.1",
        "--port", "0", "--no-dashboard", "--dashboard-address", ":0", "--scheduler-file", str(scheduler_file),
        env_extra=mode_env,
    )

    def scheduler_address():  # a file appearing: nothing to await
        assert scheduler.returncode is None, tail(scheduler_log)
        with contextlib.suppress(FileNotFoundError, json.JSONDecodeError, KeyError):
            return json.loads(scheduler_file.read_text())["address"]

    address = await wait_for_condition(
        scheduler_address,
        lambda: f"the scheduler writing its file (its log ends:\n{tail(scheduler_log)}\n)",
        CLUSTER_STARTUP,
        interval=0.05,
    )
    assert address.startswith("ucxgo://127.0.0.1:")

    worker_logs = [tmp_path / f"worker{i}.log" for i in range(2)]
    workers = [
        await start_process(
            processes, log, *dask_cmd, "worker", address, "--host", "127.0.0.1",
            "--no-dashboard", "--nthreads", "1", "--nworkers", "1", env_extra=mode_env,
        )
        for log in worker_logs
    ]
    async with running(Client(address, asynchronous=True)) as c:
        try:
            await wait(c.wait_for_workers(2), CLUSTER_STARTUP)
        except asyncio.TimeoutError:
            pytest.fail("workers did not join:\n" + "\n".join(tail(log) for log in worker_logs))
        joined = (await wait(c.scheduler.identity()))["workers"]
        assert len(joined) == 2 and all(w.startswith("ucxgo://127.0.0.1:") for w in joined)
        assert await wait(c.submit(lambda x: x + 1, 41), COMPUTE) == 42
        x = da.ones((2000, 2000), chunks=250)
        assert await wait(c.compute((x + x.T).sum()), COMPUTE) == 8_000_000

    for proc, log in zip(workers, worker_logs):
        assert await stop_process(proc, log) == 0, tail(log)
    assert await stop_process(scheduler, scheduler_log) == 0, tail(scheduler_log)
    # Before, each worker's exit logged 12-14 UCX warnings about messages of ours left
    # unmatched ("unexpected tag-receive descriptor").
    for log in [scheduler_log, *worker_logs]:
        warned = [ln for ln in log.read_text(errors="replace").splitlines()
                  if "unexpected tag-receive descriptor" in ln or " UCX  WARN" in ln]
        assert not warned, f"{log.name}: {warned[:5]}"
