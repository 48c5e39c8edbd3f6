"""ucxx_go.language: a DSL call given something the program cannot have fails at that
call, with a ValueError that names the problem and the line of the program that made
the call, and the program then emits nothing.

The cases (issue 25): a rank, buffer or chunk out of range, chunks of different
sizes, a channel used in the wrong direction, an op the executor cannot run. Each
case below is one call on one line of this file; the error must name that line
("test_language_errors.py:<line>"). What only the whole program shows (a channel
that never gets its pair, a switch reduce left unfused at the end) fails at JSON()
and names the line that made the channel or the reduce.

Behaviour after an error: the program is marked failed by its first failing call,
and compile(), to_json() and JSON() raise ValueError ("emits nothing") naming that
call's line and problem, even if the program recorded nothing wrong afterwards.
"""

import os

import pytest

from ucxx_go.language import (
    JSON,
    AllGather,
    AllReduce,
    BufferType,
    Channel,
    Chunk,
    CollectiveProgram,
    Loop,
    MemoryChannel,
    PortChannel,
    Rank,
    Reduce,
    Semaphore,
    SwitchChannel,
    ThreadBlockGroup,
)
from ucxx_go import language as lang
from ucxx_go.language import Buffer as ScratchBuffer

FILE = os.path.basename(__file__)
N = 3  # ranks; AllReduce(3, 2): 6 input and 6 output chunks per rank


@pytest.fixture(autouse=True)
def fresh_context():
    """Overrides conftest's: nothing here touches the Go side."""
    yield


def inp(r, a, b):
    return Rank(r).get_input_buffer()[a:b]


def out(r, a, b):
    return Rank(r).get_output_buffer()[a:b]


def mc(dst, src):
    return MemoryChannel(dst, src)


def pc(dst, src):
    return PortChannel(dst, src)


def scratch(r, n):
    return Rank(r).Buffer(n)


def switch():
    return SwitchChannel([0, 1, 2], BufferType.output)


