"""Random DSL programs (random_dsl.py: generated chunks, channels and lanes) go
through the compiler and the checker, and through the Go executor, and agree with
the plan interpreter (plan_reference.py).

* Every program's plan passes the checker (no race, no deadlock, balanced over two
  calls), the Go parser accepts it, and the interpreter gives one answer under
  several schedules (stores into peers held back until released, or landing at
  once).
* The oracle: for 2, 3 and 4 processes under python -m ucxx_go.launch, every rank
  runs the programs' plans through Communicator.execute and compares its send and
  receive buffers byte for byte with the interpreter's answer (tests/
  test_random_plans.py's harness, many plans per launch).
* Mutations: a program without one of its signals or waits is refused by the
  checker, and the interpreter shows why (a wait that never returns, a signal left
  over); without a signal and the wait that consumes it, it is refused, or else
  the interpreter still gives the program's answer.

To bisect a failure: random_dsl.generate(seed, nranks) rebuilds the program;
rd.program.ops is what it recorded, with the line of random_dsl.py behind each op.
"""

import dataclasses
import json
import random

import numpy as np
import pytest

import ucxx_go
from plan_reference import Deadlock, run_plan
from random_dsl import generate, sync_ops
from random_plans import RandomPlan, make_buffers, reference
from test_random_plans import run_oracle
from ucxx_go import language as lang

SEEDS = range(60)  # in process
ORACLE_PLANS = 32  # per process count


@pytest.fixture(autouse=True)
def fresh_context():
    """Overrides conftest's: only ExecutionPlan.from_json touches the Go side here."""
    yield


def _same(a, b):
    return all(np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1]) for x, y in zip(a, b))


def _features(plan, rd):
    f = {f"dsl:{k}" for k in rd.stats}
    for g in plan["gpus"]:
        for tb in g["threadblocks"]:
            for op in tb["ops"]:
                for o in [op] + op.get("ops", []):
                    f.add(o["name"])
                    if "tbg_info" in o:
                        f.add("tbg_info")
                    if o.get("channel_type") == "port" and o["name"] in ("put", "signal", "wait"):
                        f.add("port " + o["name"])
                    if o["name"] in ("signal", "wait") and len(o["channel_ids"]) > 1:
                        f.add("fused " + o["name"])
    return f


def test_random_programs_check_parse_and_are_deterministic():
    seen, ranks = set(), set()
    for seed in SEEDS:
        rd = generate(seed)
        ranks.add(rd.nranks)
        plan, _ = rd.compile()  # raises PlanCheckError if the checker objects
        ucxx_go.ExecutionPlan.from_json(json.dumps(plan))  # raises PlanError if the Go side refuses it
        rp = rd.random_plan(plan)
        want = reference(rp)
        for schedule, s, delay in [("random", 1, True), ("random", 2, False)]:
            assert _same(want, reference(rp, schedule, s, delay)), f"seed {seed}: {schedule} {s} differs"
        seen |= _features(plan, rd)
    assert ranks == {2, 3, 4}
    every = {"put", "get", "copy", "re", "rre", "res", "rres", "pws", "pwsf", "signal", "wait", "rlxsignal",
             "rlxwait", "flush", "nop", "barrier", "sem_acquire", "sem_release", "pipeline", "tbg_info", "port put",
             "port signal", "port wait", "fused signal", "fused wait", "dsl:semaphore", "dsl:barrier"}
    assert every <= seen, every - seen


@pytest.mark.parametrize("n", [2, 3, 4])
def test_executor_matches_the_interpreter(tmp_path, n):
    """Random programs on n processes: every rank's buffers equal the interpreter's."""
    plans = []
    for seed in range(1000 * n, 1000 * n + ORACLE_PLANS):
        rd = generate(seed, nranks=n)
        plans.append(rd.random_plan(rd.compile()[0]))
    rc, out, err, bad = run_oracle(tmp_path, n, plans)
    assert rc == 0 and out.count(", 0 bad") == n, (
        f"executor and interpreter disagree on {n} ranks (random_dsl.generate(seed, {n})):\n"
        + "\n".join(bad[:30]) + f"\nexit {rc}\n{out[-2000:]}\n{err[-2000:]}")


