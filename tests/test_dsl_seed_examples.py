"""The design seed's DSL examples, as written, compile to checked plans and give the
right values through comm.execute on host memory, with ranks as processes.

The seed (the project's design document for the DSL) shows five programs:

* two-rank synchronisation (relaxedSignal / relaxedWait around a ring of channels);
* a two-rank allreduce through a SwitchChannel (group_load_reduce / group_store);
* a pipeline whose two stages are ordered by a rank's semaphore;
* the same pipeline inside ``Loop.iteration``;
* a two-rank allreduce over a SwitchChannel with three thread blocks and semaphores,
  inside ``Loop.iteration``.

Each function below holds one of them. The lines between ``# -- the seed's example``
and ``# -- end of the seed's example`` are the seed's, with only its imports changed
(the module's ``from ucxx_go.language import ...``). The seed writes no program
around them and leaves some names free; every line this file adds is marked
``# added:`` and says why. Where the seed's own text is wrong, the test shows the
checker refusing it as written and runs it with the smallest fix, which its comment
names.

Rank counts: an example runs at every count it supports from 2 to 8. The
synchronisation, both SwitchChannel allreduces (``rank_list=[0, 1]``, ``nranks =
2``) and the semaphore pipeline (``Rank(0)``, ``rank=0``) are written for two ranks
and run at 2 only. The Loop pipeline leaves its ranks free; it runs as a ring
(``dst_rank = (src_rank + 1) % nranks``, the seed's own ring from the
synchronisation example) on 2 to 8 ranks.

Every plan is also run in the reference interpreter (tests/plan_reference.py) over
back-to-back calls, except the SwitchChannel ones: the interpreter has no NVLS ops
(their test skips, naming that). tests/gpu/test_dsl_seed_examples_gpu.py runs the
same plans on device memory.
"""

import json
import subprocess

import numpy as np
import pytest

from _support import LAUNCH, rank_script
from plan_reference import run_plan
from ucxx_go import language as lang
from ucxx_go.language import JSON, AllReduce, Buffer, Channel, CollectiveProgram, Loop, Rank, SwitchChannel


@pytest.fixture(autouse=True)
def fresh_context():
    """Overrides conftest's: only the launched ranks open a ucxx_go context."""
    yield


# -- the examples ----------------------------------------------------------------------------


def sync_example(nranks=2):
    """Two ranks synchronise with each other: each enters, signals, waits."""
    # added: the program around the example (a collective that moves no data), and
    # nranks as a parameter (the seed's `nranks = 2`) so that a test can show three
    # ranks refused
    with CollectiveProgram("seed_sync", lang.TestCollective(nranks, 1, 1), nranks):
        # -- the seed's example (but for `nranks = 2`, above)
        for i in range(nranks):
            src_rank = i
            dst_rank = (i + 1) % nranks
            channel = Channel(dst_rank, src_rank, channel_type=Channel.memory)
            channel.relaxedSignal(tb=0, sync=None)
            channel.relaxedWait(tb=0, sync="after")
        # -- end of the seed's example
        return json.loads(JSON())  # added: the checked plan


def switch_allreduce_example():
    """The two-rank allreduce through a SwitchChannel: inputs into scratch, the group
    reduced and stored back chunk by chunk (rank i reduces chunk i), scratch out."""
    with CollectiveProgram("seed_switch_allreduce", AllReduce(2, 1, False), 2):  # added: the program
        # -- the seed's example
        # allreduce for 2 ranks.
        # 1. copy data from input buffer to scratch buffer
        # 2. allreduce the data in scratch buffer
        # 3. copy data from scratch buffer to output buffer
        nvls_chan = SwitchChannel(rank_list=[0, 1], buffer=Buffer.scratch)
        nranks = 2
        for i in range(nranks):
            src_rank = i
            dst_rank = (i + 1) % nranks
            chan = Channel(dst_rank, src_rank, channel_type=Channel.memory)
            rank = Rank(i)
            input_buffer = rank.get_input_buffer()
            output_buffer = rank.get_output_buffer()
            scratch_buffer = rank.Buffer(nranks)
            for offset in range(nranks):
                # copy data to scratch buffer
                dst_chunk = scratch_buffer[offset:offset+1]
                src_chunk = input_buffer[offset:offset+1]
                rank.copy(dst_chunk, src_chunk, tb=0)
            chan.signal(tb=0, sync="before")
            chan.wait(tb=0, sync="after")

            # do allreduce in scratch buffer
            buffer_offset = src_rank
            nvls_chan.group_load_reduce(buffer_offset, 1, op="sum", tb=0)
            nvls_chan.group_store(buffer_offset, 1, tb=0)

            # copy data back to output buffer
            chan.signal(tb=0, sync="before")
            chan.wait(tb=0, sync="after")
            for offset in range(nranks):
                dst_buffer = output_buffer[offset:offset+1]
                src_buffer = scratch_buffer[offset:offset+1]
                rank.copy(dst_buffer, src_buffer, tb=0)
        # -- end of the seed's example
        return json.loads(JSON())  # added