# (id, protocol, the bad call, what the message must say). Each bad call is on one
# line: the message must name that line.
CASES = [
    # ranks out of range
    ("rank", "Simple", lambda: Rank(3), ["rank 3 out of range", "3 ranks"]),
    ("negative rank", "Simple", lambda: Rank(-1), ["rank -1 out of range"]),
    ("channel rank", "Simple", lambda: MemoryChannel(3, 0), ["destination rank 3 out of range"]),
    ("seed channel rank", "Simple", lambda: Channel(1, 5, channel_type=Channel.port), ["source rank 5 out of range"]),
    ("scratch rank", "Simple", lambda: ScratchBuffer(4, 1), ["rank 4 out of range"]),
    ("semaphore rank", "Simple", lambda: Semaphore(7), ["rank 7 out of range"]),
    ("seed semaphore rank", "Simple", lambda: Rank.Semaphore(rank=9, size=1), ["rank 9 out of range"]),
    ("switch group rank", "Simple", lambda: SwitchChannel([0, 3], BufferType.output), ["rank 3 out of range"]),
    ("chunk rank", "Simple", lambda: mc(1, 0).put(Chunk(6, BufferType.output, 0, 1), inp(0, 0, 1)),
     ["rank 6 out of range"]),
    ("tb", "Simple", lambda: Rank(0).copy(out(0, 0, 1), inp(0, 0, 1), tb=-1), ["tb -1 out of range"]),
    ("tb too large", "Simple", lambda: mc(1, 0).signal(tb=5000), ["tb 5000 out of range", "0 to 1023"]),
    ("barrier tb", "Simple", lambda: Rank(0).barrier(tb_list=[0, 2048]), ["tb 2048 out of range"]),
    ("tb group", "Simple", lambda: Rank(0).copy(out(0, 0, 2), inp(0, 0, 2), tb_group=ThreadBlockGroup([0, 0])),
     ["thread block 0 twice"]),
    # buffers and chunks out of range
    ("input slice", "Simple", lambda: Rank(0).get_input_buffer()[5:7], ["chunks 5:7 out of range", "input buffer"]),
    ("output index", "Simple", lambda: Rank(2).get_output_buffer()[6], ["chunks 6:7 out of range", "output"]),
    ("scratch slice", "Simple", lambda: scratch(1, 2)[1:3], ["chunks 1:3 out of range", "scratch buffer"]),
    ("empty slice", "Simple", lambda: Rank(0).get_output_buffer()[3:3], ["empty chunk range"]),
    ("negative slice", "Simple", lambda: Rank(0).get_output_buffer()[-1:], ["chunks -1:6 out of range"]),
    ("no scratch", "Simple", lambda: Rank(0).copy(Chunk(0, BufferType.scratch, 0, 1), inp(0, 0, 1)),
     ["out of range", "rank 0's scratch buffer has 0 chunks"]),
    ("chunk past the end", "Simple", lambda: Rank(1).reduce(Chunk(1, BufferType.input, 5, 2), inp(1, 0, 2)),
     ["Chunk(rank 1, input[5:7]) out of range", "input buffer has 6 chunks"]),
    ("empty scratch buffer", "Simple", lambda: Rank(0).Buffer(0), ["scratch buffer of 0 chunks"]),
    ("switch range", "Simple", lambda: switch().at_rank(0).reduce(5, 2, out(0, 0, 2)), ["chunks 5:7", "out of range"]),
    # chunk sizes
    ("copy sizes", "Simple", lambda: Rank(0).copy(out(0, 0, 2), inp(0, 0, 1)), ["chunk sizes differ", "copy of 1"]),
    ("reduce sizes", "Simple", lambda: Rank(0).reduce(out(0, 0, 2), inp(0, 0, 3)),
     ["chunk sizes differ", "reduction of 2 chunks"]),
    ("reduce dst size", "Simple", lambda: Rank(0).reduce(inp(0, 0, 2), [inp(0, 2, 4)], dst_chunk=out(0, 0, 1)),
     ["chunk sizes differ"]),
    ("put sizes", "Simple", lambda: mc(1, 0).put(out(1, 0, 2), inp(0, 0, 1)), ["chunk sizes differ", "put of 1"]),
    ("get sizes", "Simple", lambda: mc(1, 0).get(out(0, 0, 1), inp(1, 0, 3)), ["chunk sizes differ", "get of 3"]),
    ("remote reduce sizes", "Simple", lambda: mc(2, 0).reduce(out(0, 0, 2), [inp(2, 0, 1)]),
     ["chunk sizes differ", "reduction of 2 chunks"]),
    ("switch sizes", "Simple", lambda: switch().at_rank(1).reduce(0, 2, out(1, 0, 1)), ["chunk sizes differ"]),
    ("pipeline sizes", "Simple", lambda: pipelined(lambda: Rank(0).copy(out(0, 0, 2), inp(0, 0, 2))),
     ["num_chunks=1", "exactly num_chunks chunks"]),
    ("pipeline offsets", "Simple", lambda: pipelined(lambda: Rank(0).copy(out(0, 2, 4), out(0, 1, 3)), 2, copy_0_2),
     ["Chunk(rank 0, output[1:3])", "the copy of Chunk(rank 0, output[0:2]) at test_language_errors.py:",
      "different offsets", "against program order"]),
    # channels in the wrong direction
    ("put source on the peer", "Simple", lambda: mc(1, 0).put(out(1, 0, 1), inp(1, 0, 1)),
     ["wrong direction", "source chunk", "MemoryChannel(1, 0) runs on rank 0", "MemoryChannel(0, 1)"]),
    ("put destination here", "Simple", lambda: mc(1, 0).put(out(0, 0, 1), inp(0, 0, 1)),
     ["wrong direction", "destination chunk", "leads to rank 1"]),
    ("put to a third rank", "Simple", lambda: pc(1, 0).put(out(2, 0, 1), inp(0, 0, 1)),
     ["wrong direction", "is on rank 2", "PortChannel(1, 0) runs on rank 0 and leads to rank 1"]),
    ("get into the peer", "Simple", lambda: mc(2, 1).get(out(2, 0, 1), inp(2, 0, 1)),
     ["wrong direction", "destination chunk", "runs on rank 1"]),
    ("remote reduce of a local chunk", "Simple", lambda: mc(1, 0).reduce(out(0, 0, 1), [inp(0, 0, 1)]),
     ["wrong direction", "remote chunk"]),
    ("local copy of a peer's chunk", "Simple", lambda: Rank(0).copy(out(1, 0, 1), inp(0, 0, 1)),
     ["is on rank 1", "Rank(0)'s local ops"]),
    ("channel to itself", "Simple", lambda: MemoryChannel(2, 2), ["from rank 2 to itself"]),
    ("switch view", "Simple", lambda: SwitchChannel([0, 1], BufferType.output).at_rank(2),
     ["rank 2 is not in the switch channel's group"]),
    # ops the executor cannot run
    ("port get", "Simple", lambda: pc(1, 0).get(out(0, 0, 1), inp(1, 0, 1)), ["get only on memory channels"]),
    ("memory flush", "Simple", lambda: mc(1, 0).flush(), ["flush only on port channels"]),
    ("port remote reduce", "Simple", lambda: pc(1, 0).reduce(out(0, 0, 1), [inp(1, 0, 1)]),
     ["remote reductions only on memory channels"]),
    ("packets in Simple", "Simple", lambda: Rank(0).copy_packets(scratch(0, 2)[0:1], inp(0, 0, 1)),
     ["LL packet op", "'Simple'", "protocol=\"LL\""]),
    ("packets into output", "LL", lambda: mc(1, 0).put_packets(out(1, 0, 1), inp(0, 0, 1)),
     ["packets are written to the peer's scratch"]),
    ("port packets from input", "LL", lambda: pc(1, 0).put_packets(scratch(1, 1)[0:1], inp(0, 0, 1)),
     ["packets are read from scratch", "copy_packets"]),
    ("unpack from output", "LL", lambda: Rank(0).unpack_packets(inp(0, 0, 1), out(0, 0, 1)),
     ["packets are read from scratch"]),
    ("nested pipelines", "Simple", lambda: pipelined(lambda: Loop.iteration(unit=64, num_chunks=1).__enter__()),
     ["nested pipelines"]),
    ("wrong iter_context", "Simple", lambda: Rank(0).copy(out(0, 0, 1), inp(0, 0, 1), iter_context=loop()),
     ["iter_context is not the Loop.iteration"]),
    ("switch broadcast alone", "Simple", lambda: switch().at_rank(0).broadcast(out(0, 0, 1), 0, 1),
     ["switch broadcast must come right after the switch reduce", "glres"]),
    ("seed channel type", "Simple", lambda: Channel(1, 0, channel_type="switch"), ["memory or port"]),
    ("reduce operator", "Simple", lambda: Rank(0).reduce(out(0, 0, 1), inp(0, 0, 1), op="avg"),
     ["reduce op 'avg'"]),
    ("sync", "Simple", lambda: mc(1, 0).signal(sync="sometimes"), ["sync 'sometimes'"]),
    ("memory put_with_signal", "Simple", lambda: mc(1, 0).put_with_signal(out(1, 0, 1), inp(0, 0, 1)),
     ["put_with_signal only on port channels"]),
]


