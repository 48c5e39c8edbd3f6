"""The ring allreduce as a DSL program (core/builtin/ring.go, lane for lane).

The ring is r -> r+1. Block b of the buffers is chunks [b·K, b·K+K), K = lanes·c,
c = chunks; lane l moves chunks b·K + l·c + k, k < c, of every block, as its own
ring. Each (lane, piece k) goes through 2n-1 steps t, and step t on rank r waits for
step t-1 of its predecessor; block b = r - t (mod n):

    t = 0:          put input block r into next's scratch slot 0
    t = 1..n-2:     out[b] = in[b] + scratch slot t-1, also stored into next's
                    scratch slot t (one res)
    t = n-1:        out[b] = in[b] + scratch slot n-2, also stored into next's
                    output: block b is complete
    t = n..2n-3:    put out[b] into next's output
    t = 2n-2:       wait for the last block

and signals next after each data op. This pipelines the pieces: piece k+1 of a step
follows piece k as soon as it is ready. A lane runs its units (t, k) in that order;
MSCCL++ 0.9 runs at most 64 ops per lane, so the units are cut into segments of at
most SEGMENT_OPS ops, each a lane of its own (thread block l·S + s), the same on
every rank. Step t of segment a signals step t+1, of segment b, on the next rank
through a channel pair of their own for each (a, b), so that each channel end has
one lane.
"""

from __future__ import annotations

from .builtins_common import Wiring
from .fusion import no_fusion
from .rank import Buffer, Rank
from .types import SyncType

__all__ = ["SEGMENT_OPS", "allreduce_ring", "ring_segments"]

SEGMENT_OPS = 64 - 5  # 0.9's 64 ops per lane, less the handshake's (5 with 16 channels)


def ring_segments(n, c):
    """(S, seg): how many segments a ring lane's units (t, k), t < 2n-1, k < c, make
    when cut in order into runs of at most SEGMENT_OPS ops, and seg[t][k], the
    segment of each unit."""
    steps = 2 * n - 1

    def cost(t):
        if t == 0:
            return 3  # put, nop, signal
        if t == steps - 1:
            return 1  # wait
        return 5  # wait, nop, data, nop, signal

    seg = [[0] * c for _ in range(steps)]
    count = used = 0
    for t in range(steps):
        for k in range(c):
            if used + cost(t) > SEGMENT_OPS:
                count, used = count + 1, 0
            seg[t][k] = count
            used += cost(t)
    return count + 1, seg


def allreduce_ring(n, o):
    lanes, c = o.lanes, o.chunks
    kk = lanes * c
    steps = 2 * n - 1
    nseg, seg = ring_segments(n, c)

    def chunk(blk, l, k):
        return blk * kk + l * c + k

    def scr(t, l, k):
        return t * kk + l * c + k

    def tb(l, s):
        return l * nseg + s

    # The channel from unit (t, k) on rank r to unit (t+1, k) on r+1: one pair per
    # (r, l, sender segment, receiver segment), made in the order the units first
    # need them (rank by rank: a unit's wait, then its signal).
    wiring = Wiring()
    pairs = {}

    def edge(r, l, t, k):
        key = (r, l, seg[t][k], seg[t + 1][k])
        if key not in pairs:
            pairs[key] = wiring.connect(r, tb(l, key[2]), (r + 1) % n, tb(l, key[3]))
        return pairs[key]

    for r in range(n):
        for l in range(lanes):
            for t in range(steps):
                for k in range(c):
                    if t > 0:
                        edge((r - 1) % n, l, t - 1, k)
                    if t < steps - 1:
                        edge(r, l, t, k)
    wiring.handshake()

    scratch = {r: Buffer(r, (n - 1) * kk) for r in range(n)}
    for r in range(n):
        rank, nx = Rank(r), (r + 1) % n
        inp, out = rank.get_input_buffer(), rank.get_output_buffer()
        next_out = Rank(nx).get_output_buffer()
        for l in range(lanes):
            for t in range(steps):
                for k in range(c):
                    lane = tb(l, seg[t][k])
                    if t == steps - 1:  # a wait of its own per piece, even next to another channel's
                        with no_fusion():
                            edge((r - 1) % n, l, t - 1, k)[1].wait(lane, data_sync=SyncType.none)
                        continue
                    if t > 0:
                        edge((r - 1) % n, l, t - 1, k)[1].wait(lane, data_sync=SyncType.after)
                    send = edge(r, l, t, k)[0]
                    b = chunk((r - t) % n, l, k)
                    if t == 0:
                        send.put(scratch[nx][scr(0, l, k):scr(0, l, k) + 1], inp[b:b + 1], tb=lane)
                    elif t < n:  # reduce, and store the sum on: one res
                        rank.reduce(inp[b:b + 1], [scratch[r][scr(t - 1, l, k):scr(t - 1, l, k) + 1]], tb=lane,
                                    dst_chunk=out[b:b + 1], reduce_op=None)
                        to = scratch[nx][scr(t, l, k):scr(t, l, k) + 1] if t < n - 1 else next_out[b:b + 1]
                        send.put(to, out[b:b + 1], tb=lane)
                    else:
                        send.put(next_out[b:b + 1], out[b:b + 1], tb=lane)
                    send.signal(lane, data_sync=SyncType.before)