def semaphore_pipeline_example():
    """Rank 0 copies its input into scratch on lane 0 and releases a semaphore; lane 1
    acquires it and puts the scratch into rank 1's output."""
    # added: the program, and the names the fragment leaves free. Its text says the
    # first stage copies "from input buffer to scratch buffer" and the second sends
    # "from scratch buffer to other peers": rank 0's input goes through its scratch
    # into rank 1's output. The fragment names rank 0 (`Rank(0)`, `rank=0`) and one
    # peer, so it is a two-rank program.
    with CollectiveProgram("seed_semaphore_pipeline", lang.TestCollective(2, 1, 1), 2):
        src_rank, dst_rank, channel_type = 0, 1, Channel.memory
        scratch = Rank(src_rank).Buffer(1)
        # added: rank 1's end of the channel (the fragment's `channel` pairs with it):
        # rank 1 says it has entered the call, so rank 0 may store into it, and waits
        # below until rank 0 has published the put
        peer_end = Channel(src_rank, dst_rank, channel_type)
        peer_end.relaxedSignal(tb=0)
        dst_chunk, src_chunk = scratch[0:1], Rank(src_rank).get_input_buffer()[0:1]  # added: stage 1's chunks
        # -- the seed's example
        sem = Rank.Semaphore(rank=0, size=1)
        rank = Rank(0)
        rank.copy(dst_chunk, src_chunk, tb=0)
        sem.release(tb=0)
        channel = Channel(dst_rank, src_rank, channel_type)
        dst_chunk, src_chunk = Rank(dst_rank).get_output_buffer()[0:1], scratch[0:1]  # added: stage 2's chunks
        channel.relaxedWait(tb=1)  # added: rank 1 has entered the call
        sem.acquire(tb=1)
        channel.put(dst_chunk, src_chunk, tb=1)
        # -- end of the seed's example
        channel.signal(tb=1, sync="before")  # added: publish the put ...
        peer_end.wait(tb=0, sync="after")  # added: ... and rank 1 returns only once it is there
        return json.loads(JSON())  # added


def loop_pipeline_example(nranks):
    """The semaphore pipeline inside Loop.iteration, on every rank of a ring: rank r's
    input goes through its scratch into rank r+1's output, window by window."""
    # added: the program; each rank runs the fragment with dst_rank its successor
    # (the ring of the seed's synchronisation example); the fragment's free names
    with CollectiveProgram(f"seed_loop_pipeline_{nranks}", lang.TestCollective(nranks, 1, 1), nranks):
        channel_type = Channel.memory
        # added: the end of the channel each rank's predecessor puts through (the k-th
        # channel from A to B pairs with the k-th from B to A). With two ranks the
        # fragment's own channels are each other's pair; with more, rank q needs one
        # to its predecessor.
        back = {} if nranks == 2 else {q: Channel((q - 1) % nranks, q, channel_type) for q in range(nranks)}
        for src_rank in range(nranks):
            dst_rank = (src_rank + 1) % nranks
            scratch = Rank(src_rank).Buffer(1)
            # added: the fragment passes `rank` to Rank.Semaphore before it binds it to
            # Rank(src_rank): here it is the rank's number, which is what it means
            rank = src_rank
            dst_chunk, src_chunk = scratch[0:1], Rank(src_rank).get_input_buffer()[0:1]  # added: stage 1's chunks
            # -- the seed's example
            sem = Rank.Semaphore(rank=rank, size=1)
            rank = Rank(src_rank)
            with Loop.iteration(unit=2**20, num_chunks=1) as iter:  # noqa: A001 (the seed's name)
                # the dst_chunk and src_chunk size but same as loop context
                rank.copy(dst_chunk, src_chunk, tb=0, iter_context=iter)
                sem.release(tb=0)
                channel = Channel(dst_rank, src_rank, channel_type)
                dst_chunk, src_chunk = Rank(dst_rank).get_output_buffer()[0:1], scratch[0:1]  # added: stage 2's
                recv_end = back.get(src_rank, channel)  # added: this rank's end of its predecessor's channel
                recv_end.relaxedSignal(tb=1)  # added: this rank has entered the window, the predecessor may store
                channel.relaxedWait(tb=1)  # added: and so has the successor
                sem.acquire(tb=1)
                channel.put(dst_chunk, src_chunk, tb=1, iter_context=iter)
            # -- end of the seed's example
            channel.signal(tb=1, sync="before")  # added: publish the puts ...
            recv_end.wait(tb=1, sync="after")  # added: ... and return once the predecessor's are here
        return json.loads(JSON())  # added


