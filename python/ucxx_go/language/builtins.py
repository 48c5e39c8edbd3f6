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

allreduce_pipelined is the all-pairs allreduce inside a Loop (a pipeline op per
lane: windows of ``unit`` bytes of every block go through both exchanges in turn).

No op is pinned to a thread block (but in allreduce_allpairs_pinned): the compiler
puts each channel's traffic on a lane of its own and the reductions where their
inputs are, and inserts the semaphores between lanes that the chunks need; those
that the order through other ranks already gives are dropped (prune_syncs), so that
every one left is needed. Each plan starts with a relaxed
handshake on every channel, so that no rank stores into a peer that has not
entered the call (and finished reading its buffers of the last one), and every
store into a peer is followed by a signal the peer waits for before it returns.
Data is pushed, never pulled: no plan reads a peer's memory.

The library's built-in algorithms (core/builtin) are DSL programs too, with every
op pinned to its lane: ALGORITHMS lists them (allreduce.allpairs, allreduce.direct, allreduce.ring,
allgather.allpairs, reducescatter.allpairs, alltoall.pairwise, broadcast.chain,
broadcast.tree, reduce.chain, reduce.tree, reduce.direct; plus alltoallv), and
``builtin_plan("allreduce.ring", 4, Options(chunks=2))`` gives the plan, the same
as the Go generator's. ``python -m ucxx_go.language.builtins --write [DIR]``
rewrites the golden plans (core/builtin/testdata) from these programs; ``--check``
names the files that differ.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import builtins_allpairs, builtins_ring, builtins_tree
from .builtins_common import MAX_PEERS_PER_LANE, Options, groups
from .builtins_golden import golden_cases, plan_difference, plan_text
from .channel import MemoryChannel
from .collectives import AllGather, AllReduce, AllToAll, AllToAllV, Broadcast, Reduce, ReduceScatter
from .loop import Loop
from .program import CollectiveProgram
from .rank import Buffer, Rank
from .types import SyncType

__all__ = ["ALGORITHMS", "Algorithm", "GOLDEN_DIR", "KINDS", "Options", "allgather", "allreduce",
           "allreduce_allpairs", "allreduce_pipelined", "allreduce_ring", "alltoall", "alltoallv",
           "alltoallv_program", "builtin_plan", "builtin_program", "golden_files", "lookup", "program",
           "reduce_scatter", "stale_goldens", "write_goldens"]


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


def _scatter_blocks(n, c):
    """Rank r sends block p of its input (c chunks) to its slot in rank p's scratch,
    after the handshake, and the exchange ends it; returns the scratch buffers and the
    channels."""
    scratch = {r: Buffer(r, (n - 1) * c) for r in range(n)}
    chans = _mesh(n)
    _handshake(chans)
    for (r, p), ch in chans.items():
        s = _slot(r, p) * c
        ch.put(scratch[p][s:s + c], Rank(r).get_input_buffer()[p * c:(p + 1) * c])
    _exchange(chans)
    return scratch, chans


def _allreduce_allpairs(n, c):
    """Rank r sends block p of its input to rank p's scratch, reduces its own block r
    with what the peers sent, and stores the sum into block r of every output."""
    scratch, chans = _scatter_blocks(n, c)
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
    scratch, chans = _scatter_blocks(n, c)
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


PIPELINE_UNIT = 1 << 16  # bytes per window of allreduce_pipelined's Loop, by default


