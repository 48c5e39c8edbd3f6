"""ucxx_go.language: DSL programs compile to plans the Go parser accepts and the
reference interpreter (plan_reference.py) runs to numpy's answers."""

import functools
import json

import numpy as np
import pytest

import ucxx_go
from plan_reference import run_plan
from ucxx_go.language import (
    JSON,
    AllGather,
    AllReduce,
    Channel,
    CollectiveProgram,
    Loop,
    MemoryChannel,
    PortChannel,
    Rank,
    ReduceScatter,
    SyncType,
)
from ucxx_go import language as lang

UFUNC = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}


@pytest.fixture(autouse=True)
def fresh_context():
    """Overrides conftest's: only ExecutionPlan.from_json touches the Go side."""
    yield


# -- running plans in the reference interpreter -------------------------------------------


def expected(collective, data, n, out_elems, op):
    red = functools.partial(functools.reduce, UFUNC[op])
    if collective == "allreduce":
        return [red(data)] * n
    if collective == "allgather":
        return [np.concatenate(data)] * n
    if collective == "reducescatter":
        m = out_elems
        return [red([d[r * m:(r + 1) * m] for d in data]) for r in range(n)]
    if collective == "alltoall":
        b = len(data[0]) // n
        return [np.concatenate([data[i][r * b:(r + 1) * b] for i in range(n)]) for r in range(n)]
    raise ValueError(collective)


def run_reference(plan, elems=4, dtype=np.float32, op="sum", calls=2, seed=0, schedule="random"):
    """Run `plan` `calls` times back to back in the interpreter on random data laid out
    by the collective's in-place convention; check every call against numpy."""
    n = len(plan["gpus"])
    g = plan["gpus"][0]
    ic, oc = g["input_chunks"] * elems, g["output_chunks"] * elems
    rng = np.random.default_rng(seed)
    size = np.dtype(dtype).itemsize
    coll, inplace = plan["collective"], plan["inplace"]
    runs = [[rng.integers(1, 5, ic).astype(dtype) for _ in range(n)] for _ in range(calls)]
    outs = [rng.integers(0, 256, oc * size, dtype=np.uint8) for _ in range(n)]
    ins = []
    for r in range(n):
        if not inplace:
            ins.append(np.zeros(ic * size, np.uint8))
        elif coll == "allgather":
            ins.append(outs[r][r * ic * size:(r + 1) * ic * size])
        elif coll == "reducescatter":
            ins.append(np.zeros(ic * size, np.uint8))
            outs[r] = ins[r][r * oc * size:(r + 1) * oc * size]
        else:
            ins.append(outs[r])
    got = [[None] * n for _ in range(calls)]

    def before(c, r):
        ins[r][:] = runs[c][r].view(np.uint8)

    def after(c, r):
        got[c][r] = outs[r].copy().view(dtype)

    res = run_plan(plan, ins, outs, dtype, op, schedule=schedule, seed=seed, calls=calls,
                   before_call=before, after_call=after)
    for c in range(calls):
        want = expected(coll, runs[c], n, oc, op)
        for r in range(n):
            np.testing.assert_array_equal(got[c][r], want[r], err_msg=f"{plan['name']} call {c} rank {r}")
    assert res.leftover_signals == {}
    return res


def parses(text):
    return ucxx_go.ExecutionPlan.from_json(text)


def ops_of(plan, rank, lane):
    return [op["name"] for op in plan["gpus"][rank]["threadblocks"][lane]["ops"]]


# -- item 1: the language ------------------------------------------------------------------


def seed_allreduce(n=3, tb=0, **kw):
    """An all-pairs allreduce written with the seed's names: scatter input blocks into
    the peers' scratch, reduce this rank's block, store it into every peer's output."""
    with CollectiveProgram("seed_allreduce", AllReduce(n, 1, False), n, **kw):
        scratch = {r: Rank(r).Buffer(n - 1) for r in range(n)}
        chans = {(r, p): Channel(p, r, channel_type=Channel.memory) for r in range(n) for p in range(n) if p != r}

        def slot(src, dst):  # where src's data lands in dst's scratch
            return src if src < dst else src - 1

        for (r, p), ch in chans.items():
            ch.relaxedSignal(tb=tb, sync=None)
        for (r, p), ch in chans.items():
            ch.relaxedWait(tb=tb, sync="after")
        for (r, p), ch in chans.items():
            inp = Rank(r).get_input_buffer()
            s = slot(r, p)
            ch.put(scratch[p][s:s + 1], inp[p:p + 1], tb=tb)
        for (r, p), ch in chans.items():
            ch.signal(tb=tb, sync="before")
        for (r, p), ch in chans.items():
            ch.wait(tb=tb, sync="after")
        for r in range(n):
            rank = Rank(r)
            out, inp = rank.get_output_buffer(), rank.get_input_buffer()
            rank.copy(out[r:r + 1], inp[r:r + 1], tb=tb)
            for s in range(n - 1):
                rank.reduce(out[r:r + 1], scratch[r][s:s + 1], op="sum", tb=tb)
        for (r, p), ch in chans.items():
            ch.put(Rank(p).get_output_buffer()[r:r + 1], Rank(r).get_output_buffer()[r:r + 1], tb=tb)
        for (r, p), ch in chans.items():
            ch.signal(tb=tb, sync="before")
        for (r, p), ch in chans.items():
            ch.wait(tb=tb)
        return JSON()


