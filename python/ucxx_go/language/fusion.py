"""no_fusion: DSL ops that keep a plan op each.

The compiler fuses consecutive ops of a lane as MSCCL++ does (puts into one put,
a reduction and the puts of its result into res, waits on several channels into
one wait...). Ops recorded inside ``with no_fusion():`` are fused with no
neighbour: each becomes its own op (or ops) in the plan, where a program must
match a given plan op for op, e.g. two waits in a row that the plan keeps apart.
"""

from __future__ import annotations

from .program import get_program

__all__ = ["no_fusion"]


class no_fusion:  # noqa: N801 (used like a function: with no_fusion():)
    """``with no_fusion():`` around DSL calls: their ops are not fused."""

    def __enter__(self):
        self._prog = get_program()
        self._start = len(self._prog.ops)
        return self

    def __exit__(self, *exc):
        for op in self._prog.ops[self._start:]:
            op.fuse = False
