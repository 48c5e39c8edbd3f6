"""Kernel signatures in GrCUDA's NFI and NIDL syntaxes, and the scalar arguments a
call packs: what the DAG checks before anything is scheduled (no GPU needed)."""

import struct

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
    (i32, f32, u8, f64, b) = parse_signature("sint32, float, uint8, double, bool")
    assert i32.slot(-2, 0) == 2**32 - 2  # four bytes of -2, then zeros
    assert f32.slot(1.5, 1) == struct.unpack("<I", struct.pack("<f", 1.5))[0]
    assert f64.slot(-0.25, 2) == struct.unpack("<Q", struct.pack("<d", -0.25))[0]
    assert (u8.slot(255, 3), b.slot(True, 4), b.slot(0, 4)) == (255, 1, 0)
    for param, value in [(i32, 2**31), (u8, -1), (u8, 256), (i32, "seven"), (f32, object())]:
        with pytest.raises(TypeError):
            param.slot(value, 0)