def pipelined(fn, num_chunks=1, first=None):
    with Loop.iteration(unit=64, num_chunks=num_chunks):
        if first is not None:
            first()
        fn()


def copy_0_2():
    Rank(0).copy(out(0, 0, 2), inp(0, 0, 2))


def loop():
    return Loop.iteration(unit=64, num_chunks=1)


def program(protocol="Simple", **kw):
    return CollectiveProgram("bad", AllReduce(N, 2, False), N, protocol=protocol, **kw)


def assert_names(err, line, words):
    msg = str(err)
    assert f"{FILE}:{line}:" in msg, msg
    for w in words:
        assert w in msg, (w, msg)


def assert_emits_nothing(prog, line, words=()):
    """compile(), to_json() and JSON() all raise, naming the first failure."""
    for emit in (prog.compile, prog.to_json, JSON):
        with pytest.raises(ValueError, match="emits nothing") as e:
            emit()
        assert_names(e.value, line, words)


@pytest.mark.parametrize("name,protocol,call,words", CASES, ids=[c[0] for c in CASES])
def test_bad_call_fails_at_its_line(name, protocol, call, words):
    line = call.__code__.co_firstlineno
    with program(protocol) as prog:
        with pytest.raises(ValueError) as e:
            call()
        assert_names(e.value, line, words)
        n_ops, n_channels = len(prog.ops), len(prog.channels)
        # what was being recorded when it failed is not recorded
        assert all(op.where != f"{FILE}:{line}" for op in prog.ops)
        assert_emits_nothing(prog, line, words)
        # nothing recorded after the error changes that
        Rank(0).copy(out(0, 0, 1), inp(0, 0, 1))
        assert len(prog.ops) == n_ops + 1 and len(prog.channels) == n_channels
        assert_emits_nothing(prog, line, words)