def loop_switch_allreduce_example(fix_offset=True, fix_tb=True):
    """The two-rank allreduce over a SwitchChannel with three thread blocks (copy in,
    reduce in scratch, copy out) ordered by semaphores, inside Loop.iteration.

    As written the reduce goes wrong twice; fix_offset and fix_tb repair one each:

    * the group ops take `offset`, the leftover of the copy loop above them: both
      ranks reduce chunk 1 (racing), and nobody chunk 0. The seed's loop-free
      allreduce passes `buffer_offset = src_rank`; fix_offset passes src_rank.
    * they run on tb=0, while the text gives the reduction to "the second
      thread-block", the one that acquires sem0 and then signals chan1: on tb 0 that
      signal does not wait for the stores, and the peer reads its scratch before
      they are there. fix_tb puts them on tb=1.
    """
    with CollectiveProgram("seed_loop_switch_allreduce", AllReduce(2, 1, False), 2):  # added: the program
        scratch_buffer_size = 2  # added: the seed leaves it free; the example copies nranks chunks into it
        # -- the seed's example
        nvls_chan = SwitchChannel(rank_list=[0, 1], buffer=Buffer.scratch)
        nranks = 2
        for i in range(nranks):
            src_rank = i
            dst_rank = (i + 1) % nranks
            chan = Channel(dst_rank, src_rank, channel_type=Channel.memory)
            chan1 = Channel(dst_rank, src_rank, channel_type=Channel.memory)
            rank = Rank(i)
            sem0 = Rank.Semaphore(rank=i, size=1)
            sem1 = Rank.Semaphore(rank=i, size=1)
            input_buffer = rank.get_input_buffer()
            output_buffer = rank.get_output_buffer()
            scratch_buffer = rank.Buffer(scratch_buffer_size)
            with Loop.iteration(unit=2**20, num_chunks=1) as iter:  # noqa: A001 (the seed's name)
                # copy data to scratch buffer
                for offset in range(nranks):
                    dst_chunk = scratch_buffer[offset:offset+1]
                    src_chunk = input_buffer[offset:offset+1]
                    rank.copy(dst_chunk, src_chunk, tb=0, iter_context=iter)
                chan.signal(tb=0, sync="before")
                chan.wait(tb=0, sync="after")
                sem0.release(tb=0)

                # do allreduce in scratch buffer
                sem0.acquire(tb=1, sync="after")
                offset = src_rank if fix_offset else offset  # added: the fix (see above)
                tb = 1 if fix_tb else 0  # added: the fix (see above); the seed writes tb=0 in the next two lines
                nvls_chan.group_load_reduce(offset, size=1, op="sum", tb=tb, iter_context=iter)
                nvls_chan.group_store(offset, size=1, tb=tb, iter_context=iter)
                chan1.signal(tb=1, sync="before")
                sem1.release(tb=1)

                # copy data back to output buffer
                sem1.acquire(tb=2)
                chan1.wait(tb=2, sync="after")
                for index in range(nranks):
                    dst_chunk = output_buffer[index:index+1]
                    src_chunk = scratch_buffer[index:index+1]
                    rank.copy(dst_chunk, src_chunk, tb=2, iter_context=iter)
        # -- end of the seed's example
        return json.loads(JSON())  # added


