"""Channels between ranks: MemoryChannel (direct loads and stores into the peer's
memory), PortChannel (proxy-driven copies), the seed's Channel, SwitchChannel (NVLS).

A channel is one end: it belongs to src_rank and leads to dst_rank, and its ops
run on src_rank. The k-th channel of a type from A to B pairs with the k-th from
B to A: a signal on one is consumed by a wait on the other.
"""

from __future__ import annotations

from ._ir import Op
from .program import get_program
from .rank import _check_loop, _lanes
from .thread_block_group import ThreadBlockGroup  # noqa: F401
from .types import _DEFAULT, BufferType, ChannelType, Chunk, ReduceOperationType, SyncType

__all__ = ["Channel", "MemoryChannel", "PortChannel", "SwitchChannel", "SyncType", "ChannelType", "BufferType",
           "ReduceOperationType", "ThreadBlockGroup", "Chunk"]


class _Channel:
    channel_type = ChannelType.none

    def __init__(self, dst_rank, src_rank):
        prog = get_program()
        prog._check_rank(src_rank, "source rank")
        prog._check_rank(dst_rank, "destination rank")
        if src_rank == dst_rank:
            raise ValueError(f"a channel from rank {src_rank} to itself")
        self.src_rank, self.dst_rank = src_rank, dst_rank
        prog.add_channel(self)

    @classmethod
    def reset(cls):  # MSCCL++'s class-level counters; ours are per program
        return None

    def __repr__(self):
        return f"<{type(self).__name__} {self.channel_id} {self.src_rank}->{self.dst_rank}>"

    # -- checks

    def _src(self, c):
        if not isinstance(c, Chunk):
            raise TypeError(f"{c!r} is not a chunk")
        if c.rank != self.src_rank:
            raise ValueError(f"{c!r}: the channel's ops run on rank {self.src_rank}")

    def _dst(self, c):
        if not isinstance(c, Chunk):
            raise TypeError(f"{c!r} is not a chunk")
        if c.rank != self.dst_rank:
            raise ValueError(f"{c!r}: the channel leads to rank {self.dst_rank}")

    def _add(self, kind, tb, tb_group=None, src=(), dst=(), **kw):
        prog = get_program()
        for t, tbg in _lanes(tb, tb_group):
            prog.add_op(Op(kind, self.src_rank, t, list(src), list(dst), channel=self, tbg=tbg, **kw))

    # -- synchronisation

    def signal(self, tb=None, data_sync=SyncType.both, relaxed=False, sync=_DEFAULT):
        """Add one to the peer's count on the paired channel; a non-relaxed signal on a
        memory channel also publishes this lane's earlier stores into the peer."""
        sync = SyncType.coerce(sync, SyncType.coerce(data_sync, SyncType.both))
        self._add("signal", tb, sync=sync, relaxed=relaxed)

    def wait(self, tb=None, data_sync=SyncType.both, relaxed=False, sync=_DEFAULT):
        """Wait for the peer's next signal on the paired channel."""
        sync = SyncType.coerce(sync, SyncType.coerce(data_sync, SyncType.both))
        self._add("wait", tb, sync=sync, relaxed=relaxed)

    def relaxedSignal(self, tb=None, sync=_DEFAULT):  # noqa: N802 (the seed's name)
        """A signal that orders execution only, not data (rlxsignal)."""
        self.signal(tb, relaxed=True, sync=SyncType.coerce(sync, SyncType.both))

    def relaxedWait(self, tb=None, sync=_DEFAULT):  # noqa: N802
        self.wait(tb, relaxed=True, sync=SyncType.coerce(sync, SyncType.both))

    def flush(self, tb=None, data_sync=SyncType.both, sync=_DEFAULT):
        """Wait until this lane's earlier port puts on the channel have completed."""
        if self.channel_type != ChannelType.port:
            raise ValueError("flush is for port channels")
        sync = SyncType.coerce(sync, SyncType.coerce(data_sync, SyncType.both))
        self._add("flush", tb, sync=sync)

    # -- data

    def put(self, dst_chunk, src_chunk, tb=None, tb_group=None, iter_context=None):
        """dst_chunk (on the peer) = src_chunk (here)."""
        self._put(dst_chunk, src_chunk, tb, tb_group, iter_context)

    def _put(self, dst, src, tb, tb_group, iter_context=None, **kw):
        self._src(src)
        self._dst(dst)
        if dst.size != src.size:
            raise ValueError(f"put of {src.size} chunks into {dst.size}")
        if kw.get("to_packet") and dst.buffer != BufferType.scratch:
            raise ValueError("packets are written to the peer's scratch")
        if kw.get("from_packet") and src.buffer != BufferType.scratch:
            raise ValueError("packets are read from scratch")
        _check_loop(iter_context)
        self._add("put", tb, tb_group, [src], [dst], **kw)

    def put_packets(self, dst_chunk, src_chunk, tb=None, tb_group=None):
        """Store src_chunk as LL packets into the peer's scratch (ppkt)."""
        self._put(dst_chunk, src_chunk, tb, tb_group, to_packet=True)

    def read_put_packets(self, dst_chunk, src_chunk, tb=None, tb_group=None):
        """Forward LL packets from this rank's scratch to the peer's (rppkt)."""
        self._put(dst_chunk, src_chunk, tb, tb_group, to_packet=True, from_packet=True)

    def get(self, dst_chunk, src_chunk, tb=None, tb_group=None, iter_context=None):
        """dst_chunk (here) = src_chunk (on the peer)."""
        if self.channel_type != ChannelType.memory:
            raise ValueError("get is for memory channels")
        self._src(dst_chunk)
        self._dst(src_chunk)
        if dst_chunk.size != src_chunk.size:
            raise ValueError(f"get of {src_chunk.size} chunks into {dst_chunk.size}")
        _check_loop(iter_context)
        self._add("get", tb, tb_group, [src_chunk], [dst_chunk])

    def reduce(self, local_src_chunk, remote_src_chunks, tb=None, tb_group=None, local_dst_chunk=None,
               reduce_op=ReduceOperationType.sum, op=None):
        """local_dst_chunk = local_src_chunk ⊕ the peer's chunks, read remotely (rre)."""
        if self.channel_type != ChannelType.memory:
            raise ValueError("remote reductions are for memory channels")
        if isinstance(remote_src_chunks, Chunk):
            remote_src_chunks = [remote_src_chunks]
        dst = local_src_chunk if local_dst_chunk is None else local_dst_chunk
        self._src(local_src_chunk)
        self._src(dst)
        for c in remote_src_chunks:
            self._dst(c)
            if c.size != local_src_chunk.size:
                raise ValueError(f"reduction of chunks of sizes {local_src_chunk.size} and {c.size}")
        if dst.size != local_src_chunk.size:
            raise ValueError(f"reduction into {dst.size} chunks of {local_src_chunk.size}")
        rop = op if op is not None else reduce_op
        rop = None if rop is None else ReduceOperationType.coerce(rop).value
        self._add("reduce", tb, tb_group, [local_src_chunk] + list(remote_src_chunks), [dst], reduce_op=rop)