def test_a_good_program_after_a_failed_one_emits():
    """The failure belongs to its program: the next one compiles."""
    with program() as prog:
        with pytest.raises(ValueError):
            Rank(4)
    with pytest.raises(ValueError, match="emits nothing"):
        prog.to_json()  # after the with block too
    with CollectiveProgram("ok", AllGather(2, 1, False), 2, check=False):
        for r in range(2):
            Rank(r).copy(Rank(r).get_output_buffer()[r:r + 1], Rank(r).get_input_buffer()[0:1])
        assert '"name": "ok"' in JSON()


def test_error_leaves_the_with_block():
    """Uncaught, the error leaves the `with` block (the program is then closed), and the
    program object still refuses to emit."""
    prog = program()
    with pytest.raises(ValueError) as e:
        with prog:
            c = MemoryChannel(1, 0)
            line = lineno() + 1
            c.put(out(1, 0, 1), out(0, 0, 2))
    assert_names(e.value, line, ["chunk sizes differ"])
    with pytest.raises(ValueError, match=f"emits nothing.*{FILE}:{line}:"):
        prog.compile()


def test_only_the_first_failure_is_named():
    with program() as prog:
        first = lineno() + 2
        with pytest.raises(ValueError):
            Rank(0).copy(out(0, 0, 2), inp(0, 0, 1))
        with pytest.raises(ValueError):
            Rank(5)
        assert_emits_nothing(prog, first, ["chunk sizes differ"])


def test_a_non_chunk_is_a_type_error_at_its_line():
    with program() as prog:
        line = lineno() + 2
        with pytest.raises(TypeError) as e:
            Rank(0).copy(out(0, 0, 1), "input[0:1]")
        assert_names(e.value, line, ["is not a chunk"])
        assert_emits_nothing(prog, line)


def test_program_options_fail_at_their_line():
    line = lineno() + 2
    with pytest.raises(ValueError) as e:
        CollectiveProgram("bad", AllReduce(N, 1, False), N, num_threads_per_block=2048)
    assert_names(e.value, line, ["num_threads_per_block 2048", "1 to 1024"])
    line = lineno() + 2
    with pytest.raises(ValueError) as e:
        CollectiveProgram("bad", AllReduce(N, 1, False), N, protocol="LL128")
    assert_names(e.value, line, ["protocol 'LL128'"])
    line = lineno() + 2
    with pytest.raises(ValueError) as e:
        CollectiveProgram("bad", AllReduce(N, 1, False), N + 1)
    assert_names(e.value, line, ["4 ranks for a collective of 3"])