def _without(rd, drop):
    """The program's plan without the ops in drop, unchecked, and the checker's verdict."""
    prog = rd.program
    ops = prog.ops
    prog.ops = [op for op in ops if op not in drop]
    prog.check = False
    try:
        plan, prov = prog.compile()
    finally:
        prog.ops, prog.check = ops, True
    try:
        lang.check_plan(plan, provenance=prov)
        return plan, None
    except lang.PlanCheckError as e:
        return plan, e


def _partner(rd, sig):
    """The wait that consumes signal op `sig` (the k-th signal of its channel end is
    consumed by the k-th wait of the paired end)."""
    prog = rd.program
    ch = sig.channel
    same = [c for c in prog.channels if (type(c), c.src_rank, c.dst_rank) == (type(ch), ch.src_rank, ch.dst_rank)]
    back = [c for c in prog.channels if (type(c), c.src_rank, c.dst_rank) == (type(ch), ch.dst_rank, ch.src_rank)]
    peer = back[same.index(ch)]
    k = [op for op in prog.ops if op.kind == "signal" and op.channel is ch].index(sig)
    return [op for op in prog.ops if op.kind == "wait" and op.channel is peer][k]


@pytest.mark.parametrize("seed", [3, 11, 29])
def test_dropped_signals_and_waits_are_caught(seed):
    rd = generate(seed)
    good, _ = rd.compile()
    rp = rd.random_plan(good)
    want = reference(rp)
    syncs = sync_ops(rd.program)
    rng = random.Random(seed)
    for victim in rng.sample(syncs, min(6, len(syncs))):
        plan, err = _without(rd, {victim})
        assert err is not None, f"seed {seed}: the checker accepts the program without {victim.describe()} " \
                                f"at {victim.where} on rank {victim.rank}"
        # whatever the checker reports first (a race the missing order opens, the deadlock,
        # the imbalance), the interpreter agrees that the program is wrong: a wait never
        # returns, or a signal is left over
        bufs = [make_buffers(rp, r) for r in range(rp.nranks)]
        with pytest.raises((Deadlock, AssertionError)):
            res = run_plan(plan, [s for s, _ in bufs], [o for _, o in bufs], np.dtype(rp.dtype), rp.interp_op)
            assert res.leftover_signals == {}
    signals = [op for op in syncs if op.kind == "signal"]
    first = {}  # each channel end's first signal: its start-of-call handshake
    for op in signals:
        first.setdefault(op.channel, op)
    hand = list(first.values())
    rest = [op for op in signals if op not in hand]
    caught = 0
    for sig in rng.sample(hand, min(3, len(hand))) + rng.sample(rest, min(3, len(rest))):
        plan, err = _without(rd, {sig, _partner(rd, sig)})
        if err is not None:
            assert err.kind in ("race", "result"), (seed, err.kind, str(err)[:500])
            caught += 1
        else:  # the order it gave came another way too: the answer must not change
            mutant = dataclasses.replace(rp, plan=plan)
            for schedule, s in [("round_robin", 0), ("random", 1), ("random", 2)]:
                assert _same(want, reference(mutant, schedule, s)), (seed, sig.where)
    assert caught >= 1


# -- what the random programs found, each as the smallest program that shows it ------------


def _two_ranks(body, name):
    """A 2-rank TestCollective program: a relaxed handshake on a memory channel pair,
    body(chans, scratch), then an exchange; its plan (checked)."""
    with lang.CollectiveProgram(name, lang.TestCollective(2, 4, 4), 2) as prog:
        s = {r: lang.Rank(r).Buffer(2) for r in range(2)}
        ch = {(r, 1 - r): lang.MemoryChannel(1 - r, r) for r in range(2)}
        for c in ch.values():
            c.relaxedSignal()
        for c in ch.values():
            c.relaxedWait()
        body(ch, s)
        for c in ch.values():
            c.signal()
        for c in ch.values():
            c.wait()
        return prog.compile()


