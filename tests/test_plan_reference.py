"""The reference plan interpreter (plan_reference.py): hand-written plans, every golden
built-in plan of core/builtin/testdata, and plans the MSCCL++ 0.9 DSL emitted
(core/plan/testdata/mscclpp-v0.9.0), each checked against numpy's answer."""

import copy
import functools
import json
import re
from pathlib import Path

import numpy as np
import pytest

from plan_reference import (
    Deadlock,
    MessageSizeError,
    PlanFormatError,
    chunk_layout,
    run_plan,
)

ROOT = Path(__file__).resolve().parent.parent
GOLDENS = sorted((ROOT / "core" / "builtin" / "testdata").glob("*.json"))
MSCCLPP = ROOT / "core" / "plan" / "testdata" / "mscclpp-v0.9.0"

UFUNC = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}


@pytest.fixture(autouse=True)
def fresh_context():
    """Overrides conftest's fixture of the same name: these tests open no ucxx_go
    context, and its reset and garbage collection after each of them would take most
    of the module's time."""
    yield


# -- data and numpy's answers -----------------------------------------------------------------


def random_values(rng, dtype, count, op):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        if op == "prod":
            return rng.uniform(0.5, 1.5, count).astype(dtype)
        return rng.uniform(-10, 10, count).astype(dtype)
    if op == "prod":
        return rng.choice(np.array([-2, -1, 1, 2, 3], dtype), count)
    return rng.integers(-1000, 1000, count).astype(dtype)


def as_bytes(a):
    return np.frombuffer(a.tobytes(), np.uint8).copy()


def reduce_all(arrays, op):
    return functools.reduce(lambda a, b: UFUNC[op](a, b), arrays)


class Call:
    """One collective call's buffers on every rank, built the way the collective's
    in-place convention says (docs/plan-format.md section 9), and numpy's answer."""

    def __init__(self, collective, n, in_elems, out_elems, dtype, op, inplace, root, rng):
        self.dtype = np.dtype(dtype)
        size = self.dtype.itemsize
        data = [random_values(rng, dtype, in_elems, op) for _ in range(n)]
        self.inputs, self.outputs = [], []
        for r in range(n):
            junk = rng.integers(0, 256, out_elems * size, dtype=np.uint8)  # must all be overwritten
            if not inplace:
                self.inputs.append(as_bytes(data[r]))
                self.outputs.append(junk)
            elif collective == "allgather":
                junk[r * in_elems * size:(r + 1) * in_elems * size] = as_bytes(data[r])
                self.outputs.append(junk)
                self.inputs.append(junk[r * in_elems * size:(r + 1) * in_elems * size])
            elif collective == "reducescatter":
                buf = as_bytes(data[r])
                self.inputs.append(buf)
                self.outputs.append(buf[r * out_elems * size:(r + 1) * out_elems * size])
            else:
                buf = as_bytes(data[r])
                self.inputs.append(buf)
                self.outputs.append(buf)
        m = out_elems
        if collective == "allreduce":
            self.want = [reduce_all(data, op)] * n
        elif collective == "allgather":
            self.want = [np.concatenate(data)] * n
        elif collective == "reducescatter":
            self.want = [reduce_all([d[r * m:(r + 1) * m] for d in data], op) for r in range(n)]
        elif collective == "alltoall":
            b = in_elems // n
            self.want = [np.concatenate([data[i][r * b:(r + 1) * b] for i in range(n)]) for r in range(n)]
        elif collective == "broadcast":
            self.want = [data[root]] * n
        elif collective == "reduce":
            # Only the root's output is written; the others keep what they held.
            self.want = [self.outputs[r].view(self.dtype).copy() for r in range(n)]
            self.want[root] = reduce_all(data, op)
        else:
            raise ValueError(collective)

    def check(self, what):
        for r, (got, want) in enumerate(zip(self.outputs, self.want)):
            got = got.view(self.dtype)
            if self.dtype.kind == "f":
                # Sums of values up to 10 in another order: absolute error near 0.
                tol = 1e-5 if self.dtype.itemsize == 4 else 1e-12
                np.testing.assert_allclose(got, want, rtol=tol, atol=20 * tol, err_msg=f"{what}: rank {r}")
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"{what}: rank {r}")