def test_collectives_fail_at_their_line():
    line = lineno() + 2
    with pytest.raises(ValueError) as e:
        Reduce(4, 1, False, root=4)
    assert_names(e.value, line, ["root 4 out of range", "4 ranks"])
    line = lineno() + 2
    with pytest.raises(ValueError) as e:
        AllReduce(0, 1, False)
    assert_names(e.value, line, ["num_ranks 0"])
    line = lineno() + 2
    with pytest.raises(ValueError) as e:
        lang.TestCollective(2, 3, -1)
    assert_names(e.value, line, ["output_size -1"])


def test_switch_reduce_must_be_followed_by_its_broadcast():
    """0.9 runs only the fused glres: the op after a switch reduce on its lane must be
    the broadcast of its result. The error comes at that op and names both lines."""
    with program() as prog:
        sw = switch()
        reduce_line = lineno() + 1
        sw.at_rank(0).reduce(0, 1, out(0, 0, 1), tb=0)
        sw.at_rank(1).reduce(0, 1, out(1, 0, 1), tb=0)  # another rank: no matter
        Rank(0).copy(out(0, 3, 4), inp(0, 3, 4), tb=1)  # another lane: no matter
        line = lineno() + 2
        with pytest.raises(ValueError) as e:
            Rank(0).copy(out(0, 1, 2), inp(0, 1, 2), tb=0)
        assert_names(e.value, line, [f"switch reduce at {FILE}:{reduce_line}", "glres"])
        assert_emits_nothing(prog, line)


def test_switch_reduce_left_alone_fails_at_json():
    with program(check=False):
        sw = switch()
        sw.at_rank(0).reduce(0, 1, out(0, 0, 1), tb=0)
        sw.at_rank(0).broadcast(out(0, 0, 1), 0, 1, tb=0)  # fused: glres
        reduce_line = lineno() + 1
        sw.at_rank(1).reduce(0, 1, out(1, 0, 1), tb=0)
        with pytest.raises(ValueError) as e:
            JSON()
        assert_names(e.value, reduce_line, ["not followed by the broadcast of its result"])


def test_unpaired_channel_fails_at_json_naming_its_line():
    """Whether a channel gets its pair shows only at the end: JSON() names the line that
    made the channel without one (the executor refuses an unpaired channel)."""
    with program(check=False):
        MemoryChannel(1, 0)
        MemoryChannel(0, 1)  # pairs with the first
        line = lineno() + 1
        c = MemoryChannel(1, 0)  # the second from 0 to 1: none back
        c.signal()
        with pytest.raises(ValueError) as e:
            JSON()
        assert_names(e.value, line, ["memory channel 1 from rank 0 to rank 1", "no memory channel 1 from rank 1 to "
                                     "rank 0", "unpaired"])


def test_a_good_program_still_compiles():
    """The checks refuse nothing that is right: an allgather with scratch, packets, a
    pipeline, a switch glres and ports compiles (the checker off: no handshakes)."""
    with program("LL", check=False) as prog:
        s = {r: Rank(r).Buffer(2) for r in range(N)}
        mem = {(r, p): MemoryChannel(p, r) for r in range(N) for p in range(N) if p != r}
        port = {(r, p): PortChannel(p, r) for r in range(N) for p in range(N) if p != r}
        for (r, p), c in mem.items():
            c.put_packets(s[p][0:1], inp(r, 0, 1))
        for r in range(N):
            Rank(r).unpack_packets(out(r, 0, 1), s[r][0:1])
            Rank(r).copy_packets(s[r][1:2], inp(r, 1, 2))
        for (r, p), c in port.items():
            c.put_packets(s[p][1:2], s[r][1:2])
            c.put(out(p, 2, 3), inp(r, 2, 3))
            c.flush()
        with Loop.iteration(unit=64, num_chunks=2):
            Rank(0).copy(out(0, 4, 6), inp(0, 4, 6))
        sw = switch()
        sw.at_rank(0).reduce(0, 1, out(0, 5, 6))
        sw.at_rank(0).broadcast(out(0, 5, 6), 0, 1)
        plan, _ = prog.compile()
    names = {op["name"] for g in plan["gpus"] for tb in g["threadblocks"] for op in tb["ops"]}
    assert {"ppkt", "upkt", "cpkt", "put", "flush", "pipeline", "glres"} <= names, names


