"""Built-in collectives written in the language, as plan JSON.

    from ucxx_go.language import builtins
    text = builtins.allreduce_ring(4)                # a checked MSCCL++ 0.9 plan
    plan = ucxx_go.ExecutionPlan.from_json(text)
    await comm.execute(plan, x)

Every function takes the number of ranks and returns the plan's JSON text, checked
by the checker (the result is the collective's, no race, no deadlock) before it is
returned. Options: ``inplace`` (the collective's in-place convention,
docs/plan-format.md section 9), ``chunks`` (chunks per block: message sizes must be
multiples of the plan's chunk count times buffer_alignment), ``name``, and any
CollectiveProgram option (``buffer_alignment``, ``max_lanes``, ...). Reductions name no
operator: the call's applies (``comm.execute(plan, x, op="max")``).
``program(kind, n, ...)`` returns the CollectiveProgram before it is compiled.

No op is pinned to a thread block (but in allreduce_allpairs_pinned): the compiler
puts each channel's traffic on a lane of its own and the reductions where their
inputs are, and inserts the semaphores between lanes that the chunks need; those
that the order through other ranks already gives are dropped (prune_syncs), so that
every one left is needed. Each plan starts with a relaxed
handshake on every channel, so that no rank stores into a peer that has not
entered the call (and finished reading its buffers of the last one), and every
store into a peer is followed by a signal the peer waits for before it returns.
Data is pushed, never pulled: no plan reads a peer's memory.
"""

from __future__ import annotations

from .channel import MemoryChannel
from .collectives import AllGather, AllReduce, AllToAll, ReduceScatter
from .program import CollectiveProgram
from .rank import Buffer, Rank
from .types import SyncType

__all__ = ["allgather", "allreduce", "allreduce_allpairs", "allreduce_ring", "alltoall", "program",
           "reduce_scatter", "KINDS"]


def _slot(src, dst):
    """Where data from rank src lands among rank dst's n-1 scratch slots."""
    return src if src < dst else src - 1


def _mesh(n):
    return {(r, p): MemoryChannel(p, r) for r in range(n) for p in range(n) if p != r}


def _handshake(chans):
    for c in chans.values():
        c.signal(relaxed=True, data_sync=SyncType.none)
    for c in chans.values():
        c.wait(relaxed=True, data_sync=SyncType.after)


def _exchange(chans):
    """Publish every store made so far into the peers, and wait for theirs."""
    for c in chans.values():
        c.signal(data_sync=SyncType.before)
    for c in chans.values():
        c.wait(data_sync=SyncType.after)


def _allreduce_allpairs(n, c):
    """Rank r sends block p of its input to rank p's scratch, reduces its own block r
    with what the peers sent, and stores the sum into block r of every output."""
    scratch = {r: Buffer(r, (n - 1) * c) for r in range(n)}
    chans = _mesh(n)
    _handshake(chans)
    for (r, p), ch in chans.items():
        s = _slot(r, p) * c
        ch.put(scratch[p][s:s + c], Rank(r).get_input_buffer()[p * c:(p + 1) * c])
    _exchange(chans)
    for r in range(n):
        rank = Rank(r)
        blk = slice(r * c, (r + 1) * c)
        slots = [scratch[r][s * c:(s + 1) * c] for s in range(n - 1)]
        rank.reduce(rank.get_input_buffer()[blk], slots, dst_chunk=rank.get_output_buffer()[blk], reduce_op=None)
    for (r, p), ch in chans.items():
        blk = slice(r * c, (r + 1) * c)
        ch.put(Rank(p).get_output_buffer()[blk], Rank(r).get_output_buffer()[blk])
    _exchange(chans)