def test_seed_names_pinned():
    text = seed_allreduce(3)
    parses(text)
    plan = json.loads(text)
    assert [len(g["threadblocks"]) for g in plan["gpus"]] == [1, 1, 1]
    # the two reductions fuse into one re with three sources, the re and the puts of its
    # result into one res; signals and waits on both channels into one op each
    names = [x for x in ops_of(plan, 0, 0) if x != "nop"]
    assert names == ["rlxsignal", "rlxwait", "put", "signal", "wait", "copy", "res", "signal", "wait"]
    res = plan["gpus"][0]["threadblocks"][0]["ops"]
    res = [op for op in res if op["name"] == "res"][0]
    assert len(res["src_buff"]) == 3 and len(res["dst_buff"]) == 3 and res["channel_type"] == "memory"
    run_reference(plan)


def mscclpp_allpairs(n, inplace=True, tbs=2):
    """An all-pairs allreduce in MSCCL++ 0.9's style (each rank reduces its block
    reading the peers' inputs, then stores the sum into them)."""
    with CollectiveProgram("allpairs_rres", AllReduce(n, tbs, inplace), n):
        ch = {}
        for r in range(n):
            for t in range(tbs):
                for p in range(n):
                    if p != r:
                        ch[(p, r, t)] = MemoryChannel(p, r)
        for r in range(n):
            for t in range(tbs):
                for p in range(n):
                    if p != r:
                        ch[(p, r, t)].signal(t, relaxed=True)
                for p in range(n):
                    if p != r:
                        ch[(p, r, t)].wait(t, data_sync=SyncType.after, relaxed=True)
        for r in range(n):
            inp = Rank(r).get_input_buffer()
            for t in range(tbs):
                i = r * tbs + t
                for p in range(n):
                    if p != r:
                        ch[(p, r, t)].reduce(inp[i:i + 1], [Rank(p).get_input_buffer()[i:i + 1]], t)
                for p in range(n):
                    if p != r:
                        ch[(p, r, t)].put(Rank(p).get_input_buffer()[i:i + 1], inp[i:i + 1], t)
        for r in range(n):
            for t in range(tbs):
                for p in range(n):
                    if p != r:
                        ch[(p, r, t)].signal(t, data_sync=SyncType.before)
                for p in range(n):
                    if p != r:
                        ch[(p, r, t)].wait(t)
        return JSON()


def test_mscclpp_style_program_fuses_and_runs():
    text = mscclpp_allpairs(3)
    parses(text)
    plan = json.loads(text)
    names = ops_of(plan, 0, 0)
    # the handshake's relaxed signals and waits fuse, reduce + puts become one rres
    assert names == ["nop", "rlxsignal", "nop", "rlxwait", "nop", "rres", "nop", "signal", "nop", "wait", "nop"]
    rres = plan["gpus"][0]["threadblocks"][0]["ops"][5]
    assert rres["channel_type"] == "memory" and len(rres["src_buff"]) == 3 and len(rres["dst_buff"]) == 3
    run_reference(plan)


# -- item 3: the checker -------------------------------------------------------------------


def two_rank_allgather(mutate=None, check=True):
    """A small allgather with a handshake; `mutate` names one thing to get wrong."""
    n = 2
    with CollectiveProgram("ag2", AllGather(n, 1, False), n, check=check) as prog:
        ch = {(r, p): MemoryChannel(p, r) for r in range(n) for p in range(n) if p != r}
        for (r, p), c in ch.items():
            c.signal(tb=0, relaxed=True)
            c.wait(tb=0, relaxed=True, data_sync=SyncType.after)
        for r in range(n):
            rank = Rank(r)
            rank.copy(rank.get_output_buffer()[r:r + 1], rank.get_input_buffer()[0:1], tb=0)
        for (r, p), c in ch.items():
            index = r if mutate != "offset" or r != 1 else 0
            c.put(Rank(p).get_output_buffer()[index:index + 1], Rank(r).get_input_buffer()[0:1], tb=0)
            if mutate != "signal" or r != 0:
                c.signal(tb=0, relaxed=mutate == "relaxed")
            if mutate != "wait" or r != 1:
                c.wait(tb=0)
        return prog.compile()