class MemoryChannel(_Channel):
    channel_type = ChannelType.memory


class PortChannel(_Channel):
    channel_type = ChannelType.port

    def get(self, *a, **k):
        raise ValueError("get is for memory channels")

    def put(self, dst_chunk, src_chunk, tb=None, tb_group=None, iter_context=None):
        self._put(dst_chunk, src_chunk, tb, tb_group, iter_context)

    def put_with_signal(self, dst_chunk, src_chunk, tb=None):
        """A put, then a signal on the same channel, in order (pws)."""
        self._put(dst_chunk, src_chunk, tb, None, with_signal=True)

    def put_with_signal_and_flush(self, dst_chunk, src_chunk, tb=None):
        """A put, a signal and a flush (pwsf)."""
        self._put(dst_chunk, src_chunk, tb, None, with_signal=True, with_flush=True)


class Channel:
    """The seed's constructor: ``Channel(dst_rank, src_rank, channel_type=Channel.memory)``
    makes a MemoryChannel (or a PortChannel with ``Channel.port``). Every call makes a
    new channel: keep the object to reuse it."""

    memory = ChannelType.memory
    port = ChannelType.port

    def __new__(cls, dst_rank, src_rank, channel_type=ChannelType.memory):
        if isinstance(channel_type, str):
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

    def __init__(self, rank_list, buffer_type):
        prog = get_program()
        for r in rank_list:
            prog._check_rank(r)
        self.ranks = list(rank_list)
        self.buffer_type = buffer_type
        self.channel_ids = {}
        for r in self.ranks:
            self.channel_ids[r] = sum(1 for c in prog.switch_channels if r in c.ranks)
        prog.switch_channels.append(self)

    @classmethod
    def reset(cls):
        return None

    def at_rank(self, rank):
        if rank not in self.ranks:
            raise ValueError(f"rank {rank} is not in the switch channel's group {self.ranks}")
        return _SwitchView(self, rank)

    def reduce(self, rank, buffer_offset, size, dst_chunk, tb=None, reduce_op=ReduceOperationType.sum):
        rop = ReduceOperationType.coerce(reduce_op).value
        get_program().add_op(Op("switch_reduce", rank, tb, dst=[dst_chunk], channel=self, reduce_op=rop,
                                switch_index=buffer_offset, switch_size=size))

    def broadcast(self, rank, src_chunk, buffer_offset, size, tb=None):
        get_program().add_op(Op("switch_broadcast", rank, tb, src=[src_chunk], channel=self,
                                switch_index=buffer_offset, switch_size=size))


class _SwitchView:
    def __init__(self, ch, rank):
        self._ch, self._rank = ch, rank

    def reduce(self, buffer_offset, size, dst_chunk, tb=None, reduce_op=ReduceOperationType.sum):
        self._ch.reduce(self._rank, buffer_offset, size, dst_chunk, tb, reduce_op)

    def broadcast(self, src_chunk, buffer_offset, size, tb=None):
        self._ch.broadcast(self._rank, src_chunk, buffer_offset, size, tb)
