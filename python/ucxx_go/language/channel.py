"""Channels between ranks: MemoryChannel (direct loads and stores into the peer's
memory), PortChannel (proxy-driven copies), the seed's Channel, SwitchChannel (NVLS).

A channel is one end: it belongs to src_rank and leads to dst_rank, and its ops
run on src_rank. The k-th channel of a type from A to B pairs with the k-th from
B to A: a signal on one is consumed by a wait on the other.
"""

from __future__ import annotations

from ._ir import Op, caller_where, dsl_call
from .program import get_program
from .rank import _check_loop, _lanes
from .thread_block_group import ThreadBlockGroup  # noqa: F401
from .types import _DEFAULT, BufferType, ChannelType, Chunk, ReduceOperationType, SyncType

__all__ = ["Channel", "MemoryChannel", "PortChannel", "SwitchChannel", "SyncType", "ChannelType", "BufferType",
           "ReduceOperationType", "ThreadBlockGroup", "Chunk"]


class _Channel:
    channel_type = ChannelType.none

    @dsl_call
    def __init__(self, dst_rank, src_rank):
        prog = get_program()
        prog._check_rank(src_rank, "source rank")
        prog._check_rank(dst_rank, "destination rank")
        if src_rank == dst_rank:
            raise ValueError(f"a channel from rank {src_rank} to itself: a rank's own chunks need no channel")
        self.src_rank, self.dst_rank = src_rank, dst_rank
        self.where = caller_where()
        prog.add_channel(self)

    @classmethod
    def reset(cls):  # MSCCL++'s class-level counters; ours are per program
        return None

    def __repr__(self):
        return f"<{type(self).__name__} {self.channel_id} {self.src_rank}->{self.dst_rank}>"

    # -- checks

    def _ends(self):
        return (f"{type(self).__name__}({self.dst_rank}, {self.src_rank}) runs on rank {self.src_rank} and leads "
                f"to rank {self.dst_rank}")

    def _src(self, c, what="local chunk"):
        get_program().check_chunk(c, what)
        if c.rank != self.src_rank:
            raise ValueError(f"wrong direction: the {what} {c!r} is on rank {c.rank}, and {self._ends()}"
                             + (f" (the channel the other way is {type(self).__name__}({self.src_rank}, "
                                f"{self.dst_rank}))" if c.rank == self.dst_rank else ""))

    def _dst(self, c, what="remote chunk"):
        get_program().check_chunk(c, what)
        if c.rank != self.dst_rank:
            raise ValueError(f"wrong direction: the {what} {c!r} is on rank {c.rank}, and {self._ends()}"
                             + (f" (the channel the other way is {type(self).__name__}({self.src_rank}, "
                                f"{self.dst_rank}))" if c.rank == self.src_rank else ""))

    def _add(self, kind, tb, tb_group=None, src=(), dst=(), **kw):
        prog = get_program()
        for t, tbg in _lanes(tb, tb_group):
            prog.add_op(Op(kind, self.src_rank, t, list(src), list(dst), channel=self, tbg=tbg, **kw))

    # -- synchronisation

    @dsl_call
    def signal(self, tb=None, data_sync=SyncType.both, relaxed=False, sync=_DEFAULT):
        """Add one to the peer's count on the paired channel; a non-relaxed signal on a
        memory channel also publishes this lane's earlier stores into the peer."""
        sync = SyncType.coerce(sync, SyncType.coerce(data_sync, SyncType.both))
        self._add("signal", tb, sync=sync, relaxed=relaxed)

    @dsl_call
    def wait(self, tb=None, data_sync=SyncType.both, relaxed=False, sync=_DEFAULT):
        """Wait for the peer's next signal on the paired channel."""
        sync = SyncType.coerce(sync, SyncType.coerce(data_sync, SyncType.both))
        self._add("wait", tb, sync=sync, relaxed=relaxed)

    @dsl_call
    def relaxedSignal(self, tb=None, sync=_DEFAULT):  # noqa: N802 (the seed's name)
        """A signal that orders execution only, not data (rlxsignal)."""
        self.signal(tb, relaxed=True, sync=SyncType.coerce(sync, SyncType.both))

    @dsl_call
    def relaxedWait(self, tb=None, sync=_DEFAULT):  # noqa: N802
        self.wait(tb, relaxed=True, sync=SyncType.coerce(sync, SyncType.both))

    @dsl_call
    def flush(self, tb=None, data_sync=SyncType.both, sync=_DEFAULT):
        """Wait until this lane's earlier port puts on the channel have completed."""
        if self.channel_type != ChannelType.port:
            raise ValueError("the executor runs flush only on port channels (memory channels' stores need none)")
        sync = SyncType.coerce(sync, SyncType.coerce(data_sync, SyncType.both))
        self._add("flush", tb, sync=sync)

    # -- data

    @dsl_call
    def put(self, dst_chunk, src_chunk, tb=None, tb_group=None, iter_context=None):
        """dst_chunk (on the peer) = src_chunk (here)."""
        self._put(dst_chunk, src_chunk, tb, tb_group, iter_context)

    def _put(self, dst, src, tb, tb_group, iter_context=None, **kw):
        self._src(src, "source chunk")
        self._dst(dst, "destination chunk")
        if dst.size != src.size:
            raise ValueError(f"chunk sizes differ: a put of {src.size} chunks ({src!r}) into {dst.size} ({dst!r})")
        if kw.get("to_packet") and dst.buffer != BufferType.scratch:
            raise ValueError(f"packets are written to the peer's scratch, not to {dst!r}")
        if (kw.get("from_packet") or (kw.get("to_packet") and self.channel_type == ChannelType.port)) \
                and src.buffer != BufferType.scratch:
            raise ValueError(f"packets are read from scratch, not from {src!r}"
                             + (" (a port channel sends packets that copy_packets wrote there)"
                                if not kw.get("from_packet") else ""))
        _check_loop(iter_context)
        self._add("put", tb, tb_group, [src], [dst], **kw)

    @dsl_call
    def put_packets(self, dst_chunk, src_chunk, tb=None, tb_group=None):
        """Store src_chunk as LL packets into the peer's scratch (ppkt)."""
        self._put(dst_chunk, src_chunk, tb, tb_group, to_packet=True)

    @dsl_call
    def read_put_packets(self, dst_chunk, src_chunk, tb=None, tb_group=None):
        """Forward LL packets from this rank's scratch to the peer's (rppkt)."""
        self._put(dst_chunk, src_chunk, tb, tb_group, to_packet=True, from_packet=True)

    @dsl_call
    def get(self, dst_chunk, src_chunk, tb=None, tb_group=None, iter_context=None):
        """dst_chunk (here) = src_chunk (on the peer)."""
        if self.channel_type != ChannelType.memory:
            raise ValueError("the executor runs get only on memory channels")
        self._src(dst_chunk, "destination chunk")
        self._dst(src_chunk, "source chunk")
        if dst_chunk.size != src_chunk.size:
            raise ValueError(f"chunk sizes differ: a get of {src_chunk.size} chunks ({src_chunk!r}) into "
                             f"{dst_chunk.size} ({dst_chunk!r})")
        _check_loop(iter_context)
        self._add("get", tb, tb_group, [src_chunk], [dst_chunk])

    @dsl_call
    def reduce(self, local_src_chunk, remote_src_chunks, tb=None, tb_group=None, local_dst_chunk=None,
               reduce_op=ReduceOperationType.sum, op=_DEFAULT):
        """local_dst_chunk = local_src_chunk ⊕ the peer's chunks, read remotely (rre)."""
        if self.channel_type != ChannelType.memory:
            raise ValueError("the executor runs remote reductions only on memory channels")
        if isinstance(remote_src_chunks, Chunk):
            remote_src_chunks = [remote_src_chunks]
        dst = local_src_chunk if local_dst_chunk is None else local_dst_chunk
        self._src(local_src_chunk)
        self._src(dst)
        if not remote_src_chunks:
            raise ValueError("a remote reduction needs at least one remote chunk")
        for c in remote_src_chunks:
            self._dst(c)
            if c.size != local_src_chunk.size:
                raise ValueError(f"chunk sizes differ: a reduction of {local_src_chunk.size} chunks "
                                 f"({local_src_chunk!r}) with {c.size} ({c!r})")
        if dst.size != local_src_chunk.size:
            raise ValueError(f"chunk sizes differ: a reduction of {local_src_chunk.size} chunks "
                             f"({local_src_chunk!r}) into {dst.size} ({dst!r})")
        rop = reduce_op if op is _DEFAULT else op  # op=None: the call's operator
        rop = None if rop is None else ReduceOperationType.coerce(rop).value
        self._add("reduce", tb, tb_group, [local_src_chunk] + list(remote_src_chunks), [dst], reduce_op=rop)