def test_checker_accepts_and_rejects():
    plan, prov = two_rank_allgather()
    report = lang.check_plan(plan, prov)
    assert report.calls == 2 and report.steps > 0
    with pytest.raises(lang.PlanCheckError) as e:
        two_rank_allgather("offset")
    # the put lands on the other chunk: the checker names the output chunk and the op
    assert e.value.kind in ("result", "race")
    with pytest.raises(lang.PlanCheckError) as e:
        two_rank_allgather("relaxed")
    assert e.value.kind == "race" and "test_language.py" in str(e.value)
    with pytest.raises(lang.PlanCheckError) as e:
        two_rank_allgather("signal")
    assert e.value.kind == "deadlock" and "waits for a signal" in str(e.value)
    with pytest.raises(lang.PlanCheckError) as e:
        two_rank_allgather("wait")
    assert e.value.kind in ("unbalanced", "race")


def test_checker_names_the_dsl_line():
    """A put into the peer's output that nothing publishes: the error names the op,
    the rank, the lane and the line of this file that wrote it."""
    n = 2
    with pytest.raises(lang.PlanCheckError) as e:
        with CollectiveProgram("bad", AllGather(n, 1, False), n):
            for r in range(n):
                p = 1 - r
                c = MemoryChannel(p, r)
                rank = Rank(r)
                rank.copy(rank.get_output_buffer()[r:r + 1], rank.get_input_buffer()[0:1], tb=0)
                c.put(Rank(p).get_output_buffer()[r:r + 1], rank.get_input_buffer()[0:1], tb=1)  # LINE-PUT
            JSON()
    err = e.value
    line = [i for i, x in enumerate(open(__file__).read().splitlines(), 1) if x.endswith("# LINE-PUT")][0]
    assert err.kind == "race" and f"test_language.py:{line}" in str(err)
    assert err.rank is not None and err.lane is not None and err.op_index is not None


def test_wrong_result_is_named():
    """Reduce-scatter that reduces the wrong block: the result check says which chunk
    holds what."""
    n = 2
    with pytest.raises(lang.PlanCheckError) as e:
        with CollectiveProgram("rs", ReduceScatter(n, 1, False), n):
            scratch = {r: Rank(r).Buffer(1) for r in range(n)}
            for r in range(n):
                p = 1 - r
                c = MemoryChannel(p, r)
                c.signal(tb=0, relaxed=True)
                c.wait(tb=0, relaxed=True)
                c.put(scratch[p][0:1], Rank(r).get_input_buffer()[r:r + 1], tb=0)  # should be block p
                c.signal(tb=0)
                c.wait(tb=0)
                rank = Rank(r)
                rank.reduce(rank.get_input_buffer()[r:r + 1], [scratch[r][0:1]], tb=0,
                            dst_chunk=rank.get_output_buffer()[0:1])
            JSON()
    assert e.value.kind == "result"
    assert "in[0][1] + in[1][1]" in str(e.value) or "in[0][0] + in[1][0]" in str(e.value)


def test_checker_on_mscclpp_fixtures():
    """The plans MSCCL++ 0.9's DSL emitted (core/plan/testdata): its collectives
    check, but for the NVLS one whose multimem stores only relaxed signals follow."""
    import pathlib

    fix = pathlib.Path(__file__).resolve().parent.parent / "core" / "plan" / "testdata" / "mscclpp-v0.9.0"
    good = bad = 0
    for f in sorted(fix.glob("*.json")):
        if f.name.startswith("unit_tests"):
            continue
        plan = json.loads(f.read_text())
        if f.name == "single_node__allreduce_nvls_zero_copy.json":
            with pytest.raises(lang.PlanCheckError, match="race"):
                lang.check_plan(plan)
            bad += 1
            continue
        lang.check_plan(plan)
        good += 1
    assert good == 21 and bad == 1