def run_collective(plan, elems_per_chunk, dtype, op, schedule="round_robin", seed=0, root=0, **kw):
    """Run a collective plan at `elems_per_chunk` elements per chunk and check the
    outputs against numpy; returns the RunResult."""
    g = plan["gpus"][0]
    n = len(plan["gpus"])
    call = Call(plan["collective"], n, g["input_chunks"] * elems_per_chunk, g["output_chunks"] * elems_per_chunk,
                dtype, op, plan["inplace"], root, np.random.default_rng(seed))
    res = run_plan(plan, call.inputs, call.outputs, dtype, op, schedule=schedule, seed=seed, **kw)
    call.check(f"{plan['name']} {np.dtype(dtype)} {op} {elems_per_chunk}/chunk {schedule}")
    return res


def run_calls(plan, calls, elems_per_chunk, dtype, op, seed, root=0):
    """Run a collective plan `calls` times back to back on the same buffers, every
    rank loading the next call's data as soon as its own call has ended, and check
    each call's outputs against numpy."""
    g = plan["gpus"][0]
    n = len(plan["gpus"])
    rng = np.random.default_rng(seed)
    runs = [Call(plan["collective"], n, g["input_chunks"] * elems_per_chunk, g["output_chunks"] * elems_per_chunk,
                 dtype, op, plan["inplace"], root, rng) for _ in range(calls)]
    inputs, outputs = list(runs[0].inputs), list(runs[0].outputs)  # the buffers every call uses
    taken = [[None] * n for _ in runs]

    def before(c, r):
        if c > 0:
            inputs[r][:] = runs[c].inputs[r]
            outputs[r][:] = runs[c].outputs[r]

    def after(c, r):
        taken[c][r] = outputs[r].copy()

    res = run_plan(plan, inputs, outputs, dtype, op, schedule="random", seed=seed,
                   calls=calls, before_call=before, after_call=after)
    for c, run in enumerate(runs):
        run.outputs = taken[c]
        run.check(f"{plan['name']} call {c}")
    return res


# -- hand-written plans -----------------------------------------------------------------------


def make_plan(gpus, collective="test", protocol="Simple", inplace=False, **top):
    p = {"name": "hand", "collective": collective, "protocol": protocol, "inplace": inplace,
         "reuse_resources": False, "gpus": gpus, "buffer_alignment": 4}
    p.update(top)
    return p


def gpu(r, tbs, ic=1, oc=1, sc=0, channels=None, remote=None, sems=None):
    g = {"id": r, "input_chunks": ic, "output_chunks": oc, "scratch_chunks": sc,
         "channels": channels or [], "remote_buffers": remote or [], "threadblocks": []}
    if sems is not None:
        g["semaphores"] = [{"init_value": v} for v in sems]
    for i, (ops, tbch, tbbuf) in enumerate(tbs):
        tb = {"id": i, "ops": ops, "channels": tbch}
        if tbbuf is not None:
            tb["remote_buffer_refs"] = tbbuf
        g["threadblocks"].append(tb)
    return g


MEM = [{"channel_type": "memory", "channel_ids": [0]}]


def mem_to(peer):
    return [{"channel_type": "memory", "connected_to": [peer]}]


def sig(name, ch=0, ctype="memory"):
    return {"name": name, "channel_ids": [ch], "channel_type": ctype}


def ref(t, i, s=1):
    return {"type": t, "index": i, "size": s}


def rref(b, i, s=1):
    return {"buffer_id": b, "index": i, "size": s}


def swap_plan(release="signal", wait="wait"):
    """Two ranks: each puts its input into the peer's output, then synchronises."""
    gpus = []
    for r in range(2):
        ops = [sig("rlxsignal"), sig("rlxwait"), {"name": "nop"},
               {"name": "put", "src_buff": [ref("i", 0)], "dst_buff": [rref(0, 0)], "channel_type": "memory"},
               {"name": "nop"}, sig(release), sig(wait), {"name": "nop"}]
        gpus.append(gpu(r, [(ops, MEM, [{"access_channel_type": "memory", "remote_buffer_ids": [0]}])],
                        channels=mem_to(1 - r),
                        remote=[{"rank": 1 - r, "type": "o", "access_channel_types": ["memory"]}]))
    return make_plan(gpus)


def two_rank_buffers(nbytes=16, rng=None):
    rng = rng or np.random.default_rng(0)
    ins = [rng.integers(0, 256, nbytes, dtype=np.uint8) for _ in range(2)]
    outs = [np.zeros(nbytes, np.uint8) for _ in range(2)]
    return ins, outs