def _allreduce_allpairs_pinned(n, c):
    """The all-pairs allreduce with its lanes written out: lane k talks to the rank's
    peer k only, and barriers of all lanes separate receiving, reducing (lane 0)
    and sending."""
    scratch = {r: Buffer(r, (n - 1) * c) for r in range(n)}
    chans = _mesh(n)
    lanes = list(range(n - 1))

    def tb(r, p):
        return _slot(p, r)

    for (r, p), ch in chans.items():
        ch.signal(tb(r, p), relaxed=True, data_sync=SyncType.none)
        ch.wait(tb(r, p), relaxed=True, data_sync=SyncType.after)
        s = _slot(r, p) * c
        ch.put(scratch[p][s:s + c], Rank(r).get_input_buffer()[p * c:(p + 1) * c], tb=tb(r, p))
        ch.signal(tb(r, p), data_sync=SyncType.before)
        ch.wait(tb(r, p), data_sync=SyncType.after)
    for r in range(n):
        rank = Rank(r)
        rank.barrier(tb_list=lanes)
        blk = slice(r * c, (r + 1) * c)
        slots = [scratch[r][s * c:(s + 1) * c] for s in range(n - 1)]
        rank.reduce(rank.get_input_buffer()[blk], slots, tb=0, dst_chunk=rank.get_output_buffer()[blk], reduce_op=None)
        rank.barrier(tb_list=lanes)
    for (r, p), ch in chans.items():
        blk = slice(r * c, (r + 1) * c)
        ch.put(Rank(p).get_output_buffer()[blk], Rank(r).get_output_buffer()[blk], tb=tb(r, p))
        ch.signal(tb(r, p), data_sync=SyncType.before)
        ch.wait(tb(r, p), data_sync=SyncType.after)


def _ring_channels(n, segments):
    """Per rank and segment: (to next, to prev), made in an order that pairs r's
    channel to r+1 with r+1's channel to r (with two ranks both lead to one peer)."""
    nxt, prv = {}, {}
    for g in range(segments):
        for r in range(n):
            order = ("prev", "next") if n == 2 and r % 2 else ("next", "prev")
            for which in order:
                if which == "next":
                    nxt[(r, g)] = MemoryChannel((r + 1) % n, r)
                else:
                    prv[(r, g)] = MemoryChannel((r - 1) % n, r)
    return nxt, prv


RING_SEGMENT = 6  # ring steps per channel pair: the compiler gives each pair a lane (64 ops at most)


def _allreduce_ring(n, c):
    """Reduce-scatter then allgather around the ring r -> r+1, block by block: at
    step s rank r sends block r-s (its input at s = 0, else its running sum) into
    slot s of the next rank's scratch; the next rank adds its input to it. After
    n-1 steps rank r holds the sum of block r+1, which then travels once round the
    ring into every output. Every RING_SEGMENT steps use a channel pair of their
    own, so that long rings spread over several lanes."""
    scratch = {r: Buffer(r, (n - 1) * c) for r in range(n)}
    steps = 2 * (n - 1)
    segments = (steps + RING_SEGMENT - 1) // RING_SEGMENT
    nxt, prv = _ring_channels(n, segments)
    for (r, g) in nxt:
        nxt[(r, g)].signal(relaxed=True, data_sync=SyncType.none)
        prv[(r, g)].signal(relaxed=True, data_sync=SyncType.none)
    for (r, g) in nxt:
        nxt[(r, g)].wait(relaxed=True, data_sync=SyncType.after)
        prv[(r, g)].wait(relaxed=True, data_sync=SyncType.after)

    def blk(b):
        b %= n
        return slice(b * c, (b + 1) * c)

    for s in range(n - 1):
        g = s // RING_SEGMENT
        for r in range(n):
            rank, nx = Rank(r), (r + 1) % n
            src = rank.get_input_buffer() if s == 0 else rank.get_output_buffer()
            nxt[(r, g)].put(scratch[nx][s * c:(s + 1) * c], src[blk(r - s)])
            nxt[(r, g)].signal(data_sync=SyncType.before)
        for r in range(n):
            rank = Rank(r)
            prv[(r, g)].wait(data_sync=SyncType.after)
            b = blk(r - 1 - s)
            rank.reduce(rank.get_input_buffer()[b], [scratch[r][s * c:(s + 1) * c]],
                        dst_chunk=rank.get_output_buffer()[b], reduce_op=None)
    for t in range(n - 1):
        g = (n - 1 + t) // RING_SEGMENT
        for r in range(n):
            nx = (r + 1) % n
            b = blk(r + 1 - t)
            nxt[(r, g)].put(Rank(nx).get_output_buffer()[b], Rank(r).get_output_buffer()[b])
            nxt[(r, g)].signal(data_sync=SyncType.before)
        for r in range(n):
            prv[(r, g)].wait(data_sync=SyncType.after)


def _allgather(n, c, inplace):
    """Every rank stores its block into block r of every peer's output."""
    chans = _mesh(n)
    _handshake(chans)
    for r in range(n):
        rank = Rank(r)
        if not inplace:
            rank.copy(rank.get_output_buffer()[r * c:(r + 1) * c], rank.get_input_buffer()[0:c])
    for (r, p), ch in chans.items():
        src = Rank(r).get_output_buffer()[r * c:(r + 1) * c] if inplace else Rank(r).get_input_buffer()[0:c]
        ch.put(Rank(p).get_output_buffer()[r * c:(r + 1) * c], src)
    _exchange(chans)