def test_seed_pipeline_with_rank_semaphore():
    """The seed's pipeline: copy into scratch on lane 0, release; acquire, put on lane
    1, window by window. The user's semaphore orders the lanes: nothing is added."""
    n = 2
    with CollectiveProgram("seed_pipe", AllGather(n, 1, False), n) as prog:
        scratch = {r: Rank(r).Buffer(1) for r in range(n)}
        for r in range(n):
            q = 1 - r
            rank = Rank(r)
            sem = Rank.Semaphore(rank=r, size=1)
            channel = Channel(q, r, channel_type=Channel.memory)
            channel.relaxedSignal(tb=1)
            channel.relaxedWait(tb=1)
            rank.copy(rank.get_output_buffer()[r:r + 1], rank.get_input_buffer()[0:1], tb=2)
            with Loop.iteration(unit=2**20, num_chunks=1) as it:
                rank.copy(scratch[r][0:1], rank.get_input_buffer()[0:1], tb=0, iter_context=it)
                sem.release(tb=0)
                sem.acquire(tb=1)
                channel.put(Rank(q).get_output_buffer()[r:r + 1], scratch[r][0:1], tb=1, iter_context=it)
            channel.signal(tb=1, sync="before")
            channel.wait(tb=1, sync="after")
        plan, _ = prog.compile()
    assert [len(g["semaphores"]) for g in plan["gpus"]] == [1, 1]
    lanes = plan["gpus"][0]["threadblocks"]
    assert [x["name"] for x in lanes[0]["ops"][0]["ops"] if x["name"] != "nop"] == ["copy", "sem_release"]
    parses(json.dumps(plan))
    run_reference(plan, elems=8)


def test_port_channels_put_with_signal_and_flush():
    n = 3
    with CollectiveProgram("port_ag", AllGather(n, 1, False), n) as prog:
        ch = {(r, p): PortChannel(p, r) for r in range(n) for p in range(n) if p != r}
        for c in ch.values():
            c.signal()
        for c in ch.values():
            c.wait()
        for r in range(n):
            Rank(r).copy(Rank(r).get_output_buffer()[r:r + 1], Rank(r).get_input_buffer()[0:1])
        for (r, p), c in ch.items():
            if p == (r + 1) % n:
                c.put_with_signal(Rank(p).get_output_buffer()[r:r + 1], Rank(r).get_input_buffer()[0:1])
            else:
                c.put(Rank(p).get_output_buffer()[r:r + 1], Rank(r).get_input_buffer()[0:1])
                c.signal()
        for c in ch.values():
            c.wait()
        for c in ch.values():
            c.flush()
        plan, _ = prog.compile()
    assert count_ops(plan, "pws") == n and count_ops(plan, "flush") == n * (n - 1)
    parses(json.dumps(plan))
    run_reference(plan, elems=8)


# -- item 2: lanes the compiler chooses ------------------------------------------------------


def count_ops(plan, name):
    n = 0
    for g in plan["gpus"]:
        for tb in g["threadblocks"]:
            for op in tb["ops"]:
                n += op["name"] == name
                n += sum(x["name"] == name for x in op.get("ops", []))
    return n


def test_auto_lanes_insert_semaphores():
    """The seed's allreduce without tb: one lane per channel, the reduction where its
    inputs are, semaphores wherever a lane reads what another wrote."""
    plan = json.loads(seed_allreduce(3, tb=None))
    parses(json.dumps(plan))
    assert all(len(g["threadblocks"]) == 3 for g in plan["gpus"])
    assert count_ops(plan, "sem_acquire") > 0 and count_ops(plan, "sem_release") > 0
    run_reference(plan)
    # every semaphore the compiler added is needed: without any one of them, a race
    for r, g in enumerate(plan["gpus"]):
        for sid in range(len(g["semaphores"])):
            bad = json.loads(json.dumps(plan))
            for tb in bad["gpus"][r]["threadblocks"]:
                for op in tb["ops"]:
                    if op["name"].startswith("sem_") and sid in op["semaphore_ids"]:
                        op["semaphore_ids"].remove(sid)
                tb["ops"] = [op for op in tb["ops"] if op.get("semaphore_ids", [0])]
            with pytest.raises(lang.PlanCheckError, match="race"):
                lang.check_plan(bad)


def test_reads_never_wait():
    with CollectiveProgram("reads", lang.TestCollective(1, 2, 2), 1) as prog:
        rank = Rank(0)
        inp, out = rank.get_input_buffer(), rank.get_output_buffer()
        rank.copy(out[0:1], inp[0:1])
        rank.copy(out[1:2], inp[0:1])  # reads what the first reads: a lane of its own, no sync
        plan, _ = prog.compile()
    assert len(plan["gpus"][0]["threadblocks"]) == 2 and count_ops(plan, "sem_acquire") == 0
    with CollectiveProgram("war", lang.TestCollective(1, 2, 2), 1) as prog:
        rank = Rank(0)
        inp, out = rank.get_input_buffer(), rank.get_output_buffer()
        rank.copy(out[0:1], inp[0:1])
        rank.copy(out[1:2], inp[0:1])
        rank.copy(inp[0:1], inp[1:2])  # overwrites what both read: after both
        plan, _ = prog.compile()
    assert count_ops(plan, "sem_acquire") == 1 and count_ops(plan, "sem_release") == 1