class MemoryChannel(_Channel):
    channel_type = ChannelType.memory

    @dsl_call
    def put_with_signal(self, *a, **k):
        raise ValueError("the executor runs put_with_signal only on port channels (on a memory channel: put, "
                         "then signal)")

    @dsl_call
    def put_with_signal_and_flush(self, *a, **k):
        raise ValueError("the executor runs put_with_signal_and_flush only on port channels (on a memory channel: "
                         "put, then signal)")


class PortChannel(_Channel):
    channel_type = ChannelType.port

    @dsl_call
    def get(self, *a, **k):
        raise ValueError("the executor runs get only on memory channels")

    @dsl_call
    def put(self, dst_chunk, src_chunk, tb=None, tb_group=None, iter_context=None):
        self._put(dst_chunk, src_chunk, tb, tb_group, iter_context)

    @dsl_call
    def put_with_signal(self, dst_chunk, src_chunk, tb=None):
        """A put, then a signal on the same channel, in order (pws)."""
        self._put(dst_chunk, src_chunk, tb, None, with_signal=True)

    @dsl_call
    def put_with_signal_and_flush(self, dst_chunk, src_chunk, tb=None):
        """A put, a signal and a flush (pwsf)."""
        self._put(dst_chunk, src_chunk, tb, None, with_signal=True, with_flush=True)


