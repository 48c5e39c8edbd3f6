"""Kernel signatures in GrCUDA's NFI and NIDL syntaxes, and the scalar arguments a
call packs: what the DAG checks before anything is scheduled (no GPU needed)."""

import pytest

from ucxx_go._kernels import READ, WRITE, parse_signature


def test_nfi_signature():
    p = parse_signature("pointer, const pointer, sint32, float, uint64")
    assert [(x.pointer, x.access) for x in p[:2]] == [(True, WRITE), (True, READ)]
    assert [x.fmt for x in p[2:]] == ["i", "f", "Q"]


def test_nidl_signature():
    p = parse_signature("y: out pointer float, x: in pointer float, z: inout pointer double, n: sint32")
    assert [(x.name, x.pointer, x.access) for x in p[:3]] == [("y", True, WRITE), ("x", True, READ), ("z", True, WRITE)]
    assert (p[3].name, p[3].fmt) == ("n", "i")
    assert parse_signature("") == []


@pytest.mark.parametrize("bad", ["pointer, widget", "x: in float", "x: in pointer widget", "const", "x: y: z"])
def test_bad_signatures(bad):
    with pytest.raises(ValueError):
        parse_signature(bad)


def test_scalar_packing():
    (i32, f32, u8) = parse_signature("sint32, float, uint8")
    assert i32.pack(-2, 0) == (-2).to_bytes(4, "little", signed=True) + b"\0" * 4
    assert len(f32.pack(1.5, 1)) == 8
    for param, value in [(i32, 2**31), (u8, -1), (u8, 256), (i32, "seven"), (f32, object())]:
        with pytest.raises(TypeError):
            param.pack(value, 0)