def pipelined_allgather(pin, n=2):
    """Copy into scratch on one lane, put from scratch on another, window by window."""
    t = (lambda k: k) if pin else (lambda k: None)
    with CollectiveProgram("pipe_ag", AllGather(n, 2, False), n) as prog:
        scratch = {r: Rank(r).Buffer(2) for r in range(n)}
        ch = {(r, q): Channel(q, r) for r in range(n) for q in range(n) if q != r}
        for c in ch.values():
            c.relaxedSignal(tb=t(1))
            c.relaxedWait(tb=t(1))
        with Loop.iteration(unit=1 << 16, num_chunks=2) as it:
            for (r, q), c in ch.items():
                rank = Rank(r)
                rank.copy(scratch[r][0:2], rank.get_input_buffer()[0:2], tb=t(0), iter_context=it)
                c.put(Rank(q).get_output_buffer()[2 * r:2 * r + 2], scratch[r][0:2], tb=t(1), iter_context=it)
                c.signal(tb=t(1), sync="before")
                c.wait(tb=t(1), sync="after")
        for r in range(n):
            rank = Rank(r)
            rank.copy(rank.get_output_buffer()[2 * r:2 * r + 2], rank.get_input_buffer()[0:2], tb=t(2))
        return prog.compile()


@pytest.mark.parametrize("pin", [True, False])
def test_pipelines_get_semaphores_per_window(pin):
    plan, _ = pipelined_allgather(pin)
    parses(json.dumps(plan))
    pipes = [op for tb in plan["gpus"][0]["threadblocks"] for op in tb["ops"] if op["name"] == "pipeline"]
    assert len(pipes) == 2
    inner = sorted(x["name"] for p in pipes for x in p["ops"] if x["name"].startswith("sem"))
    assert inner == ["sem_acquire", "sem_release"]
    run_reference(plan, elems=8)


def test_mixed_pinned_and_auto():
    """Pinned ops keep their lane; the others find theirs."""
    with CollectiveProgram("mixed", AllReduce(2, 1, False), 2) as prog:
        scratch = {r: Rank(r).Buffer(1) for r in range(2)}
        for r in range(2):
            p = 1 - r
            c = MemoryChannel(p, r)
            rank = Rank(r)
            c.signal(tb=3, relaxed=True)
            c.wait(tb=3, relaxed=True)
            c.put(scratch[p][0:1], rank.get_input_buffer()[p:p + 1], tb=3)
            c.signal()
            c.wait()
            rank.reduce(rank.get_input_buffer()[r:r + 1], [scratch[r][0:1]],
                        dst_chunk=rank.get_output_buffer()[r:r + 1])
            c.put(Rank(p).get_output_buffer()[r:r + 1], rank.get_output_buffer()[r:r + 1])
            c.signal()
            c.wait()
        plan, _ = prog.compile()
    g = plan["gpus"][0]
    assert len(g["threadblocks"]) == 4 and all(not tb["ops"] for tb in g["threadblocks"][:3])
    run_reference(plan)


# -- item 4: built-ins written in the language --------------------------------------------

BUILTINS = [(k, n, inplace) for k in ("allreduce_allpairs", "allreduce_ring", "allreduce_allpairs_pinned",
                                      "allgather", "reduce_scatter", "alltoall")
            for n, inplace in ((2, False), (3, True), (4, False), (5, True))]


@pytest.mark.parametrize("kind,n,inplace", BUILTINS)
def test_builtin_gives_numpys_answer(kind, n, inplace):
    from ucxx_go.language import builtins

    text = builtins.program(kind, n, inplace=inplace, chunks=2 if n == 3 else 1).to_json()
    plan = json.loads(text)
    p = parses(text)
    assert p.ranks == n and p.in_place == inplace
    for dtype, op in ((np.float32, "sum"), (np.int32, "max")):
        run_reference(plan, elems=4, dtype=dtype, op=op, seed=n)


def test_builtin_functions():
    from ucxx_go.language import builtins

    for f in (builtins.allreduce_ring, builtins.allreduce_allpairs, builtins.allgather, builtins.reduce_scatter,
              builtins.alltoall):
        assert parses(f(4, chunks=2)).ranks == 4
    assert json.loads(builtins.allreduce(3, "ring", inplace=True))["inplace"] is True


# -- the checker proven by mutation -------------------------------------------------------


def _lane_ops(plan):
    """(rank, lane, path, op) of every op, pipelines' inner ops included."""
    for g in plan["gpus"]:
        for tb in g["threadblocks"]:
            for i, op in enumerate(tb["ops"]):
                yield g["id"], tb["id"], (i,), op
                for j, x in enumerate(op.get("ops", [])):
                    yield g["id"], tb["id"], (i, j), x


def _op_at(plan, r, lane, path):
    ops = plan["gpus"][r]["threadblocks"][lane]["ops"]
    return ops[path[0]] if len(path) == 1 else ops[path[0]]["ops"][path[1]]