class Channel:
    """The seed's constructor: ``Channel(dst_rank, src_rank, channel_type=Channel.memory)``
    makes a MemoryChannel (or a PortChannel with ``Channel.port``). Every call makes a
    new channel: keep the object to reuse it."""

    memory = ChannelType.memory
    port = ChannelType.port

    @dsl_call
    def __new__(cls, dst_rank, src_rank, channel_type=ChannelType.memory):
        if isinstance(channel_type, str):
            if channel_type not in ChannelType.__members__:
                raise ValueError(f"channel type {channel_type!r}: memory or port")
            channel_type = ChannelType(channel_type)
        if channel_type == ChannelType.memory:
            return MemoryChannel(dst_rank, src_rank)
        if channel_type == ChannelType.port:
            return PortChannel(dst_rank, src_rank)
        raise ValueError(f"channel type {channel_type}: memory or port (SwitchChannel for switch)")


class SwitchChannel:
    """NVLS multimem over a group of ranks' buffers of one type (glres when a reduce is
    followed by a broadcast of its result)."""

    channel_type = ChannelType.switch

    @dsl_call
    def __init__(self, rank_list, buffer_type=None, *, buffer=None):
        if (buffer_type is None) == (buffer is None):
            raise ValueError("give the group's buffer type once: SwitchChannel(rank_list, buffer_type) or the "
                             "seed's SwitchChannel(rank_list=, buffer=)")
        buffer_type = buffer if buffer_type is None else buffer_type
        prog = get_program()
        for r in rank_list:
            prog._check_rank(r)
        if len(set(rank_list)) != len(rank_list) or len(rank_list) < 2:
            raise ValueError(f"a switch channel's group {list(rank_list)}: want two or more distinct ranks")
        if not isinstance(buffer_type, BufferType):
            raise ValueError(f"buffer type {buffer_type!r}: want one of BufferType.input, output, scratch")
        self.ranks = list(rank_list)
        self.buffer_type = buffer_type
        self.channel_ids = {}
        for r in self.ranks:
            self.channel_ids[r] = sum(1 for c in prog.switch_channels if r in c.ranks)
        prog.switch_channels.append(self)

    @classmethod
    def reset(cls):
        return None

    @dsl_call
    def at_rank(self, rank):
        self._member(rank)
        return _SwitchView(self, rank)

    def _member(self, rank):
        if rank not in self.ranks:
            raise ValueError(f"rank {rank!r} is not in the switch channel's group {self.ranks}")

    def _group_range(self, buffer_offset, size, chunk):
        prog = get_program()
        if not isinstance(buffer_offset, int) or not isinstance(size, int) or buffer_offset < 0 or size < 1:
            raise ValueError(f"buffer_offset {buffer_offset!r} and size {size!r}: want integers, size at least 1")
        for r in self.ranks:
            if self.buffer_type == BufferType.scratch and r != chunk.rank:
                # a peer may allocate its scratch later in the program (the seed's loop
                # over ranks): its range is checked once the program is complete
                prog.switch_range_checks.append((caller_where(), r, buffer_offset + size, buffer_offset))
                continue
            have = prog.chunk_count(r, self.buffer_type)
            if buffer_offset + size > have:
                raise ValueError(f"chunks {buffer_offset}:{buffer_offset + size} of the group's "
                                 f"{self.buffer_type.name} buffers out of range: rank {r}'s has {have}")
        prog.check_chunk(chunk)
        if chunk.size != size:
            raise ValueError(f"chunk sizes differ: {size} chunks of the group's buffers and {chunk!r}")

    @dsl_call
    def reduce(self, rank, buffer_offset, size, dst_chunk, tb=None, reduce_op=ReduceOperationType.sum):
        self._member(rank)
        self._group_range(buffer_offset, size, dst_chunk)
        if dst_chunk.rank != rank:
            raise ValueError(f"{dst_chunk!r} is on rank {dst_chunk.rank}: the reduce runs on rank {rank}")
        rop = ReduceOperationType.coerce(reduce_op).value
        get_program().add_op(Op("switch_reduce", rank, tb, dst=[dst_chunk], channel=self, reduce_op=rop,
                                switch_index=buffer_offset, switch_size=size))

    @dsl_call
    def broadcast(self, rank, src_chunk, buffer_offset, size, tb=None):
        self._member(rank)
        self._group_range(buffer_offset, size, src_chunk)
        if src_chunk.rank != rank:
            raise ValueError(f"{src_chunk!r} is on rank {src_chunk.rank}: the broadcast runs on rank {rank}")
        get_program().add_op(Op("switch_broadcast", rank, tb, src=[src_chunk], channel=self,
                                switch_index=buffer_offset, switch_size=size))

    # -- the seed's spelling: the group's chunks are reduced and stored back, with no
    # chunk of the rank's own in between (what glres does)

    def _seed_rank(self, rank, what):
        """The rank a group op runs on: `rank`, or the rank of the program's previous op
        (the seed calls group ops inside a loop over ranks, after that rank's ops)."""
        if rank is None:
            ops = get_program().ops
            if not ops:
                raise ValueError(f"{what} without rank=: it runs on the rank of the program's previous op, and "
                                 "there is none")
            rank = ops[-1].rank
            if rank not in self.ranks:
                raise ValueError(f"{what} without rank=: it runs on the rank of the program's previous op, rank "
                                 f"{rank}, which is not in the switch channel's group {self.ranks} (pass rank=)")
        self._member(rank)
        return rank

    @dsl_call
    def group_load_reduce(self, buffer_offset, size, op=ReduceOperationType.sum, tb=None, iter_context=None,
                          rank=None):
        """Reduce chunks buffer_offset:buffer_offset+size of every group member's buffer;
        group_store must follow on the same lane, and stores the result (together: glres).
        Runs on `rank`, or on the rank of the program's previous op."""
        rank = self._seed_rank(rank, "group_load_reduce")
        _check_loop(iter_context)
        self._group_range(buffer_offset, size, Chunk(rank, self.buffer_type, buffer_offset, size))
        self.reduce(rank, buffer_offset, size, Chunk(rank, self.buffer_type, buffer_offset, size), tb, op)

    @dsl_call
    def group_store(self, buffer_offset, size, tb=None, iter_context=None, rank=None):
        """Store what the group_load_reduce before it on the lane reduced into chunks
        buffer_offset:buffer_offset+size of every group member's buffer."""
        rank = self._seed_rank(rank, "group_store")
        _check_loop(iter_context)
        pending = [o for (r, t), o in get_program()._switch_pending.items()
                   if r == rank and o.channel is self and (t is None or tb is None or t == tb)]
        if not pending:
            raise ValueError(f"group_store on rank {rank}: no group_load_reduce of this switch channel before it on "
                             "its lane (the executor stores only what a switch reduce just loaded: glres)")
        self.broadcast(rank, pending[0].dst[0], buffer_offset, size, tb)


class _SwitchView:
    def __init__(self, ch, rank):
        self._ch, self._rank = ch, rank

    def reduce(self, buffer_offset, size, dst_chunk, tb=None, reduce_op=ReduceOperationType.sum):
        self._ch.reduce(self._rank, buffer_offset, size, dst_chunk, tb, reduce_op)

    def broadcast(self, src_chunk, buffer_offset, size, tb=None):
        self._ch.broadcast(self._rank, src_chunk, buffer_offset, size, tb)
