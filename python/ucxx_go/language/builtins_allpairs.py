"""The all-pairs built-ins as DSL programs: every rank talks to every other directly.

allreduce.allpairs, allreduce.direct, reducescatter.allpairs, allgather.allpairs, alltoall.pairwise,
reduce.direct and alltoallv, lane for lane the plans of core/builtin/allpairs.go.

Rank r sees its peers in the order r+1, r+2, ..., r+n-1 (mod n); peer r+d is also
the scratch slot d-1 on r that data from it lands in. One lane talks to at most g =
peers_per_lane peers, so each data lane l becomes Q = ceil((n-1)/g) lanes (l, q),
thread block l·Q + q, lane q talking to the peers q·g .. q·g+g-1 of that order.
Where a rank reduces, its K = lanes·Q lanes each reduce one sub-chunk x = l·Q + q of
its block (blocks of K chunks) and move sub-chunks [l·Q, l·Q+Q) to and from the
peers; with Q > 1 a barrier of the K lanes separates receiving from reducing and
reducing from sending.

Each body is called inside the CollectiveProgram and writes the program phase by
phase (all lanes' receiving, then reducing, then sending), so that program order is
the order the lanes' synchronisation gives.
"""

from __future__ import annotations

from .builtins_common import Wiring, groups, nop, peer_of, signal_all, slot, wait_all
from .rank import Buffer, Rank
from .types import SyncType

__all__ = ["allgather_allpairs", "allreduce_allpairs", "allreduce_direct", "alltoall_pairwise", "alltoallv_pairwise", "reduce_direct",
           "reducescatter_allpairs"]


