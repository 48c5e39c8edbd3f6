"""The rooted built-ins as DSL programs: broadcast and reduce down and up a chain or a
binary tree (core/builtin/tree.go, lane for lane).

Rank root+v (mod n) is node v, whose children are fanout·v+1 .. fanout·v+fanout
(below n): a chain with fanout 1, a binary tree with fanout 2. Lane l of a node
moves chunks [l·c, l·c+c), c = chunks, piece by piece: each piece goes on as soon
as it has arrived (the pipeline). A lane moves at most PIECES_PER_LANE pieces (five
ops each within 0.9's 64 per lane); more are cut into segments, each a lane of its
own (thread block l·S + s), connected to the same segment lane of its parent and
of each child.
"""

from __future__ import annotations

from .builtins_common import Wiring, signal_all, wait_all
from .builtins_ring import SEGMENT_OPS
from .rank import Buffer, Rank
from .types import SyncType

__all__ = ["PIECES_PER_LANE", "Tree", "broadcast_tree", "reduce_tree"]

PIECES_PER_LANE = SEGMENT_OPS // 5  # wait, nop, data, nop, signal per piece


class Tree:
    """The nodes, lanes and channels of a rooted program. Channels are made node by
    node, child by child, lane by lane."""

    def __init__(self, n, o, fanout):
        self.n, self.root, self.fanout = n, o.root, fanout
        self.lanes, self.c = o.lanes, o.chunks
        self.nseg = (self.c + PIECES_PER_LANE - 1) // PIECES_PER_LANE
        self.up = {}  # (v, lane) -> the channel to the parent
        self.down = {}  # (v, lane) -> the channels to the children, in order
        wiring = Wiring()
        for v in range(n):
            for w in self.children(v):
                for i in range(self.lanes * self.nseg):
                    cv, cw = wiring.connect(self.rank(v), i, self.rank(w), i)
                    self.down.setdefault((v, i), []).append(cv)
                    self.up[(w, i)] = cw
        wiring.handshake()

    def rank(self, v):
        return (v + self.root) % self.n

    def children(self, v):
        return [w for w in range(self.fanout * v + 1, self.fanout * v + self.fanout + 1) if w < self.n]

    def parent(self, v):
        return (v - 1) // self.fanout

    def segments(self):
        """(v, l, lane, pieces) of every node's segment lanes, pieces a range of k."""
        for v in range(self.n):
            for l in range(self.lanes):
                for s in range(self.nseg):
                    yield v, l, l * self.nseg + s, range(s * PIECES_PER_LANE, min((s + 1) * PIECES_PER_LANE, self.c))


def broadcast_tree(n, o, fanout):
    """Each node waits for piece k from its parent (the root has it), then puts it
    into its children's outputs and signals them. Out of place the root first copies
    its input into its output, and sends from its input."""
    t = Tree(n, o, fanout)
    for v, l, lane, pieces in t.segments():
        rank = Rank(t.rank(v))
        out = rank.get_output_buffer()
        src = out
        if v == 0 and not o.inplace:
            src = rank.get_input_buffer()
            lo, hi = l * t.c + pieces.start, l * t.c + pieces.stop
            rank.copy(out[lo:hi], src[lo:hi], tb=lane)
        children = t.children(v)
        for k in pieces:
            idx = l * t.c + k
            if v != 0:
                t.up[(v, lane)].wait(lane, data_sync=SyncType.after if children else SyncType.none)
                if not children:
                    continue
            for w, ch in zip(children, t.down[(v, lane)]):
                ch.put(Rank(t.rank(w)).get_output_buffer()[idx:idx + 1], src[idx:idx + 1], tb=lane)
            signal_all(t.down[(v, lane)], lane, data_sync=SyncType.before)


def reduce_tree(n, o, fanout):
    """Each node waits for piece k's partial sums from its children (in its scratch,
    slot i·K + idx for child i, K = lanes·chunks), adds its input, and sends the sum
    into its parent's slot for it (one res, keeping a copy in its own scratch slot
    fanout·K + idx); the root reduces into its output. Leaves put their input. Other
    ranks' outputs are not touched."""
    t = Tree(n, o, fanout)
    kk = t.lanes * t.c
    scratch = {}
    for v in range(n):
        if t.children(v):
            scratch[v] = Buffer(t.rank(v), (fanout + (v != 0)) * kk)
    for v, l, lane, pieces in t.segments():
        rank = Rank(t.rank(v))
        inp = rank.get_input_buffer()
        children = t.children(v)
        for k in pieces:
            idx = l * t.c + k
            if v != 0:
                p = t.parent(v)
                at = ((v - 1) % fanout) * kk + idx
                up = scratch[p][at:at + 1]  # the parent's slot for this node
                ch = t.up[(v, lane)]
            if not children:
                ch.put(up, inp[idx:idx + 1], tb=lane)
                ch.signal(lane, data_sync=SyncType.before)
                continue
            wait_all(t.down[(v, lane)], lane, data_sync=SyncType.after)
            slots = [scratch[v][i * kk + idx:i * kk + idx + 1] for i in range(len(children))]
            if v == 0:
                rank.reduce(inp[idx:idx + 1], slots, tb=lane, dst_chunk=rank.get_output_buffer()[idx:idx + 1],
                            reduce_op=None)
                continue
            mine = scratch[v][fanout * kk + idx:fanout * kk + idx + 1]
            rank.reduce(inp[idx:idx + 1], slots, tb=lane, dst_chunk=mine, reduce_op=None)
            ch.put(up, mine, tb=lane)
            ch.signal(lane, data_sync=SyncType.before)
