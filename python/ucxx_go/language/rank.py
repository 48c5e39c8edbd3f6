"""Ranks, buffers and semaphores: what one rank does locally."""

from __future__ import annotations

from ._ir import Op, dsl_call
from .program import get_program
from .thread_block_group import ThreadBlockGroup
from .types import _DEFAULT, BufferType, ChannelType, Chunk, ReduceOperationType, SyncType  # noqa: F401

__all__ = ["BaseBuffer", "Buffer", "Rank", "Semaphore", "ThreadBlockGroup", "SyncType", "BufferType", "ChannelType",
           "ReduceOperationType", "Chunk"]


def _lanes(tb, tb_group):
    """[(tb, tbg)] the op runs on: one lane (pinned or None), or a group's lanes."""
    if tb is not None and tb_group is not None:
        raise ValueError("give tb or tb_group, not both")
    if tb_group is None:
        return [(tb, None)]
    if not isinstance(tb_group, ThreadBlockGroup):
        tb_group = ThreadBlockGroup(tb_group)
    return [(t, (tb_group.get_internal_id(t), tb_group.numtb())) for t in tb_group.tb_list]


def _check_loop(iter_context):
    prog = get_program()
    if iter_context is not None and iter_context is not prog.loop_context:
        raise ValueError("iter_context is not the Loop.iteration the op is issued in")


class BaseBuffer:
    """A rank's buffer; slicing gives chunks: buf[2:4] is chunks 2 and 3."""

    def __init__(self, rank, buffer_type, offset, size):
        self.rank = rank
        self.buffer_type = buffer_type
        self.offset = offset
        self.size = offset + size  # MSCCL++'s convention: the end

    def __len__(self):
        return self.size - self.offset

    @dsl_call
    def __getitem__(self, key):
        if isinstance(key, int) and not isinstance(key, bool):
            key = slice(key, key + 1)
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError(f"index a buffer with a slice of chunks, buf[a:b], not {key!r}")
        n = self.size - self.offset
        start = 0 if key.start is None else key.start
        stop = n if key.stop is None else key.stop
        if not isinstance(start, int) or not isinstance(stop, int):
            raise TypeError(f"chunks {start!r}:{stop!r}: chunk indices are integers")
        if start < 0 or stop <= start or stop > n:
            what = "an empty chunk range" if 0 <= stop <= start else "out of range"
            raise ValueError(f"chunks {start}:{stop} {what}: rank {self.rank}'s {self.buffer_type.name} buffer "
                             f"{'is' if self.offset == 0 else 'here is'} chunks 0:{n}")
        return Chunk(self.rank, self.buffer_type, self.offset + start, stop - start)

    def __iter__(self):  # one chunk at a time (slicing raises ValueError, not IndexError)
        return (Chunk(self.rank, self.buffer_type, i, 1) for i in range(self.offset, self.size))

    def __repr__(self):
        return f"<{self.buffer_type.name} buffer of rank {self.rank}: chunks {self.offset}..{self.size}>"


class Buffer(BaseBuffer):
    """A scratch buffer of `size` chunks on `rank`, allocated after the rank's earlier ones.

    ``Buffer.input``, ``Buffer.output`` and ``Buffer.scratch`` name buffer types.
    """

    input = BufferType.input
    output = BufferType.output
    scratch = BufferType.scratch

    @dsl_call
    def __init__(self, rank, size):
        prog = get_program()
        prog._check_rank(rank)
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"scratch buffer of {size!r} chunks: want at least 1")
        off = prog.alloc_scratch(rank, size)
        super().__init__(rank, BufferType.scratch, off, size)


class Semaphore:
    """A counting semaphore of one rank, for ordering its lanes: ``release`` adds one,
    ``acquire`` waits for a value above zero and takes one.

    ``Semaphore(rank, initial_value)`` (MSCCL++) or ``Rank.Semaphore(rank=, size=)``:
    `size` is the count a producer may run ahead (documentation only: the
    semaphore starts at `initial_value`, 0 by default)."""

    @dsl_call
    def __init__(self, rank, initial_value=0, *, size=None):
        prog = get_program()
        prog._check_rank(rank)
        if initial_value < 0:
            raise ValueError(f"initial_value {initial_value}")
        self.rank = rank
        self.initial_value = initial_value
        self.size = size
        prog.add_semaphore(self)

    @dsl_call
    def acquire(self, tb=None, data_sync=SyncType.both, sync=_DEFAULT):
        sync = SyncType.coerce(sync, SyncType.coerce(data_sync, SyncType.both))
        get_program().add_op(Op("sem_acquire", self.rank, tb, sems=[self], sync=sync))

    @dsl_call
    def release(self, tb=None, data_sync=SyncType.both, sync=_DEFAULT):
        sync = SyncType.coerce(sync, SyncType.coerce(data_sync, SyncType.both))
        get_program().add_op(Op("sem_release", self.rank, tb, sems=[self], sync=sync))

    def __repr__(self):
        return f"<Semaphore {getattr(self, 'id', '?')} of rank {self.rank}>"


