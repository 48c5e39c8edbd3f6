"""Module-level API: versions, info, tags, exceptions."""

import pytest

import ucxx_go
from ucxx_go import _tags


def test_ucx_version_needs_no_init():
    v = ucxx_go.get_ucx_version()
    assert isinstance(v, tuple) and len(v) == 3 and v >= (1, 15, 0)


def test_info_reports_no_gpu_quietly():
    info = ucxx_go.info()
    assert info["progress_mode"] == "thread"
    assert info["delayed_submission"] is True
    assert isinstance(info["gpus"], list)


def test_tags_are_deterministic_and_distinct():
    base = 0x1234_5678 << 32  # an endpoint's receive tag: its id, low bits 0 (core/tags.go)
    assert _tags.mix(base, None, False) == base
    assert _tags.mix(base, "frames", False) == _tags.mix(base, "frames", False)
    distinct = {_tags.mix(base, t, False) for t in [0, 1, -1, "0", b"0", (0,), "frames", ("a", 1)]}
    assert len(distinct) == 8 and base not in distinct
    # A user tag keeps the endpoint's id, so the engine knows whose message it is.
    assert all(t >> 32 == base >> 32 for t in distinct)
    assert _tags.mix(base, 42, True) == 42
    with pytest.raises(ValueError):
        _tags.mix(base, 1 << 64, True)
    with pytest.raises(TypeError):
        _tags.mix(base, 1.5, False)


def test_exception_family():
    from ucxx_go import exceptions as ex

    for name in ex.__all__:
        obj = getattr(ex, name)
        if isinstance(obj, type):
            assert issubclass(obj, ex.UCXError)
    assert ex.UCXCanceled is ex.UCXCanceledError
    assert ex.UCXMsgTruncated is ex.UCXMessageTruncatedError
    e = ex.exception_for_status(-25, "Endpoint.recv")
    assert isinstance(e, ex.UCXConnectionResetError) and e.status == -25 and "Endpoint.recv" in str(e)
    assert isinstance(ex.exception_for_status(-45), ex.UCXFirstLinkFailureError)
    assert type(ex.exception_for_status(-99)) is ex.UCXError
    # ExceedsLimit comes from our bounds: the text names the settings that move them.
    e = ex.exception_for_status(-21, "Endpoint.recv")
    assert isinstance(e, ex.UCXExceedsLimitError) and "UCXGO_MAX_UNEXPECTED_BYTES" in str(e)


def test_listener_needs_callable():
    with pytest.raises(TypeError):
        ucxx_go.create_listener(42)


def test_listener_port_in_use():
    a = ucxx_go.create_listener(lambda ep: None)
    try:
        with pytest.raises(ucxx_go.UCXError):
            ucxx_go.create_listener(lambda ep: None, port=a.port)
    finally:
        a.close()


def test_ucp_context_and_worker_info():
    assert "UCP context" in ucxx_go.get_ucp_context_info()
    assert "UCP worker" in ucxx_go.get_ucp_worker_info()


def test_config_reflects_options():
    ucxx_go.init(options={"TLS": "tcp,self"})
    assert ucxx_go.get_config()["TLS"] == "tcp,self"