def _allreduce_pipelined(n, c, unit):
    """The all-pairs allreduce pipelined with Loop: its three phases (into the peers'
    scratch, the reduction, into the peers' outputs) run window by window over
    `unit` bytes of every block (c chunks), so that the first window is being reduced
    and sent on while the next is still arriving."""
    scratch = {r: Buffer(r, (n - 1) * c) for r in range(n)}
    chans = _mesh(n)
    _handshake(chans)
    with Loop.iteration(unit=unit, num_chunks=c) as it:
        for (r, p), ch in chans.items():
            s = _slot(r, p) * c
            ch.put(scratch[p][s:s + c], Rank(r).get_input_buffer()[p * c:(p + 1) * c], iter_context=it)
        _exchange(chans)
        for r in range(n):
            rank = Rank(r)
            blk = slice(r * c, (r + 1) * c)
            slots = [scratch[r][s * c:(s + 1) * c] for s in range(n - 1)]
            rank.reduce(rank.get_input_buffer()[blk], slots, dst_chunk=rank.get_output_buffer()[blk],
                        reduce_op=None, iter_context=it)
        for (r, p), ch in chans.items():
            blk = slice(r * c, (r + 1) * c)
            ch.put(Rank(p).get_output_buffer()[blk], Rank(r).get_output_buffer()[blk], iter_context=it)
        _exchange(chans)


# kind -> (collective, body(n, chunks, inplace, unit))
KINDS = {
    "allreduce_allpairs": (AllReduce, lambda n, c, inplace, unit: _allreduce_allpairs(n, c)),
    "allreduce_ring": (AllReduce, lambda n, c, inplace, unit: _allreduce_ring(n, c)),
    "allreduce_allpairs_pinned": (AllReduce, lambda n, c, inplace, unit: _allreduce_allpairs_pinned(n, c)),
    "allreduce_pipelined": (AllReduce, lambda n, c, inplace, unit: _allreduce_pipelined(n, c, unit)),
    "allgather": (AllGather, lambda n, c, inplace, unit: _allgather(n, c, inplace)),
    "reduce_scatter": (ReduceScatter, lambda n, c, inplace, unit: _reduce_scatter(n, c)),
    "alltoall": (AllToAll, lambda n, c, inplace, unit: _alltoall(n, c, inplace)),
}


def program(kind, n, *, inplace=False, chunks=1, name=None, unit=PIPELINE_UNIT, **options):
    """The CollectiveProgram of a built-in (kind: a key of KINDS), recorded, not compiled.
    unit: the window of allreduce_pipelined's Loop, in bytes."""
    if kind not in KINDS:
        raise ValueError(f"builtin {kind!r}: one of {sorted(KINDS)}")
    if n < 2:
        raise ValueError(f"{n} ranks: the built-ins need 2 or more")
    coll, body = KINDS[kind]
    name = name or f"ucxxgo.lang.{kind}.n{n}.c{chunks}.{'inplace' if inplace else 'outofplace'}"
    options.setdefault("prune_syncs", True)
    prog = CollectiveProgram(name, coll(n, chunks, inplace), n, **options)
    with prog:
        body(n, chunks, inplace, unit)
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


def allreduce_pipelined(n, **kw):
    """All-pairs allreduce pipelined with Loop, window by window (``unit`` bytes)."""
    return _json("allreduce_pipelined", n, **kw)


def allgather(n, **kw):
    """All-pairs allgather (in place: the send block is the output's block r)."""
    return _json("allgather", n, **kw)


def reduce_scatter(n, **kw):
    """All-pairs reduce-scatter (in place: the output is block r of the input)."""
    return _json("reduce_scatter", n, **kw)


def alltoall(n, **kw):
    """Pairwise alltoall (in place through the peers' scratch)."""
    return _json("alltoall", n, **kw)


# -- the library's built-ins (core/builtin) as DSL programs ------------------------------------