def _deterministic(plan):
    """The interpreter gives one answer under several schedules (as the checker says)."""
    g = plan["gpus"][0]
    rp = RandomPlan(plan=plan, seed=0, nranks=len(plan["gpus"]), mode="oop", in_bytes=16 * g["input_chunks"],
                    out_bytes=16 * g["output_chunks"], dtype="float32", op=None, steps=0)
    want = reference(rp)
    for schedule, s, delay in [("random", 1, True), ("random", 2, False), ("random", 3, True)]:
        assert _same(want, reference(rp, schedule, s, delay))


def _out(r, a, b):
    return lang.Rank(r).get_output_buffer()[a:b]


def _inp(r, a, b):
    return lang.Rank(r).get_input_buffer()[a:b]


def test_a_signal_comes_after_the_reads_of_the_peer_it_ends():
    """Rank 0 gets from rank 1 on lane 1 (pinned): its signal, on the channel's lane,
    says "done reading", so it must come after the get (else rank 1's caller may
    overwrite what is still being read)."""
    def body(ch, s):
        ch[0, 1].get(_out(0, 0, 1), _inp(1, 1, 2), tb=1)
    plan, _ = _two_ranks(body, "read_then_signal")
    lanes = {tb["id"]: [op["name"] for op in tb["ops"]] for tb in plan["gpus"][0]["threadblocks"]}
    home = next(names for names in lanes.values() if "signal" in names)
    assert lanes[1][-1] == "sem_release" and "sem_acquire" in home[:home.index("signal")], lanes
    _deterministic(plan)


def test_a_lane_releases_its_store_into_a_peer_before_reading_it_back():
    """A memory put into the peer, then a read of the same bytes (rre) on the same lane:
    the store is seen once released, so the compiler puts a semaphore release and
    acquire of the lane's own between them."""
    def body(ch, s):
        ch[0, 1].put(s[1][0:1], _inp(0, 0, 1))
        ch[0, 1].reduce(_out(0, 0, 1), [s[1][0:1]])
    plan, prov = _two_ranks(body, "read_back")
    lane = next(tb for tb in plan["gpus"][0]["threadblocks"] if any(op["name"] == "rre" for op in tb["ops"]))
    names = [op["name"] for op in lane["ops"]]
    i, j = names.index("put"), names.index("rre")
    assert "sem_release" in names[i:j] and "sem_acquire" in names[i:j], names
    _deterministic(plan)


def test_a_port_put_over_a_memory_put_waits_for_its_release():
    with lang.CollectiveProgram("mem_then_port", lang.TestCollective(2, 2, 2), 2) as prog:
        mem = {r: lang.MemoryChannel(1 - r, r) for r in range(2)}
        port = {r: lang.PortChannel(1 - r, r) for r in range(2)}
        for c in list(mem.values()) + list(port.values()):
            c.relaxedSignal(tb=0)
        for c in list(mem.values()) + list(port.values()):
            c.relaxedWait(tb=0)
        mem[0].put(_out(1, 0, 1), _inp(0, 0, 1), tb=0)
        port[0].put(_out(1, 0, 1), _inp(0, 1, 2), tb=0)  # the same bytes, after it
        for c in list(mem.values()) + list(port.values()):
            c.signal(tb=0)
        for c in list(mem.values()) + list(port.values()):
            c.wait(tb=0)
        plan, _ = prog.compile()
    assert [op["name"] for op in plan["gpus"][0]["threadblocks"][0]["ops"]].count("sem_release") == 1


def test_op_none_leaves_the_operator_to_the_call():
    """rank.reduce(dst, src, op=None) names no reduce_op (the docs' promise); omitted,
    the reduction is a sum."""
    with lang.CollectiveProgram("ops", lang.TestCollective(1, 2, 2), 1, check=False) as prog:
        lang.Rank(0).reduce(_out(0, 0, 1), _inp(0, 0, 1), op=None)
        lang.Rank(0).reduce(_out(0, 1, 2), _inp(0, 1, 2))
        plan, _ = prog.compile()
    res = [op for tb in plan["gpus"][0]["threadblocks"] for op in tb["ops"] if op["name"] == "re"]
    assert sorted(op.get("reduce_op", "-") for op in res) == ["-", "sum"]