def lineno():
    import sys

    return sys._getframe(1).f_lineno


def test_lane_limits_fail_at_the_line_that_goes_past():
    """0.9's per-lane lists hold 16 channels of a type and 16 remote buffers of an
    access type, and a rank has 16 barriers: a pinned op that would need more fails at
    its line; a free one, at JSON(), which names the line of the op that goes past."""
    n = 18
    with CollectiveProgram("wide", AllGather(n, 1, False), n, check=False) as prog:
        chans = [MemoryChannel(p, 0) for p in range(1, n)]
        for c in chans[:16]:
            c.signal(relaxed=True, tb=0)
        line = lineno() + 2
        with pytest.raises(ValueError) as e:
            chans[16].signal(relaxed=True, tb=0)
        assert_names(e.value, line, ["lane 0 of rank 0 would use 17 memory channels", "at most 16"])
        assert_emits_nothing(prog, line)
    with CollectiveProgram("wide_free", AllGather(n, 1, False), n, check=False, max_lanes=1):
        chans = [MemoryChannel(p, 0) for p in range(1, n)]
        for p in range(1, n):
            MemoryChannel(0, p)
        for c in chans:
            line = lineno() + 1
            c.signal(relaxed=True)  # one lane for all: the compiler may open no other
        with pytest.raises(ValueError) as e:
            JSON()
        assert_names(e.value, line, ["rank 0 lane 0 uses 17 memory channels", "max_lanes"])
    n = 10
    with CollectiveProgram("buffers", lang.TestCollective(n, 1, 1), n, check=False):
        chans = {p: MemoryChannel(p, 0) for p in range(1, n)}
        for p, c in chans.items():
            c.put(Rank(p).get_output_buffer()[0:1], inp(0, 0, 1), tb=0)
        for p in range(1, 8):
            chans[p].put(Rank(p).get_input_buffer()[0:1], inp(0, 0, 1), tb=0)
        line = lineno() + 2
        with pytest.raises(ValueError) as e:
            chans[8].put(Rank(8).get_input_buffer()[0:1], inp(0, 0, 1), tb=0)
        assert_names(e.value, line, ["would use 17 memory remote buffers"])
    with CollectiveProgram("barriers", AllGather(2, 1, False), 2, check=False, instances=2):
        for t in range(8):
            Rank(0).barrier(tb_list=[t, t + 1])
        line = lineno() + 2
        with pytest.raises(ValueError) as e:
            Rank(0).barrier(tb_list=[0, 2])
        assert_names(e.value, line, ["would need 9 barriers", "times 2 instances", "has 16"])


def test_a_lane_of_more_than_64_ops_fails_at_json_naming_the_line():
    """With the checker off too (the checker refuses such lanes itself)."""
    with CollectiveProgram("long", AllReduce(1, 1, False), 1, check=False):
        for _ in range(40):
            line = lineno() + 1
            Rank(0).copy(Rank(0).get_output_buffer()[0:1], Rank(0).get_input_buffer()[0:1], tb=0)
        with pytest.raises(ValueError) as e:
            JSON()
        assert_names(e.value, line, ["rank 0 lane 0 has more than 64 ops", "at most 64"])