@pytest.mark.parametrize("schedule,seed", [("round_robin", 0), ("random", 1), ("random", 2)])
def test_swap(schedule, seed):
    ins, outs = two_rank_buffers()
    res = run_plan(swap_plan(), ins, outs, np.uint8, schedule=schedule, seed=seed)
    np.testing.assert_array_equal(outs[0], ins[1])
    np.testing.assert_array_equal(outs[1], ins[0])
    assert res.leftover_signals == {} and res.steps == 16


def test_relaxed_signal_does_not_publish_data():
    """rlxsignal orders execution only: data put before it is not yet visible to the
    peer that waits on it, so a plan relying on it reads stale bytes."""
    plan = swap_plan(release="rlxsignal", wait="rlxwait")
    # The peer copies its output to scratch as soon as its wait returns.
    for r, g in enumerate(plan["gpus"]):
        g["scratch_chunks"] = 1
        g["threadblocks"][0]["ops"].append({"name": "copy", "src_buff": [ref("o", 0)], "dst_buff": [ref("s", 0)]})
    # Rank 1 finishes its put and rlxsignal before rank 0 takes the wait, and cannot
    # release its store before rank 0 copies: rank 0's lane runs first each round.
    ins, outs = two_rank_buffers()
    res = run_plan(plan, ins, outs, np.uint8)
    assert not np.array_equal(res.scratch[0][:16], ins[1])  # copied before the store landed
    np.testing.assert_array_equal(outs[0], ins[1])  # it lands when the lane ends
    ins, outs = two_rank_buffers()
    res = run_plan(plan, ins, outs, np.uint8, delay_remote_writes=False)
    np.testing.assert_array_equal(res.scratch[0][:16], ins[1])


def test_deadlock_names_the_lanes():
    """Both ranks wait before they signal."""
    plan = swap_plan()
    for g in plan["gpus"]:
        ops = g["threadblocks"][0]["ops"]
        ops[5], ops[6] = ops[6], ops[5]
    ins, outs = two_rank_buffers()
    with pytest.raises(Deadlock) as e:
        run_plan(plan, ins, outs, np.uint8)
    assert [b[:4] for b in e.value.blocked] == [(0, 0, 5, "wait"), (1, 0, 5, "wait")]
    assert "rank 0 lane 0 op 5 (wait)" in str(e.value) and "to ranks [1]" in str(e.value)


def test_unpaired_channel_deadlocks():
    """Rank 0 has two channels to rank 1, rank 1 one back: the second never pairs."""
    plan = swap_plan()
    g0 = plan["gpus"][0]
    g0["channels"] = [{"channel_type": "memory", "connected_to": [1, 1]}]
    g0["threadblocks"][0]["channels"] = [{"channel_type": "memory", "channel_ids": [1]}]
    ins, outs = two_rank_buffers()
    with pytest.raises(Deadlock) as e:
        run_plan(plan, ins, outs, np.uint8)
    assert (0, 0, 1, "rlxwait") in [b[:4] for b in e.value.blocked]


def test_barrier_semaphores_and_lanes():
    """One rank, three lanes: lane 0 copies input chunk 0 to scratch and releases a
    semaphore; lane 1 acquires it and reduces scratch + input chunk 1 into output
    chunk 1; all three meet at a barrier before lane 2 copies output chunk 1 to
    chunk 0, twice over (the barrier is used twice)."""
    bar = {"name": "barrier", "barrier_id": 3, "num_threadblocks": 3}
    lanes = [
        ([{"name": "copy", "src_buff": [ref("i", 0)], "dst_buff": [ref("s", 0)]},
          {"name": "sem_release", "semaphore_ids": [0]}, bar, bar], [], None),
        ([{"name": "sem_acquire", "semaphore_ids": [0]},
          {"name": "re", "src_buff": [ref("s", 0), ref("i", 1)], "dst_buff": [ref("o", 1)], "reduce_op": "max"},
          bar, bar], [], None),
        ([bar, {"name": "copy", "src_buff": [ref("o", 1)], "dst_buff": [ref("o", 0)]}, bar], [], None),
    ]
    plan = make_plan([gpu(0, lanes, ic=2, oc=2, sc=1, sems=[0])])
    for schedule, seed in [("round_robin", 0), ("random", 5), ("random", 6)]:
        x = np.array([1, -5, 7, 2, 0, 3], np.int32)
        out = np.zeros(6, np.int32)
        res = run_plan(plan, [as_bytes(x)], [out.view(np.uint8)], np.int32, "sum", schedule=schedule, seed=seed)
        m = np.maximum(x[:3], x[3:])  # the op's reduce_op wins over the call's
        np.testing.assert_array_equal(out, np.concatenate([m, m]))
        assert res.semaphores == {}