# name -> (builder, what each rank's output must hold: "untouched", "allreduce",
# "from rank 0" (rank 1's output is rank 0's input, rank 0's is untouched), "ring"
# (rank r's output is rank r-1's input))
EXAMPLES = {
    "sync": (sync_example, "untouched"),
    "switch_allreduce": (switch_allreduce_example, "allreduce"),
    "semaphore_pipeline": (semaphore_pipeline_example, "from rank 0"),
    "loop_pipeline": (loop_pipeline_example, "ring"),
    "loop_switch_allreduce": (loop_switch_allreduce_example, "allreduce"),
}
TWO_RANK = ["sync", "switch_allreduce", "semaphore_pipeline", "loop_switch_allreduce"]
ANY_RANKS = ["loop_pipeline"]


def build(name, n):
    fn, _ = EXAMPLES[name]
    return fn(n) if name in ANY_RANKS else fn()


# What each rank's output holds after a call, from the inputs xs and the outputs before
# it (outs0). Source text, because the rank scripts run it too.
WANT_OUTPUTS = """
def want_outputs(kind, xs, outs0):
    n = len(xs)
    if kind == "untouched":
        return list(outs0)
    if kind == "allreduce":
        return [sum(xs)] * n
    if kind == "from rank 0":
        return [outs0[0], xs[0]]
    if kind == "ring":
        return [xs[(r - 1) % n] for r in range(n)]
    raise ValueError(kind)
"""
_ns = {}
exec(WANT_OUTPUTS, _ns)
want_outputs = _ns["want_outputs"]


# -- compiled and checked ----------------------------------------------------------------------

CASES = [(name, 2) for name in TWO_RANK] + [(name, n) for name in ANY_RANKS for n in range(2, 9)]


@pytest.mark.parametrize("name,n", CASES, ids=[f"{a}-{n}" for a, n in CASES])
def test_example_compiles_and_checks(name, n):
    plan = build(name, n)  # JSON() ran the checker
    assert len(plan["gpus"]) == n
    lang.check_plan(plan)  # and the plan alone passes it too
    import ucxx_go

    assert ucxx_go.ExecutionPlan.from_json(json.dumps(plan)).ranks == n  # the Go parser takes it


def test_switch_examples_compile_to_glres():
    """group_load_reduce + group_store is one glres per rank on its reduced chunk,
    windowed inside the Loop's pipeline, on the lane the program gives it."""
    plan = switch_allreduce_example()
    for r, g in enumerate(plan["gpus"]):
        ops = [op for tb in g["threadblocks"] for op in tb["ops"] if op["name"] == "glres"]
        assert len(ops) == 1 and ops[0]["src_buff"][0]["index"] == r and ops[0]["dst_buff"][0]["index"] == r
    plan = loop_switch_allreduce_example()
    for r, g in enumerate(plan["gpus"]):
        lanes = g["threadblocks"]
        assert len(lanes) == 3 and all(len(tb["ops"]) == 1 and tb["ops"][0]["name"] == "pipeline" for tb in lanes)
        inner = [x["name"] for x in lanes[1]["ops"][0]["ops"] if x["name"] != "nop"]
        assert inner == ["sem_acquire", "glres", "signal", "sem_release"], inner
        glres = [x for x in lanes[1]["ops"][0]["ops"] if x["name"] == "glres"][0]
        assert glres["src_buff"][0]["index"] == r
    # the semaphores are the seed's own: the compiler added none
    assert [len(g["semaphores"]) for g in plan["gpus"]] == [2, 2]


def test_sync_example_is_two_rank():
    """The synchronisation example is inherently two-rank: on a ring of three, rank i's
    channel to i+1 has no channel back from i+1 to pair with (each rank waits on the
    channel it signals)."""
    with pytest.raises(ValueError, match="has no memory channel 0 from rank 1 to rank 0 to pair with"):
        sync_example(3)