class Mesh:
    """The lanes and channels of an all-pairs program: lane (l, q) of each rank has a
    channel to each peer of its group q, paired with the lane (l, q') of that peer
    whose group holds this rank. Channels are made for l, then r, then p > r."""

    def __init__(self, n, o):
        self.n, self.lanes, self.g = n, o.lanes, o.peers_per_lane
        self.q = groups(n, self.g)
        self.k = self.lanes * self.q
        self.wiring = Wiring()
        self.ch = {}  # (rank, l, peer) -> the rank's end
        for l in range(self.lanes):
            for r in range(n):
                for p in range(r + 1, n):
                    self.ch[(r, l, p)], self.ch[(p, l, r)] = self.wiring.connect(
                        r, self.tb(l, slot(p, r, n) // self.g), p, self.tb(l, slot(r, p, n) // self.g))
        self.wiring.handshake()

    def tb(self, l, q):
        return l * self.q + q

    def lane_keys(self):
        """(l, q) of every lane, in thread-block order."""
        return [(l, q) for l in range(self.lanes) for q in range(self.q)]

    def peers(self, r, q):
        """Group q of rank r's peers."""
        return [peer_of(r, i, self.n) for i in range(q * self.g, min((q + 1) * self.g, self.n - 1))]

    def chans(self, r, l, q):
        """Lane (l, q)'s channels to the peers of group q, in group order."""
        return [self.ch[(r, l, p)] for p in self.peers(r, q)]

    def all_lanes(self):
        return list(range(self.k))

    def scatter_to_scratch(self, r, l, q, scratch, block=None):
        """Lane (l, q) of rank r puts sub-chunks [l·Q, l·Q+Q) of block block(p) of its
        input (default: peer p's block) into each group peer p's scratch slot for r,
        signals them and waits for theirs: then r's slots for the group's peers hold
        their sub-chunks."""
        tb, k, inp = self.tb(l, q), self.k, Rank(r).get_input_buffer()
        for p in self.peers(r, q):
            s = slot(r, p, self.n) * k + l * self.q
            b = (p if block is None else block(p)) * k + l * self.q
            self.ch[(r, l, p)].put(scratch[p][s:s + self.q], inp[b:b + self.q], tb=tb)
        signal_all(self.chans(r, l, q), tb, data_sync=SyncType.before)
        wait_all(self.chans(r, l, q), tb, data_sync=SyncType.after)

    def reduce_slots(self, r, l, q, dst, own, scratch):
        """dst = own ⊕ every scratch slot's sub-chunk x = l·Q + q, on lane (l, q)."""
        x = self.tb(l, q)
        slots = [scratch[r][s * self.k + x:s * self.k + x + 1] for s in range(self.n - 1)]
        Rank(r).reduce(own, slots, tb=x, dst_chunk=dst, reduce_op=None)

    def exchange_done(self, r, l, q):
        """Publish the lane's stores into its peers, and wait until theirs into this rank
        are through."""
        signal_all(self.chans(r, l, q), self.tb(l, q), data_sync=SyncType.before)
        wait_all(self.chans(r, l, q), self.tb(l, q))

    def barrier(self, r):
        """A barrier of the rank's K lanes (only where Q > 1), after a nop on each."""
        if self.q > 1:
            for x in self.all_lanes():
                nop(r, x)
            Rank(r).barrier(tb_list=self.all_lanes())


def _scratch(n, size):
    return {r: Buffer(r, size) for r in range(n)}


def allreduce_allpairs(n, o):
    """Block p of each input (sub-chunks per lane) into rank p's scratch; each rank
    reduces its own block and stores the sum into every peer's output: with Q = 1 in
    one op per lane (res), else after a barrier, as a put of the lane's sub-chunks."""
    m = Mesh(n, o)
    k, nq = m.k, m.q
    scratch = _scratch(n, (n - 1) * k)
    for r in range(n):
        rank = Rank(r)
        out, inp = rank.get_output_buffer(), rank.get_input_buffer()
        for l, q in m.lane_keys():
            m.scatter_to_scratch(r, l, q, scratch)
        m.barrier(r)  # every slot's sub-chunk x has arrived
        for l, q in m.lane_keys():
            x = m.tb(l, q)
            m.reduce_slots(r, l, q, out[r * k + x:r * k + x + 1], inp[r * k + x:r * k + x + 1], scratch)
            if nq == 1:  # the lane reduces exactly what it sends: the puts fuse into a res
                for p in m.peers(r, q):
                    peer_out = Rank(p).get_output_buffer()
                    m.ch[(r, l, p)].put(peer_out[r * k + x:r * k + x + 1], out[r * k + x:r * k + x + 1], tb=x)
        m.barrier(r)  # sub-chunks [l·Q, l·Q+Q) of the block are reduced
        for l, q in m.lane_keys():
            if nq > 1:
                blk = slice(r * k + l * nq, r * k + l * nq + nq)
                for p in m.peers(r, q):
                    m.ch[(r, l, p)].put(Rank(p).get_output_buffer()[blk], out[blk], tb=m.tb(l, q))
            m.exchange_done(r, l, q)


def reducescatter_allpairs(n, o):
    """Block p of each input into rank p's scratch; each rank reduces its own block
    into its output, lane (l, q) sub-chunk l·Q + q."""
    _scatter_reduce(n, o, lambda p: p)


def allreduce_direct(n, o):
    """Each rank puts its whole input (one block) into every peer's scratch slot for
    it and reduces all n copies into its own output, lane (l, q) sub-chunk l·Q + q:
    one exchange, no stores into the peers' outputs."""
    _scatter_reduce(n, o, lambda p: 0)


def _scatter_reduce(n, o, block):
    """Block block(p) of each input into rank p's scratch; lane (l, q) of each rank
    reduces output sub-chunk l·Q + q from that sub-chunk of its own block block(r)
    and of every slot."""
    m = Mesh(n, o)
    k = m.k
    scratch = _scratch(n, (n - 1) * k)
    for r in range(n):
        rank = Rank(r)
        out, inp = rank.get_output_buffer(), rank.get_input_buffer()
        for l, q in m.lane_keys():
            m.scatter_to_scratch(r, l, q, scratch, block)
        m.barrier(r)
        own = block(r) * k
        for l, q in m.lane_keys():
            x = m.tb(l, q)
            m.reduce_slots(r, l, q, out[x:x + 1], inp[own + x:own + x + 1], scratch)


def allgather_allpairs(n, o):
    """Each rank puts its block (lane l: chunk l) into block r of every peer's output;
    out of place lane (l, 0) first copies it into its own output."""
    m = Mesh(n, o)
    lanes = m.lanes
    for r in range(n):
        rank = Rank(r)
        out = rank.get_output_buffer()
        for l, q in m.lane_keys():
            tb = m.tb(l, q)
            mine = out[r * lanes + l:r * lanes + l + 1]
            own = mine  # in place the send buffer is this slot
            if not o.inplace:
                own = rank.get_input_buffer()[l:l + 1]
                if q == 0:
                    rank.copy(mine, own, tb=tb)
            for p in m.peers(r, q):
                m.ch[(r, l, p)].put(Rank(p).get_output_buffer()[r * lanes + l:r * lanes + l + 1], own, tb=tb)
            m.exchange_done(r, l, q)


def alltoall_pairwise(n, o):
    """Block p of rank r's input (lane l: chunk p·lanes + l) goes to block r of rank
    p's output, each rank putting to every peer at once. In place a peer's block r is
    its own input still to be sent: the block lands in the peer's scratch, and each
    rank copies its slots into place once it has sent its blocks."""
    m = Mesh(n, o)
    lanes = m.lanes
    scratch = _scratch(n, (n - 1) * lanes) if o.inplace else None
    for r in range(n):
        rank = Rank(r)
        out, inp = rank.get_output_buffer(), rank.get_input_buffer()
        for l, q in m.lane_keys():
            tb = m.tb(l, q)
            if not o.inplace and q == 0:
                rank.copy(out[r * lanes + l:r * lanes + l + 1], inp[r * lanes + l:r * lanes + l + 1], tb=tb)
            for p in m.peers(r, q):
                if o.inplace:
                    s = slot(r, p, n) * lanes + l
                    dst = scratch[p][s:s + 1]
                else:
                    dst = Rank(p).get_output_buffer()[r * lanes + l:r * lanes + l + 1]
                m.ch[(r, l, p)].put(dst, inp[p * lanes + l:p * lanes + l + 1], tb=tb)
            signal_all(m.chans(r, l, q), tb, data_sync=SyncType.before)
            wait_all(m.chans(r, l, q), tb, data_sync=SyncType.after if o.inplace else SyncType.none)
            if o.inplace:  # this lane has sent block p (to p) before overwriting it
                for p in m.peers(r, q):
                    s = slot(p, r, n) * lanes + l
                    rank.copy(out[p * lanes + l:p * lanes + l + 1], scratch[r][s:s + 1], tb=tb)


def alltoallv_pairwise(n, o):
    """alltoall.pairwise out of place, one lane: chunk j is block j, sized per call."""
    alltoall_pairwise(n, o)


def reduce_direct(n, o):
    """Every other rank's lane l puts sub-chunks [l·Q, l·Q+Q) of its input into the
    root's scratch slot for it and signals; the root's K lanes are those of an
    all-pairs rank (lane (l, q) waits for the peers of group q) and each reduces its
    sub-chunk into the output. Other ranks' outputs are not touched."""
    root, g = o.root, o.peers_per_lane
    nq = groups(n, g)
    k = o.lanes * nq
    wiring = Wiring()
    ch = {}  # (rank, l, peer) -> the rank's end
    for l in range(o.lanes):
        for p in range(n):
            if p != root:
                ch[(root, l, p)], ch[(p, l, root)] = wiring.connect(root, l * nq + slot(p, root, n) // g, p, l)
    wiring.handshake()
    scratch = Buffer(root, (n - 1) * k)
    for p in range(n):
        if p == root:
            continue
        inp = Rank(p).get_input_buffer()
        for l in range(o.lanes):
            s = slot(p, root, n) * k + l * nq
            ch[(p, l, root)].put(scratch[s:s + nq], inp[l * nq:l * nq + nq], tb=l)
            ch[(p, l, root)].signal(l, data_sync=SyncType.before)
    rank = Rank(root)
    lanes = list(range(k))
    for l in range(o.lanes):
        for q in range(nq):
            peers = [peer_of(root, i, n) for i in range(q * g, min((q + 1) * g, n - 1))]
            wait_all([ch[(root, l, p)] for p in peers], l * nq + q, data_sync=SyncType.after)
    if nq > 1:
        for x in lanes:
            nop(root, x)
        rank.barrier(tb_list=lanes)
    out, inp = rank.get_output_buffer(), rank.get_input_buffer()
    for x in lanes:
        slots = [scratch[s * k + x:s * k + x + 1] for s in range(n - 1)]
        rank.reduce(inp[x:x + 1], slots, tb=x, dst_chunk=out[x:x + 1], reduce_op=None)