class Rank:
    """Rank `rank`'s local operations: copies, reductions, barriers."""

    @dsl_call
    def __init__(self, rank):
        get_program()._check_rank(rank)
        self.rank = rank

    def __eq__(self, other):
        return isinstance(other, Rank) and other.rank == self.rank

    def __hash__(self):
        return hash(self.rank)

    def __repr__(self):
        return f"Rank({self.rank})"

    @staticmethod
    @dsl_call
    def Semaphore(rank, size=None, initial_value=0):  # noqa: N802 (the seed's name)
        rank = rank.rank if isinstance(rank, Rank) else rank
        return Semaphore(rank, initial_value, size=size)

    def get_input_buffer(self):
        return get_program().buffer(self.rank, BufferType.input)

    def get_output_buffer(self):
        return get_program().buffer(self.rank, BufferType.output)

    @dsl_call
    def Buffer(self, size):  # noqa: N802 (the seed's name)
        """A new scratch buffer of `size` chunks on this rank."""
        return Buffer(self.rank, size)

    def _mine(self, *chunks):
        prog = get_program()
        for c in chunks:
            prog.check_chunk(c)
            if c.rank != self.rank:
                raise ValueError(f"{c!r} is on rank {c.rank}, and Rank({self.rank})'s local ops touch only rank "
                                 f"{self.rank}'s chunks (reach a peer's through a channel)")

    def _copy(self, dst, src, tb, tb_group, from_packet=False, to_packet=False, iter_context=None):
        self._mine(dst, src)
        if dst.size != src.size:
            raise ValueError(f"chunk sizes differ: a copy of {src.size} chunks ({src!r}) into {dst.size} "
                             f"({dst!r})")
        if from_packet and src.buffer != BufferType.scratch:
            raise ValueError("packets are read from scratch")
        if to_packet and dst.buffer != BufferType.scratch:
            raise ValueError("packets are written to scratch")
        _check_loop(iter_context)
        prog = get_program()
        for t, tbg in _lanes(tb, tb_group):
            prog.add_op(Op("copy", self.rank, t, [src], [dst], tbg=tbg, from_packet=from_packet,
                           to_packet=to_packet))

    @dsl_call
    def copy(self, dst_chunk, src_chunk, tb=None, tb_group=None, iter_context=None):
        """dst_chunk = src_chunk."""
        self._copy(dst_chunk, src_chunk, tb, tb_group, iter_context=iter_context)

    @dsl_call
    def copy_packets(self, dst_chunk, src_chunk, tb=None, tb_group=None):
        """Pack src_chunk into LL packets in scratch (cpkt)."""
        self._copy(dst_chunk, src_chunk, tb, tb_group, to_packet=True)

    @dsl_call
    def unpack_packets(self, dst_chunk, src_chunk, tb=None, tb_group=None):
        """Unpack the LL packets of a scratch region into dst_chunk (upkt)."""
        self._copy(dst_chunk, src_chunk, tb, tb_group, from_packet=True)

    @dsl_call
    def reduce(self, src_chunk, other_chunks, tb=None, tb_group=None, dst_chunk=None,
               reduce_op=ReduceOperationType.sum, packet=False, op=_DEFAULT, iter_context=None):
        """dst_chunk = src_chunk ⊕ other chunks (dst_chunk defaults to src_chunk).

        reduce_op (or op): "sum" (default), "prod", "min", "max", or None for the
        operator the collective call gives (the plan then names none).

        Both forms work: ``rank.reduce(dst, src, op="sum")`` (dst ⊕= src) and MSCCL++'s
        ``rank.reduce(src, [others], tb=, dst_chunk=, reduce_op=)``. With packet=True the
        other chunks are LL packet regions in scratch (repkt).
        """
        if isinstance(other_chunks, Chunk):
            other_chunks = [other_chunks]
        other_chunks = list(other_chunks)
        dst_chunk = src_chunk if dst_chunk is None else dst_chunk
        rop = reduce_op if op is _DEFAULT else op  # op=None: the call's operator
        rop = None if rop is None else ReduceOperationType.coerce(rop).value
        self._mine(src_chunk, dst_chunk, *other_chunks)
        if not other_chunks:
            raise ValueError("a reduction needs at least one other chunk")
        for c in other_chunks + [dst_chunk]:
            if c.size != src_chunk.size:
                raise ValueError(f"chunk sizes differ: a reduction of {src_chunk.size} chunks ({src_chunk!r}) with "
                                 f"{c.size} ({c!r})")
            if packet and c is not dst_chunk and c.buffer != BufferType.scratch:
                raise ValueError("packet reductions read packets from scratch")
        _check_loop(iter_context)
        prog = get_program()
        for t, tbg in _lanes(tb, tb_group):
            prog.add_op(Op("reduce", self.rank, t, [src_chunk] + other_chunks, [dst_chunk], reduce_op=rop,
                           tbg=tbg, from_packet=packet))

    @dsl_call
    def barrier(self, tb_list=None):
        """Wait until every lane of tb_list has reached this point (one lane: a nop).
        Without tb_list: every lane the rank has at this point of the program."""
        prog = get_program()
        if tb_list is not None:
            tb_list = sorted(set(tb_list))
            if not tb_list:
                raise ValueError("a barrier needs at least one thread block")
            if len(tb_list) == 1:
                prog.add_op(Op("nop", self.rank, tb_list[0]))
                return
        prog.add_op(Op("barrier", self.rank, None, tb_list=tb_list))