def _remove(plan, r, lane, path, field=None, value=None):
    """Remove value from the op's field list, or the op when it is empty (or no field)."""
    op = _op_at(plan, r, lane, path)
    if field is not None:
        op[field] = [x for x in op[field] if x != value]
        if op[field]:
            return
    ops = plan["gpus"][r]["threadblocks"][lane]["ops"]
    if len(path) == 1:
        del ops[path[0]]
    else:
        del ops[path[0]]["ops"][path[1]]


def _gpu_channel(plan, r, lane, ctype, local):
    tb = plan["gpus"][r]["threadblocks"][lane]
    ids = [c for x in tb["channels"] if x["channel_type"] == ctype for c in x["channel_ids"]]
    return ids[local]


def _peers(plan, r, ctype):
    return [p for x in plan["gpus"][r]["channels"] if x["channel_type"] == ctype for p in x["connected_to"]]


def _pair(plan, r, ctype, g):
    mine = _peers(plan, r, ctype)
    p = mine[g]
    k = mine[:g].count(p)
    back = [i for i, q in enumerate(_peers(plan, p, ctype)) if q == r]
    return p, back[k]


def _memory(plan, r, ref):
    """(space, index) of a local ref under the collective's in-place convention: two
    refs that name the same memory are one chunk (swapping them changes nothing)."""
    t, i = ref["type"], ref["index"]
    if t == "s" or not plan["inplace"]:
        return t, i
    g = plan["gpus"][r]
    if plan["collective"] == "allgather":
        return ("o", r * g["input_chunks"] + i) if t == "i" else ("o", i)
    if plan["collective"] == "reducescatter":
        return ("i", r * g["output_chunks"] + i) if t == "o" else ("i", i)
    return "m", i


def mutants(plan, rng, per_class=6):
    """(class, description, mutated plan): dropped signals, waits, signal/wait pairs,
    barriers (one lane's, or one occurrence on every lane), semaphore release/acquire
    pairs, two chunks swapped between ops, a chunk index moved by one."""
    import copy
    import random

    out = {k: [] for k in ("signal", "wait", "pair", "handshake", "barrier_one", "barrier_all", "semaphore", "swap",
                           "offset")}
    ops = list(_lane_ops(plan))
    sync = {}  # ("s"|"w", rank, type, gpu channel) -> [(lane, path, local id)] in lane order
    for r, lane, path, op in ops:
        if op["name"] in ("signal", "rlxsignal", "wait", "rlxwait"):
            kind = "s" if "signal" in op["name"] else "w"
            for c in op["channel_ids"]:
                g = _gpu_channel(plan, r, lane, op["channel_type"], c)
                sync.setdefault((kind, r, op["channel_type"], g), []).append((lane, path, c, op["name"]))
    for (kind, r, t, g), lst in sync.items():
        for lane, path, c, _ in lst:
            m = copy.deepcopy(plan)
            _remove(m, r, lane, path, "channel_ids", c)
            out["signal" if kind == "s" else "wait"].append((f"rank {r} lane {lane} op {path}: {kind} on {t} {g}", m))
        if kind == "s":
            p, gb = _pair(plan, r, t, g)
            waits = sync.get(("w", p, t, gb), [])
            for k, (lane, path, c, name) in enumerate(lst):
                if k < len(waits):
                    m = copy.deepcopy(plan)
                    wl, wp, wc, wname = waits[k]
                    # remove the later one first: paths stay valid
                    for rr, ll, pp, cc in sorted([(r, lane, path, c), (p, wl, wp, wc)], key=lambda x: x[2],
                                                 reverse=True):
                        _remove(m, rr, ll, pp, "channel_ids", cc)
                    cls = "handshake" if (name, wname) == ("rlxsignal", "rlxwait") else "pair"
                    out[cls].append((f"rank {r} {name} {k} on {t} {g} and its {wname} on rank {p}", m))
    bars = {}
    for r, lane, path, op in ops:
        if op["name"] == "barrier":
            bars.setdefault((r, op["barrier_id"]), {}).setdefault(lane, []).append(path)
    for (r, bid), lanes in bars.items():
        for lane, paths in lanes.items():
            m = copy.deepcopy(plan)
            _remove(m, r, lane, paths[0])
            out["barrier_one"].append((f"rank {r} barrier {bid} on lane {lane}", m))
        for k in range(min(len(p) for p in lanes.values())):
            m = copy.deepcopy(plan)
            for lane, paths in lanes.items():
                _remove(m, r, lane, paths[k])
            out["barrier_all"].append((f"rank {r} barrier {bid}, occurrence {k}, on every lane", m))
    sems = {}
    for r, lane, path, op in ops:
        if op["name"] in ("sem_acquire", "sem_release"):
            for s in op["semaphore_ids"]:
                sems.setdefault((r, s), {}).setdefault(op["name"], []).append((lane, path))
    for (r, s), d in sems.items():
        for k in range(min(len(d.get("sem_release", [])), len(d.get("sem_acquire", [])))):
            m = copy.deepcopy(plan)
            for lane, path in sorted([d["sem_release"][k], d["sem_acquire"][k]], key=lambda x: x[1], reverse=True):
                _remove(m, r, lane, path, "semaphore_ids", s)
            out["semaphore"].append((f"rank {r} semaphore {s}, release/acquire {k}", m))
    data = [(r, lane, path, op) for r, lane, path, op in ops if "src_buff" in op or "dst_buff" in op]
    refs = []  # (rank, lane, path, list name, position, ref)
    for r, lane, path, op in data:
        for lst in ("src_buff", "dst_buff"):
            for i, x in enumerate(op.get(lst, [])):
                if "type" in x:
                    refs.append((r, lane, path, lst, i, x))
    for a in refs:
        for b in refs:
            if a[0] == b[0] and a[3] == b[3] and (a[1], a[2]) < (b[1], b[2]) and a[5]["size"] == b[5]["size"] \
                    and _memory(plan, a[0], a[5]) != _memory(plan, b[0], b[5]):
                m = copy.deepcopy(plan)
                _op_at(m, a[0], a[1], a[2])[a[3]][a[4]], _op_at(m, b[0], b[1], b[2])[b[3]][b[4]] = b[5], a[5]
                out["swap"].append((f"rank {a[0]}: {a[3]} {a[5]} of lane {a[1]} op {a[2]} and {b[5]} of lane "
                                    f"{b[1]} op {b[2]}", m))
    for r, lane, path, lst, i, x in refs:
        g = plan["gpus"][r]
        count = {"i": g["input_chunks"], "o": g["output_chunks"], "s": g["scratch_chunks"]}[x["type"]]
        for d in (1, -1):
            if 0 <= x["index"] + d and x["index"] + d + x["size"] <= count:
                m = copy.deepcopy(plan)
                _op_at(m, r, lane, path)[lst][i]["index"] += d
                out["offset"].append((f"rank {r} lane {lane} op {path} {lst}[{i}] {x} moved by {d}", m))
                break
    for k, lst in out.items():
        rng.shuffle(lst)
        out[k] = lst[:per_class]
    return out


