"""One-sided transfers are off unless the process turns them on (init(one_sided=True) or
UCXGO_ONE_SIDED=1): with them on, UCX serves the puts and gets it emulates in software
at any address a peer names (README, "What UCX itself trusts"). Off, every one-sided
operation raises UCXUnsupportedError, saying how to turn them on, and the rest works."""

import numpy as np
import pytest

import ucxx_go


@pytest.fixture
def off(monkeypatch):
    monkeypatch.delenv("UCXGO_ONE_SIDED", raising=False)


def refused(excinfo):
    return "one-sided transfers are off" in str(excinfo.value) and "one_sided=True" in str(excinfo.value)


async def test_off_by_default(off, pair):
    client, srv = pair
    buf = np.zeros(64, dtype="u1")
    region = ucxx_go.register(buf)  # registering for the process's own use stays
    with pytest.raises(ucxx_go.exceptions.UCXUnsupportedError) as e:
        region.pack()
    assert refused(e)
    with pytest.raises(ucxx_go.exceptions.UCXUnsupportedError) as e:
        client.unpack_remote(b"\0" * 64)
    assert refused(e)
    with pytest.raises(ucxx_go.exceptions.UCXUnsupportedError) as e:
        srv.semaphore()
    assert refused(e)
    # The connection itself is untouched.
    msg = np.arange(16, dtype="u1")
    got = np.empty_like(msg)
    await client.send(msg)
    await srv.recv(got)
    assert (got == msg).all()
    # Peers' one-sided rendezvous is dropped too (the RMA guard; its GPU test is Go's
    # TestPeersCannotStartOneSidedRendezvous).
    assert ucxx_go.info()["rma_guard"] is True


@pytest.mark.parametrize("how", ["init", "env"])
async def test_turned_on(off, monkeypatch, server, how):
    if how == "init":
        ucxx_go.init(one_sided=True)
    else:
        monkeypatch.setenv("UCXGO_ONE_SIDED", "1")
    client, srv = await server.connect()
    try:
        target = np.zeros(64, dtype="u1")
        remote = client.unpack_remote(ucxx_go.register(target).pack())
        await client.put(np.full(64, 7, dtype="u1"), remote)
        await client.flush()
        assert (target == 7).all()
    finally:
        client.abort()


@pytest.mark.parametrize("value", ["0", "n", "off", ""])
def test_env_off_values(monkeypatch, value):
    monkeypatch.setenv("UCXGO_ONE_SIDED", value)
    with pytest.raises(ucxx_go.exceptions.UCXUnsupportedError):
        ucxx_go.register(np.zeros(8, dtype="u1")).pack()


@pytest.mark.parametrize("value", ["none", "disable", "2"])
def test_env_unknown_value_is_refused(monkeypatch, value):
    """A misspelt value neither turns one-sided transfers on nor passes in silence."""
    monkeypatch.setenv("UCXGO_ONE_SIDED", value)
    with pytest.raises(ValueError, match="UCXGO_ONE_SIDED"):
        ucxx_go.init()