@dataclass(frozen=True)
class Algorithm:
    """One built-in algorithm: the collective it makes, the options it uses, and the DSL
    program body that writes it (called inside the CollectiveProgram with n and the
    Options)."""

    collective: str  # the plan's "collective"
    name: str  # "allpairs", "ring", "chain", "tree", "direct", "pairwise"
    make: Callable  # (n, Options) -> the Collective (chunk counts, in place, root)
    body: Callable  # (n, Options) -> None: records the program
    rooted: bool = False  # uses Options.root
    pipelined: bool = False  # uses Options.chunks
    grouped: bool = False  # uses Options.peers_per_lane

    @property
    def key(self):
        return f"{self.collective}.{self.name}"

    def plan_name(self, n, o):
        """core/builtin's name: "ucxxgo.<collective>.<name>.n<n>[.root<r>][.c<chunks>]
        [.l<lanes>][.g<peers>][.a<alignment>].<inplace|outofplace>"."""
        s = f"ucxxgo.{self.key}.n{n}"
        if self.rooted:
            s += f".root{o.root}"
        if self.pipelined:
            s += f".c{o.chunks}"
        if o.lanes != 1:
            s += f".l{o.lanes}"
        if self.grouped and o.peers_per_lane != MAX_PEERS_PER_LANE:
            s += f".g{o.peers_per_lane}"
        if o.alignment != 1:
            s += f".a{o.alignment}"
        return s + (".inplace" if o.inplace else ".outofplace")

    def program(self, n, o=Options(), name=None):
        """The recorded CollectiveProgram for n ranks (not compiled)."""
        o = o.checked(n)
        prog = CollectiveProgram(name or self.plan_name(n, o), self.make(n, o), n, buffer_alignment=o.alignment)
        with prog:
            self.body(n, o)
        return prog


class _WholeAllReduce(AllReduce):
    """An allreduce whose every rank's input and output are one block of
    chunk_factor chunks (allreduce.direct), not one per rank."""

    def chunk_counts(self):
        return self.chunk_factor, self.chunk_factor


def _k(n, o):
    """Chunks per block of the all-pairs reductions: a sub-chunk per lane and group."""
    return o.lanes * groups(n, o.peers_per_lane)


ALGORITHMS = [
    Algorithm("allreduce", "allpairs", lambda n, o: AllReduce(n, _k(n, o), o.inplace),
              builtins_allpairs.allreduce_allpairs, grouped=True),
    Algorithm("allreduce", "direct", lambda n, o: _WholeAllReduce(n, _k(n, o), o.inplace),
              builtins_allpairs.allreduce_direct, grouped=True),
    Algorithm("allreduce", "ring", lambda n, o: AllReduce(n, o.lanes * o.chunks, o.inplace),
              builtins_ring.allreduce_ring, pipelined=True),
    Algorithm("allgather", "allpairs", lambda n, o: AllGather(n, o.lanes, o.inplace),
              builtins_allpairs.allgather_allpairs, grouped=True),
    Algorithm("reducescatter", "allpairs", lambda n, o: ReduceScatter(n, _k(n, o), o.inplace),
              builtins_allpairs.reducescatter_allpairs, grouped=True),
    Algorithm("alltoall", "pairwise", lambda n, o: AllToAll(n, o.lanes, o.inplace),
              builtins_allpairs.alltoall_pairwise, grouped=True),
    Algorithm("broadcast", "chain", lambda n, o: Broadcast(n, o.lanes * o.chunks, o.inplace, o.root),
              lambda n, o: builtins_tree.broadcast_tree(n, o, 1), rooted=True, pipelined=True),
    Algorithm("broadcast", "tree", lambda n, o: Broadcast(n, o.lanes * o.chunks, o.inplace, o.root),
              lambda n, o: builtins_tree.broadcast_tree(n, o, 2), rooted=True, pipelined=True),
    Algorithm("reduce", "chain", lambda n, o: Reduce(n, o.lanes * o.chunks, o.inplace, o.root),
              lambda n, o: builtins_tree.reduce_tree(n, o, 1), rooted=True, pipelined=True),
    Algorithm("reduce", "tree", lambda n, o: Reduce(n, o.lanes * o.chunks, o.inplace, o.root),
              lambda n, o: builtins_tree.reduce_tree(n, o, 2), rooted=True, pipelined=True),
    Algorithm("reduce", "direct", lambda n, o: Reduce(n, _k(n, o), o.inplace, o.root),
              builtins_allpairs.reduce_direct, rooted=True, grouped=True),
]


def lookup(key):
    """The Algorithm of "collective.name" (ValueError if there is none)."""
    for a in ALGORITHMS:
        if a.key == key:
            return a
    raise ValueError(f"no built-in {key!r}: one of {[a.key for a in ALGORITHMS]}")