MUTATION_COUNTS = {}
MUTATED = [("allreduce_allpairs", 3, False), ("allreduce_ring", 3, True), ("allreduce_allpairs_pinned", 3, False),
           ("allgather", 3, False), ("reduce_scatter", 3, True), ("alltoall", 3, True)]


@pytest.mark.parametrize("kind,n,inplace", MUTATED)
def test_mutants_are_caught(kind, n, inplace):
    """Every mutant of a built-in's plan is rejected: a dropped signal, wait, signal/wait
    pair, barrier or semaphore pair, two chunks swapped, an offset changed."""
    import random

    from ucxx_go.language import builtins

    plan, prov = builtins.program(kind, n, inplace=inplace).compile()
    lang.check_plan(plan)
    rng = random.Random(kind)
    total = caught = equivalent = 0
    missed = []
    for cls, lst in mutants(plan, rng).items():
        for what, m in lst:
            total += 1
            try:
                lang.check_plan(m)
            except lang.PlanCheckError:
                caught += 1
                continue
            if cls == "handshake":
                # A start-of-call handshake can be redundant: the previous call's last
                # exchange already orders the peer's next stores. Then the plan is still
                # right, and the interpreter must agree.
                run_reference(m, calls=3, seed=total)
                equivalent += 1
                continue
            missed.append(f"{cls}: {what}")
    assert not missed, f"{len(missed)} of {total} mutants passed the checker:\n" + "\n".join(missed)
    assert total >= 20
    MUTATION_COUNTS[kind] = (total, caught, equivalent)


# -- the built-ins on real processes --------------------------------------------------------