def test_pipeline_tbg_and_get():
    """A pipeline copies in 8-byte windows; two lanes each copy half of a chunk with
    tbg_info; rank 1 gets rank 0's output into its own at a different chunk."""
    pipe = {"name": "pipeline", "iter_context": {"unit_size": 8, "num_chunks": 2},
            "ops": [{"name": "copy", "src_buff": [ref("i", 0, 2)], "dst_buff": [ref("o", 0, 2)]}]}
    tbg = [{"name": "copy", "src_buff": [ref("i", 2)], "dst_buff": [ref("o", 2)], "tbg_info": {"tb_id": t, "tbg_size": 2}}
           for t in range(2)]
    g0 = gpu(0, [([pipe, tbg[0], {"name": "nop"}, sig("signal")], MEM, None), ([tbg[1], sig("signal")], [
        {"channel_type": "memory", "channel_ids": [1]}], None)], ic=3, oc=3,
        channels=[{"channel_type": "memory", "connected_to": [1, 1]}])
    get = {"name": "get", "src_buff": [rref(0, 0, 2)], "dst_buff": [ref("o", 1, 2)], "channel_type": "memory"}
    g1 = gpu(1, [([sig("wait"), sig("wait", 1), {"name": "nop"}, get],
                  [{"channel_type": "memory", "channel_ids": [0, 1]}],
                  [{"access_channel_type": "memory", "remote_buffer_ids": [0]}])], ic=3, oc=3,
             channels=[{"channel_type": "memory", "connected_to": [0, 0]}],
             remote=[{"rank": 0, "type": "o", "access_channel_types": ["memory"]}])
    plan = make_plan([g0, g1])
    ins = [np.arange(48, dtype=np.uint8), np.zeros(48, np.uint8)]
    outs = [np.zeros(48, np.uint8), np.zeros(48, np.uint8)]
    run_plan(plan, ins, outs, np.uint8, schedule="random", seed=3)
    np.testing.assert_array_equal(outs[0], ins[0])
    np.testing.assert_array_equal(outs[1][16:], ins[0][:32])  # chunks 0-1 of rank 0 at chunks 1-2


@pytest.mark.parametrize("packet_type", ["LL16", "LL8"])
def test_packets(packet_type):
    """LL: rank r packs its input into rank 1-r's scratch (ppkt), which unpacks it
    into its output (upkt) as soon as the flags are there; rank 0 also reduces the
    packets with its input (repkt) into scratch, data chunk 1."""
    gpus = []
    for r in range(2):
        ops = [{"name": "ppkt", "src_buff": [ref("i", 0)], "dst_buff": [rref(0, 0)], "channel_type": "memory"},
               {"name": "upkt", "src_buff": [ref("s", 0)], "dst_buff": [ref("o", 0)]}]
        if r == 0:
            ops.append({"name": "repkt", "src_buff": [ref("i", 0), ref("s", 0)], "dst_buff": [ref("s", 3)]})
        gpus.append(gpu(r, [(ops, [], [{"access_channel_type": "memory", "remote_buffer_ids": [0]}])], sc=4,
                        remote=[{"rank": 1 - r, "type": "s", "access_channel_types": ["memory"]}]))
    plan = make_plan(gpus, protocol="LL")
    rng = np.random.default_rng(1)
    ins = [rng.integers(0, 100, 8, dtype=np.int32).view(np.uint8) for _ in range(2)]
    outs = [np.zeros(32, np.uint8) for _ in range(2)]
    res = run_plan(plan, ins, outs, np.int32, packet_type=packet_type, schedule="random", seed=2)
    np.testing.assert_array_equal(outs[0], ins[1])
    np.testing.assert_array_equal(outs[1], ins[0])
    # Scratch holds packets at twice their data offset: data chunk 3 lies past them.
    np.testing.assert_array_equal(res.scratch[0][96:128].view(np.int32), ins[0].view(np.int32) + ins[1].view(np.int32))
    assert res.scratch[0][:64].view(np.uint32)[1] == 1  # the first packet's flag