def builtin_program(key, n, o=Options()):
    """The recorded program of built-in `key` ("allreduce.ring"...) for n ranks."""
    return lookup(key).program(n, o)


def builtin_plan(key, n, o=Options()):
    """The checked plan (a dict) of built-in `key` for n ranks: core/builtin's plan."""
    plan, _ = builtin_program(key, n, o).compile()
    return plan


def alltoallv_program(n):
    """alltoallv: alltoall.pairwise out of place on one lane, each chunk a block whose
    size and offset every call gives (the plan says "ucxxgo_variable_blocks"); named
    "ucxxgo.alltoallv.pairwise.n<n>" like core/builtin's AllToAllV(n)."""
    Options().checked(n)
    prog = CollectiveProgram(f"ucxxgo.alltoallv.pairwise.n{n}", AllToAllV(n), n, buffer_alignment=1)
    with prog:
        builtins_allpairs.alltoallv_pairwise(n, Options())
    return prog


def alltoallv(n):
    """The alltoallv plan's JSON text (core/builtin's AllToAllV(n))."""
    return alltoallv_program(n).to_json()


# -- the golden plans --------------------------------------------------------------------------

def _golden_dir():
    """core/builtin/testdata of the source tree: the one this module sits in (an
    editable install), else the working directory's (run from the repository's root
    with an installed package)."""
    here = Path(__file__).resolve().parents[3]
    root = here if (here / "go.mod").is_file() else Path.cwd()
    return root / "core" / "builtin" / "testdata"


GOLDEN_DIR = _golden_dir()


def golden_files():
    """{file name: (key, n, Options)} of every golden plan."""
    files = {}
    for key, n, o in golden_cases([a.key for a in ALGORITHMS]):
        files[lookup(key).plan_name(n, o) + ".json"] = (key, n, o)
    return files


def stale_goldens(directory=GOLDEN_DIR):
    """[(file name, why)] of the golden files in `directory` that the DSL programs do
    not give byte for byte: missing, different (with the first differing field), or
    made by no golden case."""
    directory = Path(directory)
    stale = []
    files = golden_files()
    for fname, (key, n, o) in files.items():
        path = directory / fname
        text = plan_text(builtin_plan(key, n, o))
        if not path.exists():
            stale.append((fname, "missing"))
            continue
        old = path.read_text()
        if old != text:
            why = plan_difference(json.loads(text), json.loads(old))
            stale.append((fname, f"the DSL's {why}" if why else "same plan, different layout of the text"))
    for path in sorted(directory.glob("ucxxgo.*.json")):
        if path.name not in files:
            stale.append((path.name, "no golden case makes it"))
    return stale


def write_goldens(directory=GOLDEN_DIR):
    """Write every golden plan into `directory` from the DSL programs and remove the
    ucxxgo.*.json files no case makes; returns the names of the files changed."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    files = golden_files()
    changed = []
    for fname, (key, n, o) in files.items():
        path = directory / fname
        text = plan_text(builtin_plan(key, n, o))
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            changed.append(fname)
    for path in sorted(directory.glob("ucxxgo.*.json")):
        if path.name not in files:
            path.unlink()
            changed.append(path.name)
    return changed


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m ucxx_go.language.builtins",
                                 description="Regenerate or check the built-ins' golden plans from the DSL programs.")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", nargs="?", const=str(GOLDEN_DIR), metavar="DIR",
                   help=f"write every golden plan into DIR (default {GOLDEN_DIR})")
    g.add_argument("--check", nargs="?", const=str(GOLDEN_DIR), metavar="DIR",
                   help="list the golden files in DIR the DSL programs do not give; exit 1 if any")
    args = ap.parse_args(argv)
    if args.write is not None:
        changed = write_goldens(args.write)
        print(f"{len(golden_files())} golden plans in {args.write}; {len(changed)} changed"
              + "".join(f"\n  {f}" for f in changed))
        return 0
    stale = stale_goldens(args.check)
    for fname, why in stale:
        print(f"{fname}: {why}")
    print(f"{len(stale)} of {len(golden_files())} golden plans stale in {args.check}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