def test_loop_switch_allreduce_as_written_is_refused():
    """The seed's three-thread-block allreduce as written (see its docstring): the
    checker refuses it, and each of the two fixes alone is not enough."""
    for fix_offset, fix_tb in ((False, False), (True, False), (False, True)):
        with pytest.raises(lang.PlanCheckError) as e:
            loop_switch_allreduce_example(fix_offset=fix_offset, fix_tb=fix_tb)
        assert e.value.kind in ("race", "result"), (fix_offset, fix_tb, e.value)
        assert "test_dsl_seed_examples.py" in str(e.value)  # it names the example's lines


# -- in the reference interpreter ----------------------------------------------------------------

ELEMS = 8  # float32 elements per chunk: 32 bytes, a multiple of the 16-byte alignment


@pytest.mark.parametrize("name,n", CASES, ids=[f"{a}-{n}" for a, n in CASES])
def test_example_in_the_reference_interpreter(name, n):
    """Three calls back to back, lanes in a random order: each rank's output after
    each call is what the example computes."""
    plan = build(name, n)
    kind = EXAMPLES[name][1]
    g = plan["gpus"][0]
    calls = 3
    for seed in range(3):
        rng = np.random.default_rng(seed)
        runs = [[rng.integers(1, 100, g["input_chunks"] * ELEMS).astype(np.float32) for _ in range(n)]
                for _ in range(calls)]
        ins = [np.zeros(g["input_chunks"] * ELEMS * 4, np.uint8) for _ in range(n)]
        outs = [np.full(g["output_chunks"] * ELEMS, -1 - r, np.float32).view(np.uint8) for r in range(n)]
        before, got = {}, {}

        def start(c, r):
            ins[r][:] = runs[c][r].view(np.uint8)
            before[(c, r)] = outs[r].view(np.float32).copy()

        def end(c, r):
            got[(c, r)] = outs[r].view(np.float32).copy()

        try:
            res = run_plan(plan, ins, outs, np.float32, "sum", schedule="random", seed=seed, calls=calls,
                           before_call=start, after_call=end)
        except NotImplementedError as e:
            assert "switch" in str(e) or "NVLS" in str(e), e
            pytest.skip(f"tests/plan_reference.py has no NVLS (switch channel) ops: {e}")
        assert res.leftover_signals == {} and res.semaphores == {}
        for c in range(calls):
            want = want_outputs(kind, runs[c], [before[(c, r)] for r in range(n)])
            for r in range(n):
                np.testing.assert_array_equal(got[(c, r)], want[r], err_msg=f"{name} n={n} call {c} rank {r}")


# -- on processes, through comm.execute ------------------------------------------------------------

# A rank script: argv[1] is a JSON file {name: [plan text, kind]}, argv[2] the chunk
# sizes (float32 elements, comma-separated); every rank runs each plan CALLS times back
# to back at each size and checks its output with numpy. With GPU = True the buffers
# are CuPy arrays on the rank's device (tests/gpu).
RANK_BODY = """
import asyncio, json, os, sys, numpy as np, ucxx_go
GPU = @GPU@
if GPU:
    import cupy as cp
CASES = json.load(open(sys.argv[1]))
CALLS = 3
SIZES = [int(x) for x in sys.argv[2].split(",")]

def data(k, call, q, count):
    return np.random.default_rng([k, call, q, count]).integers(1, 100, count).astype(np.float32)

@WANT@
async def main():
    comm = await ucxx_go.Communicator.init(timeout=60)
    r, n = comm.rank, comm.size
    if GPU:
        cp.cuda.Device(r % cp.cuda.runtime.getDeviceCount()).use()
    dev = cp.asarray if GPU else np.array
    host = cp.asnumpy if GPU else np.array
    done = 0
    for k, (name, (text, kind)) in enumerate(sorted(CASES.items())):
        plan = ucxx_go.ExecutionPlan.from_json(text)
        g = json.loads(text)["gpus"][r]
        for count in SIZES:
            y = dev(np.full(g["output_chunks"] * count, -1 - r, np.float32))
            for call in range(CALLS):
                xs = [data(k, call, q, g["input_chunks"] * count) for q in range(n)]
                outs0 = [np.full(g["output_chunks"] * count, -1 - q, np.float32) for q in range(n)]
                if call:  # what the outputs held before this call: the last call's result
                    outs0 = want_outputs(kind, last, outs0)
                x = dev(xs[r])
                await comm.execute(plan, x, y)
                want = want_outputs(kind, xs, outs0)[r]
                assert np.array_equal(host(y), want), (name, count, call, r, host(y)[:8], want[:8])
                assert np.array_equal(host(x), xs[r]), (name, "the input changed")
                last = xs
                done += 1
    os.write(1, f"rank {r} ok {done}\\n".encode())
    comm.close()

asyncio.run(main())
"""


