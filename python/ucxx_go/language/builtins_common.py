"""What the built-in programs share: their options, the peer order of all-pairs
ranks, and the wiring of memory channels to lanes with the start-of-call handshake.

The built-ins (builtins_allpairs, builtins_ring, builtins_tree) are DSL programs
that pin every op to a thread block (``tb=``): they say which lane does what, in
which order, as core/builtin's Go generators do, so that both give the same plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from .channel import MemoryChannel
from .rank import Rank
from .types import SyncType

__all__ = ["MAX_OP_CHANNELS", "MAX_PEERS_PER_LANE", "Options", "Wiring", "groups", "nop", "peer_of", "slot",
           "wait_all", "signal_all"]

MAX_PEERS_PER_LANE = 8  # channels per op in MSCCL++ 0.9, and 16 remote buffers per lane: two per peer
MAX_OP_CHANNELS = 8  # channel_ids of one signal or wait op


@dataclass(frozen=True)
class Options:
    """A built-in's parameters (core/builtin's Options): the defaults are one lane, one
    chunk per lane, root 0, 8 peers per lane, byte alignment, out of place.

    lanes: independent lanes (thread blocks) sharing the data. chunks: pipeline depth
    of the ring, chains and trees (each lane's part cut into that many pieces).
    root: the root of broadcast and reduce. peers_per_lane: the most peers one lane of
    an all-pairs algorithm talks to (1..8). alignment: the plan's buffer_alignment."""

    inplace: bool = False
    lanes: int = 1
    chunks: int = 1
    root: int = 0
    peers_per_lane: int = MAX_PEERS_PER_LANE
    alignment: int = 1

    def checked(self, n):
        """The options, or ValueError naming the first one out of range for n ranks."""
        if n < 2:
            raise ValueError(f"{n} ranks: the built-ins need 2 or more (one rank is the caller's copy)")
        for what, v, lo, hi in (("lanes", self.lanes, 1, None), ("chunks", self.chunks, 1, None),
                                ("peers_per_lane", self.peers_per_lane, 1, MAX_PEERS_PER_LANE),
                                ("alignment", self.alignment, 1, None), ("root", self.root, 0, n - 1)):
            if not isinstance(v, int) or v < lo or (hi is not None and v > hi):
                raise ValueError(f"{what} {v!r}: want {lo}..{hi if hi is not None else ''}")
        return self


def groups(n, g):
    """How many groups of at most g peers the n-1 peers of a rank make."""
    return (n - 1 + g - 1) // g


def slot(src, dst, n):
    """Where rank src stands among rank dst's peers (dst+1, dst+2, ... mod n): also the
    scratch slot on dst that data from src lands in."""
    return (src - dst + n) % n - 1


def peer_of(r, i, n):
    """Rank r's peer number i (its peers in the order r+1, r+2, ... mod n)."""
    return (r + 1 + i) % n


def nop(rank, tb):
    """A thread-block-wide sync on one lane: every thread is past what came before."""
    Rank(rank).barrier(tb_list=[tb])


def signal_all(chans, tb, relaxed=False, data_sync=SyncType.none):
    """Signal each channel in order, as one op per 8 channels (the compiler fuses them);
    data_sync applies before the first."""
    for i, ch in enumerate(chans):
        ch.signal(tb, relaxed=relaxed, data_sync=data_sync if i == 0 else SyncType.none)


def wait_all(chans, tb, relaxed=False, data_sync=SyncType.none):
    """Wait on each channel in order, as one op per 8 channels; data_sync applies after
    the last."""
    for i, ch in enumerate(chans):
        ch.wait(tb, relaxed=relaxed, data_sync=data_sync if i == len(chans) - 1 else SyncType.none)


class Wiring:
    """The memory channels of a program, made in pairs, each end owned by one lane.

    ``connect(a, ta, b, tb)`` makes the channel from rank a's lane ta to rank b's lane
    tb and its pair back: a's k-th channel to b pairs with b's k-th to a, so making
    both ends at once keeps the pairs. Each lane keeps its ends in the order they
    were made; ``handshake()`` then starts every lane with a relaxed signal on each of
    them, relaxed waits on all, and a nop: once a lane is through, the peer at the
    other end of each of its channels has entered this call (and so finished the
    previous one), so no store of this call lands in a buffer still in use."""

    def __init__(self):
        self.ends = {}  # (rank, tb) -> [MemoryChannel], in the order made

    def connect(self, a, ta, b, tb):
        """(a's end, b's end) of a new channel pair between lane ta of rank a and lane tb
        of rank b."""
        ca, cb = MemoryChannel(b, a), MemoryChannel(a, b)
        self.ends.setdefault((a, ta), []).append(ca)
        self.ends.setdefault((b, tb), []).append(cb)
        return ca, cb

    def handshake(self):
        """Issue every lane's start-of-call handshake (before its other ops)."""
        for (_, tb), chans in sorted(self.ends.items()):
            signal_all(chans, tb, relaxed=True)
            wait_all(chans, tb, relaxed=True, data_sync=SyncType.after)