def _reduce_scatter(n, c):
    """Rank r sends block p of its input to p's scratch and reduces its own block with
    what arrives into its output."""
    scratch = {r: Buffer(r, (n - 1) * c) for r in range(n)}
    chans = _mesh(n)
    _handshake(chans)
    for (r, p), ch in chans.items():
        s = _slot(r, p) * c
        ch.put(scratch[p][s:s + c], Rank(r).get_input_buffer()[p * c:(p + 1) * c])
    _exchange(chans)
    for r in range(n):
        rank = Rank(r)
        slots = [scratch[r][s * c:(s + 1) * c] for s in range(n - 1)]
        rank.reduce(rank.get_input_buffer()[r * c:(r + 1) * c], slots, dst_chunk=rank.get_output_buffer()[0:c],
                    reduce_op=None)


def _alltoall(n, c, inplace):
    """Block p of rank r's input goes to block r of rank p's output; in place through
    the peer's scratch (its block r is its own input, still to be sent)."""
    scratch = {r: Buffer(r, (n - 1) * c) for r in range(n)} if inplace else None
    chans = _mesh(n)
    _handshake(chans)
    if not inplace:
        for r in range(n):
            rank = Rank(r)
            rank.copy(rank.get_output_buffer()[r * c:(r + 1) * c], rank.get_input_buffer()[r * c:(r + 1) * c])
    for (r, p), ch in chans.items():
        src = Rank(r).get_input_buffer()[p * c:(p + 1) * c]
        if inplace:
            s = _slot(r, p) * c
            ch.put(scratch[p][s:s + c], src)
        else:
            ch.put(Rank(p).get_output_buffer()[r * c:(r + 1) * c], src)
    _exchange(chans)
    if inplace:
        for r in range(n):
            rank = Rank(r)
            for p in range(n):
                if p != r:
                    s = _slot(p, r) * c
                    rank.copy(rank.get_output_buffer()[p * c:(p + 1) * c], scratch[r][s:s + c])


KINDS = {
    "allreduce_allpairs": (AllReduce, lambda n, c, inplace: _allreduce_allpairs(n, c)),
    "allreduce_ring": (AllReduce, lambda n, c, inplace: _allreduce_ring(n, c)),
    "allreduce_allpairs_pinned": (AllReduce, lambda n, c, inplace: _allreduce_allpairs_pinned(n, c)),
    "allgather": (AllGather, _allgather),
    "reduce_scatter": (ReduceScatter, lambda n, c, inplace: _reduce_scatter(n, c)),
    "alltoall": (AllToAll, _alltoall),
}


def program(kind, n, *, inplace=False, chunks=1, name=None, **options):
    """The CollectiveProgram of a built-in (kind: a key of KINDS), recorded, not compiled."""
    if kind not in KINDS:
        raise ValueError(f"builtin {kind!r}: one of {sorted(KINDS)}")
    if n < 2:
        raise ValueError(f"{n} ranks: the built-ins need 2 or more")
    coll, body = KINDS[kind]
    name = name or f"ucxxgo.lang.{kind}.n{n}.c{chunks}.{'inplace' if inplace else 'outofplace'}"
    options.setdefault("prune_syncs", True)
    prog = CollectiveProgram(name, coll(n, chunks, inplace), n, **options)
    with prog:
        body(n, chunks, inplace)
    return prog


def _json(kind, n, **kw):
    return program(kind, n, **kw).to_json()


def allreduce_allpairs(n, **kw):
    """All-pairs allreduce: 2 exchanges, each rank reduces one block."""
    return _json("allreduce_allpairs", n, **kw)


def allreduce_ring(n, **kw):
    """Ring allreduce: n-1 reduce-scatter steps, n-1 allgather steps."""
    return _json("allreduce_ring", n, **kw)


def allreduce(n, algorithm="allpairs", **kw):
    return _json("allreduce_" + algorithm, n, **kw)


def allgather(n, **kw):
    """All-pairs allgather (in place: the send block is the output's block r)."""
    return _json("allgather", n, **kw)


def reduce_scatter(n, **kw):
    """All-pairs reduce-scatter (in place: the output is block r of the input)."""
    return _json("reduce_scatter", n, **kw)


def alltoall(n, **kw):
    """Pairwise alltoall (in place through the peers' scratch)."""
    return _json("alltoall", n, **kw)