def test_builtins_on_processes(tmp_path):
    """Three processes run every built-in through comm.execute, in place and not, and
    get numpy's answers (the plans are built on each rank: the same JSON everywhere)."""
    import subprocess

    from _support import LAUNCH, rank_script

    body = """
        import asyncio, functools, os, numpy as np, ucxx_go
        from ucxx_go.language import builtins
        E = 8  # elements per chunk: 16-byte alignment for 4- and 8-byte types
        UF = {"sum": np.add, "max": np.maximum}

        def data(q, k, dtype, size):
            return np.random.default_rng(1000 * k + q).integers(1, 9, size).astype(dtype)

        async def main():
            comm = await ucxx_go.Communicator.init(timeout=60)
            r, n = comm.rank, comm.size
            k = 0
            for kind in ("allreduce_allpairs", "allreduce_ring", "allreduce_allpairs_pinned", "allgather",
                         "reduce_scatter", "alltoall"):
                for inplace in (False, True):
                    plan = ucxx_go.ExecutionPlan.from_json(builtins.program(kind, n, inplace=inplace).to_json())
                    for dtype, op in (("float32", "sum"), ("int64", "max")):
                        k += 1
                        red = lambda xs: functools.reduce(UF[op], xs)
                        if kind.startswith("allreduce"):
                            xs = [data(q, k, dtype, n * E) for q in range(n)]
                            x = xs[r].copy()
                            y = x if inplace else np.zeros_like(x)
                            await (comm.execute(plan, x, op=op) if inplace else comm.execute(plan, x, y, op=op))
                            want = red(xs)
                        elif kind == "allgather":
                            xs = [data(q, k, dtype, E) for q in range(n)]
                            y = np.zeros(n * E, dtype)
                            if inplace:
                                y[r * E:(r + 1) * E] = xs[r]
                                await comm.execute(plan, y[r * E:(r + 1) * E], y)
                            else:
                                await comm.execute(plan, xs[r].copy(), y)
                            want = np.concatenate(xs)
                        elif kind == "reduce_scatter":
                            xs = [data(q, k, dtype, n * E) for q in range(n)]
                            x = xs[r].copy()
                            y = x[r * E:(r + 1) * E] if inplace else np.zeros(E, dtype)
                            await comm.execute(plan, x, y, op=op)
                            want = red([v[r * E:(r + 1) * E] for v in xs])
                        else:
                            xs = [data(q, k, dtype, n * E) for q in range(n)]
                            x = xs[r].copy()
                            y = x if inplace else np.zeros_like(x)
                            await (comm.execute(plan, x) if inplace else comm.execute(plan, x, y))
                            want = np.concatenate([v[r * E:(r + 1) * E] for v in xs])
                        assert np.array_equal(y, want), (kind, inplace, dtype, op, y, want)
            os.write(1, f"rank {r} ok {k}\\n".encode())
            comm.close()

        asyncio.run(main())
    """
    s = rank_script(tmp_path, body)
    r = subprocess.run(LAUNCH + ["-n", "3", "--timeout", "100", s], timeout=120, capture_output=True, text=True)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    assert r.stdout.count(" ok 24") == 3


def test_call_barrier_makes_the_handshake_unneeded():
    """Without a start-of-call handshake a peer may store into a rank that has not
    entered the call: a race for MSCCL++'s executor, not for ucxx-go's, which
    exchanges every call's fingerprint before any byte moves (call_barrier)."""
    n = 2
    with CollectiveProgram("nohs", AllGather(n, 1, False), n, check=False) as prog:
        for r in range(n):
            p = 1 - r
            c = MemoryChannel(p, r)
            rank = Rank(r)
            rank.copy(rank.get_output_buffer()[r:r + 1], rank.get_input_buffer()[0:1], tb=0)
            c.put(Rank(p).get_output_buffer()[r:r + 1], rank.get_input_buffer()[0:1], tb=0)
            c.signal(tb=0)
            c.wait(tb=0)
        plan, prov = prog.compile()
    with pytest.raises(lang.PlanCheckError, match="before call 0"):
        lang.check_plan(plan, prov)
    lang.check_plan(plan, prov, call_barrier=True)
    run_reference(plan)


def pull_allgather(n=3, done_round=True):
    """Pulling: each rank tells its peers its input is there, they get it, and tell it
    when they are done reading (its caller may overwrite the input after that)."""
    with CollectiveProgram("get_ag", AllGather(n, 1, False), n, check=done_round) as prog:
        ch = {(r, p): MemoryChannel(p, r) for r in range(n) for p in range(n) if p != r}
        for c in ch.values():
            c.relaxedSignal()
        for (r, p), c in ch.items():
            c.relaxedWait()
            c.get(Rank(r).get_output_buffer()[p:p + 1], Rank(p).get_input_buffer()[0:1])
        for r in range(n):
            Rank(r).copy(Rank(r).get_output_buffer()[r:r + 1], Rank(r).get_input_buffer()[0:1])
        if done_round:
            for c in ch.values():
                c.relaxedSignal()
            for c in ch.values():
                c.relaxedWait()
        return prog.compile()


def test_pull_allgather_with_get():
    plan, _ = pull_allgather()
    assert count_ops(plan, "get") == 6
    parses(json.dumps(plan))
    run_reference(plan)
    bad, prov = pull_allgather(done_round=False)
    with pytest.raises(lang.PlanCheckError, match="race") as e:
        lang.check_plan(bad, prov)
    assert "get" in str(e.value) and "caller" in str(e.value)
