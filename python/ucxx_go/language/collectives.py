"""Collective descriptors: how many chunks each rank's input and output buffers
have, and what the output must hold when the program ends (the checker's
specification, ucxx_go.language.checker)."""

from __future__ import annotations

from ._ir import dsl_call
from .types import BufferType

__all__ = ["AllGather", "AllReduce", "AllToAll", "AllToAllV", "Broadcast", "Collective", "Reduce", "ReduceScatter",
           "TestCollective"]


class Collective:
    """A collective of `num_ranks` ranks; `chunk_factor` scales the chunk counts."""

    name = "custom"

    @dsl_call(records=False)
    def __init__(self, num_ranks, chunk_factor, inplace):
        if not isinstance(num_ranks, int) or num_ranks < 1:
            raise ValueError(f"num_ranks {num_ranks!r}: want at least 1")
        if not isinstance(chunk_factor, int) or chunk_factor < 0:
            raise ValueError(f"chunk_factor {chunk_factor!r}: want an integer, at least 0")
        self.num_ranks = num_ranks
        self.chunk_factor = chunk_factor
        self.inplace = inplace

    def chunk_counts(self):
        """(input chunks, output chunks) of every rank."""
        c = self.chunk_factor
        return c, c

    def init_buffers(self):
        from .rank import BaseBuffer

        ic, oc = self.chunk_counts()
        return [{BufferType.input: BaseBuffer(r, BufferType.input, 0, ic),
                 BufferType.output: BaseBuffer(r, BufferType.output, 0, oc)} for r in range(self.num_ranks)]

    def check(self, prog):  # MSCCL++'s hook; the checker does the work
        return True

    def plan_fields(self):
        """Top-level plan keys of our extensions that the collective needs (none)."""
        return {}


class TestCollective(Collective):
    """Buffers of the given sizes and no specification of the result."""

    name = "test"

    @dsl_call(records=False)
    def __init__(self, num_ranks, input_size, output_size):
        super().__init__(num_ranks, 1, False)
        for what, v in (("input_size", input_size), ("output_size", output_size)):
            if not isinstance(v, int) or v < 0:
                raise ValueError(f"{what} {v!r}: want a number of chunks, at least 0")
        self.input_size, self.output_size = input_size, output_size

    def chunk_counts(self):
        return self.input_size, self.output_size


class AllGather(Collective):
    """Each rank's input (chunk_factor chunks) lands at block `rank` of every output."""

    name = "allgather"

    def chunk_counts(self):
        return self.chunk_factor, self.num_ranks * self.chunk_factor


class AllReduce(Collective):
    """Every rank's output chunk k is the reduction of all ranks' input chunk k."""

    name = "allreduce"

    def chunk_counts(self):
        return self.num_ranks * self.chunk_factor, self.num_ranks * self.chunk_factor


class ReduceScatter(Collective):
    """Rank r's output is the reduction of all ranks' input block r."""

    name = "reducescatter"

    def chunk_counts(self):
        return self.num_ranks * self.chunk_factor, self.chunk_factor


class AllToAll(Collective):
    """Block j of rank i's input lands at block i of rank j's output."""

    name = "alltoall"

    def chunk_counts(self):
        return self.num_ranks * self.chunk_factor, self.num_ranks * self.chunk_factor


class AllToAllV(AllToAll):
    """Alltoall with block sizes every call gives (alltoallv): chunk j of each rank's
    input and output is block j, of the call's size and offset (docs/plan-format.md
    section 14). The plan says so ("ucxxgo_variable_blocks"); out of place, one chunk
    per block, and every reference one whole block."""

    name = "alltoallv"

    def __init__(self, num_ranks):
        super().__init__(num_ranks, 1, False)

    def plan_fields(self):
        return {"ucxxgo_variable_blocks": True}


class _Rooted(Collective):
    """A collective with a root rank; in place, the input is the output."""

    @dsl_call(records=False)
    def __init__(self, num_ranks, chunk_factor, inplace, root=0):
        super().__init__(num_ranks, chunk_factor, inplace)
        if not isinstance(root, int) or not 0 <= root < num_ranks:
            raise ValueError(f"root {root!r} out of range: the collective has {num_ranks} ranks")
        self.root = root


class Broadcast(_Rooted):
    """Every rank's output is the root's input (chunk_factor chunks)."""

    name = "broadcast"


class Reduce(_Rooted):
    """The root's output chunk k is the reduction of every rank's input chunk k; other
    ranks' outputs are left as they were."""

    name = "reduce"
