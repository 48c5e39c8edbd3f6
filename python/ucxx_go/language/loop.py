"""Pipelines: the ops issued inside a loop context become, per rank and lane, one
pipeline op that runs them over successive windows of `unit` bytes."""

from __future__ import annotations

from ._ir import caller_where, dsl_call
from .program import get_program

__all__ = ["Loop", "LoopIterationContext"]


class LoopIterationContext:
    """``with LoopIterationContext(unit=2**20, num_chunks=1):`` (MSCCL++), or the
    seed's ``with Loop.iteration(unit=..., num_chunks=...) as it:``. Every data op
    inside must cover `num_chunks` chunks; sync ops run once per window."""

    @dsl_call
    def __init__(self, unit, num_chunks):
        if not isinstance(unit, int) or not isinstance(num_chunks, int) or unit <= 0 or num_chunks <= 0:
            raise ValueError(f"unit {unit!r}, num_chunks {num_chunks!r}: want positive integers (bytes, chunks)")
        if unit > 2**32 - 1:
            raise ValueError(f"unit {unit}: the executor's windows are at most 2**32 - 1 bytes")
        self.unit, self.num_chunks = unit, num_chunks
        self.id = None
        self.where = caller_where()

    @dsl_call
    def __enter__(self):
        prog = get_program()
        prog.set_loop_context(self)
        self.id = prog._loops
        prog._loops += 1
        return self

    def __exit__(self, *exc):
        get_program().set_loop_context(None)


class Loop:
    @staticmethod
    @dsl_call
    def iteration(unit, num_chunks):
        return LoopIterationContext(unit, num_chunks)