def test_errors():
    ins, outs = two_rank_buffers(nbytes=6)
    with pytest.raises(MessageSizeError):  # 6 bytes are not whole 4-byte units
        run_plan(swap_plan(), ins, outs, np.uint8)
    plan = swap_plan()
    plan["gpus"][0]["threadblocks"][0]["ops"].append({"name": "glres", "src_buff": [], "dst_buff": []})
    ins, outs = two_rank_buffers()
    with pytest.raises(NotImplementedError):
        run_plan(plan, ins, outs, np.uint8)
    plan = swap_plan()
    plan["gpus"][1]["threadblocks"][0]["ops"][3]["dst_buff"][0]["index"] = 1  # past the peer's output
    with pytest.raises(PlanFormatError):
        run_plan(plan, ins, outs, np.uint8)
    plan = swap_plan()
    plan["gpus"][0]["threadblocks"][0]["ops"].append({"name": "frobnicate"})
    with pytest.raises(PlanFormatError):
        run_plan(plan, ins, outs, np.uint8)


def test_chunk_layout_section_8_7():
    """The worked numbers of docs/plan-format.md 8.7."""
    plan = make_plan([gpu(0, [], ic=3, oc=3, sc=5)], collective="allreduce", buffer_alignment=16)
    lay = chunk_layout(plan, 0, 960, 960)
    assert lay.chunk == 320
    assert lay.ref("i", 1, 2) == (320, 640) and lay.ref("s", 4, 1) == (1280, 320)
    with pytest.raises(MessageSizeError):
        chunk_layout(plan, 0, 1000, 1000)
    plan = make_plan([gpu(0, [], ic=1, oc=2)], collective="allgather", buffer_alignment=16)
    assert chunk_layout(plan, 0, 4096, 8192).ref("o", 1, 1) == (4096, 4096)


# -- the built-in plans ------------------------------------------------------------------------

# (dtype, op) pairs cycled through the golden plans, several per plan.
COMBOS = [(np.float32, "sum"), (np.int32, "max"), (np.float64, "prod"), (np.int32, "sum"),
          (np.float32, "max"), (np.float64, "sum"), (np.int32, "prod"), (np.float32, "prod")]


def test_goldens_exist():
    names = {p.name for p in GOLDENS}
    for coll_alg in ["allreduce.allpairs", "allreduce.ring", "allgather.allpairs", "reducescatter.allpairs",
                     "alltoall.pairwise", "broadcast.chain", "broadcast.tree", "reduce.chain", "reduce.tree",
                     "reduce.direct"]:
        for n in (2, 3, 4, 5, 8):
            for variant in ("inplace", "outofplace"):
                assert any(x.startswith(f"ucxxgo.{coll_alg}.n{n}.") and x.endswith(f".{variant}.json") for x in names), \
                    (coll_alg, n, variant)


@pytest.mark.parametrize("path", GOLDENS, ids=[p.stem.removeprefix("ucxxgo.") for p in GOLDENS])
def test_golden(path):
    plan = json.loads(path.read_text())
    root = int(m.group(1)) if (m := re.search(r"\.root(\d+)\.", plan["name"])) else 0
    i = GOLDENS.index(path)
    for k, (elems, schedule) in enumerate([(1, "round_robin"), (3, "random")]):
        dtype, op = COMBOS[(2 * i + k) % len(COMBOS)]
        res = run_collective(plan, elems, dtype, op, schedule, seed=i * 7 + k, root=root)
        assert res.leftover_signals == {}, plan["name"]


def test_golden_random_schedules():
    """A few plans under many random schedules: the result must not change."""
    picks = [p for p in GOLDENS if re.search(r"(ring\.n5\.c2|allpairs\.n8\.g2|tree\.n8\.root1\.c2)\.inplace", p.name)]
    assert len(picks) >= 3
    for path in picks:
        plan = json.loads(path.read_text())
        root = int(m.group(1)) if (m := re.search(r"\.root(\d+)\.", plan["name"])) else 0
        for seed in range(8):
            run_collective(plan, 2, np.int32, "sum", "random", seed=seed, root=root)


def test_golden_needs_its_waits():
    """Dropping one wait from a built-in plan either deadlocks or gives a wrong
    answer: the delayed-store model sees the missing synchronisation."""
    path = next(p for p in GOLDENS if p.name == "ucxxgo.allreduce.ring.n4.c1.outofplace.json")
    plan = json.loads(path.read_text())
    broken = copy.deepcopy(plan)
    ops = broken["gpus"][2]["threadblocks"][0]["ops"]
    k = next(i for i, o in enumerate(ops) if o["name"] == "wait")
    ops[k] = {"name": "nop"}
    for seed in range(4):
        with pytest.raises((AssertionError, Deadlock)):
            run_collective(broken, 1, np.int32, "sum", "random", seed=seed)
        run_collective(plan, 1, np.int32, "sum", "random", seed=seed)


