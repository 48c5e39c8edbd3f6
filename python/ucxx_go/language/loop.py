"""Pipelines: the ops issued inside a loop context become, per rank and lane, one
pipeline op that runs them over successive windows of `unit` bytes."""

from __future__ import annotations

from .program import get_program

__all__ = ["Loop", "LoopIterationContext"]


class LoopIterationContext:
    """``with LoopIterationContext(unit=2**20, num_chunks=1):`` (MSCCL++), or the
    seed's ``with Loop.iteration(unit=..., num_chunks=...) as it:``. Every data op
    inside must cover `num_chunks` chunks; sync ops run once per window."""

    def __init__(self, unit, num_chunks):
        if unit <= 0 or num_chunks <= 0:
            raise ValueError(f"unit {unit}, num_chunks {num_chunks}")
        self.unit, self.num_chunks = unit, num_chunks
        self.id = None

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
    def iteration(unit, num_chunks):
        return LoopIterationContext(unit, num_chunks)