def rank_body(gpu):
    return RANK_BODY.replace("@GPU@", repr(gpu)).replace("@WANT@", WANT_OUTPUTS)


SMALL = 8  # float32 elements per chunk: 32 bytes
LARGE = 5 << 18  # 2.5 MiB a chunk: the Loops' pipelines run three windows of their 1 MiB unit


def run_on_ranks(tmp_path, names, n, sizes=(SMALL,), gpu=False, timeout=60):
    """Launch n ranks that run the examples `names` (compiled here) at each chunk size
    and check them; the launcher's output."""
    cases = {name: [json.dumps(build(name, n)), EXAMPLES[name][1]] for name in names}
    plans = tmp_path / "plans.json"
    plans.write_text(json.dumps(cases))
    script = rank_script(tmp_path, rank_body(gpu))
    r = subprocess.run(LAUNCH + ["-n", str(n), "--timeout", str(timeout), script, str(plans),
                                 ",".join(map(str, sizes))], timeout=timeout + 30,
                       capture_output=True, text=True)
    assert r.returncode == 0, (names, n, r.returncode, r.stdout[-3000:], r.stderr[-6000:])
    want = len(names) * len(sizes) * 3  # calls
    assert r.stdout.count(f" ok {want}\n") == n, r.stdout
    return r.stdout


def test_two_rank_examples_on_processes(tmp_path):
    """The two-rank examples, and the Loop pipeline's ring at two ranks, on two
    processes: three calls each at 32 bytes and 2.5 MiB a chunk (several windows)."""
    run_on_ranks(tmp_path, TWO_RANK + ANY_RANKS, 2, (SMALL, LARGE))


@pytest.mark.parametrize("n", range(3, 9))
def test_loop_pipeline_on_processes(tmp_path, n):
    """The Loop pipeline's ring on 3 to 8 processes (several windows at 3; small
    chunks past that, to keep 8 processes on a 2-core VM to seconds)."""
    run_on_ranks(tmp_path, ANY_RANKS, n, (SMALL, LARGE) if n == 3 else (SMALL,))


def test_seed_switch_spelling_mistakes_fail_at_their_line():
    """The seed's SwitchChannel spelling refuses what cannot run: a group_store with no
    group_load_reduce before it, a group op whose rank (the previous op's) is outside
    the group, a peer's scratch that never grows to the chunks the group op reaches."""
    with pytest.raises(ValueError, match=r"test_dsl_seed_examples.py:\d+: .*group_store on rank 0: no "):
        with CollectiveProgram("no_load", AllReduce(2, 1, False), 2):
            sw = SwitchChannel(rank_list=[0, 1], buffer=Buffer.scratch)
            Rank(0).Buffer(1)
            sw.group_store(0, 1, tb=0, rank=0)
    with pytest.raises(ValueError, match="previous op, rank 2, which is not in the switch channel's group"):
        with CollectiveProgram("outside", AllReduce(3, 1, False), 3):
            sw = SwitchChannel(rank_list=[0, 1], buffer=Buffer.scratch)
            Rank(2).copy(Rank(2).get_output_buffer()[0:1], Rank(2).get_input_buffer()[0:1])
            sw.group_load_reduce(0, 1)
    with pytest.raises(ValueError, match=r"test_dsl_seed_examples.py:\d+: chunks 1:2 of the switch channel's "
                                         r"scratch buffers out of range: rank 1's has 1 in the whole program"):
        with CollectiveProgram("short", AllReduce(2, 1, False), 2):
            sw = SwitchChannel(rank_list=[0, 1], buffer=Buffer.scratch)
            Rank(0).Buffer(2)
            Rank(1).Buffer(1)
            sw.group_load_reduce(1, 1, tb=0, rank=0)
            sw.group_store(1, 1, tb=0, rank=0)
            JSON()