@pytest.mark.parametrize("path", [p for p in GOLDENS if re.search(r"\.n[2-5]\.", p.name)],
                         ids=lambda p: p.stem.removeprefix("ucxxgo."))
def test_golden_back_to_back(path):
    """Three calls in a row on the same buffers, ranks drifting apart: the start-of-call
    handshake keeps each call's stores out of the buffers a peer still uses."""
    plan = json.loads(path.read_text())
    root = int(m.group(1)) if (m := re.search(r"\.root(\d+)\.", plan["name"])) else 0
    seed = GOLDENS.index(path)
    res = run_calls(plan, 3, 2, np.int32, "sum", seed, root=root)
    assert res.leftover_signals == {}


def test_handshake_is_needed():
    """Without its handshake, a pipelined chain broadcast lets the root's next call
    overwrite outputs its children are still forwarding: some schedule shows it."""
    path = next(p for p in GOLDENS if p.name == "ucxxgo.broadcast.chain.n4.root3.c3.outofplace.json")
    plan = json.loads(path.read_text())
    for seed in range(3):
        run_calls(plan, 3, 1, np.int32, "sum", seed, root=3)
    for g in plan["gpus"]:
        for tb in g["threadblocks"]:
            tb["ops"] = [o for o in tb["ops"] if o["name"] not in ("rlxsignal", "rlxwait")]
    failures = 0
    for seed in range(10):
        try:
            run_calls(plan, 3, 1, np.int32, "sum", seed, root=3)
        except AssertionError:
            failures += 1
    assert failures > 0


# -- plans of the MSCCL++ 0.9 DSL ----------------------------------------------------------------

# Collective plans of the fixtures that use no NVLS ops, with the elements per chunk
# to run them at (their alignment is 16 bytes: 4 float32 elements).
MSCCLPP_PLANS = {
    "single_node__allreduce.json": 4,  # rres, in place, 4 ranks, 8 lanes
    "multi_node__allgather.json": 4,  # put and pwsf over port channels, 8 ranks
    "allreduce_2r_example.json": 8,
    "single_node__allgather.json": 4,
    "single_node__allgather_tbg.json": 8,  # tbg_info, barrier
    "multi_node__allgather_tbg.json": 8,
    "multi_node__reducescatter.json": 4,  # rre, pws
    "single_node__alltoall__alltoall.json": 4,
    "single_node__alltoall__alltoall_pipeline.json": 4,  # pipeline, semaphores
    "single_node__alltoall__alltoall_ring.json": 4,
    "single_node__alltoall__alltoall_ring_oop.json": 4,
    "single_node__allreduce_pkt.json": 4,  # LL packets
    "single_node__allreduce_naivy.json": 4,
    "single_node__allgather_pkt.json": 4,
    "single_node__allgather_pkt_rppkt.json": 4,
    "multi_node__allgather_pkt.json": 4,
    "multi_node__reducescatter_pkt.json": 4,
    # LL, 16 ranks on two nodes, reuse_resources, double scratch buffer, tbg_info,
    # barriers; its min_message_size is 1 KiB: 16 chunks of 16 elements.
    "allreduce_2nodes_1K_64K.json": 16,
}


@pytest.mark.parametrize("name", sorted(MSCCLPP_PLANS))
def test_mscclpp_plan(name):
    plan = json.loads((MSCCLPP / name).read_text())
    res = run_collective(plan, MSCCLPP_PLANS[name], np.float32, "sum", "random", seed=11)
    assert res.leftover_signals == {}


@pytest.mark.parametrize("name", sorted(MSCCLPP_PLANS))
def test_mscclpp_plan_back_to_back(name):
    """Two calls in a row: LL plans see the next launch's flag (and scratch half)."""
    plan = json.loads((MSCCLPP / name).read_text())
    run_calls(plan, 2, MSCCLPP_PLANS[name], np.float32, "sum", seed=5)


def test_mscclpp_nvls_plan_is_not_implemented():
    plan = json.loads((MSCCLPP / "single_node__allreduce_nvls_zero_copy.json").read_text())
    with pytest.raises(NotImplementedError):
        run_collective(plan, 4, np.float32, "sum")
