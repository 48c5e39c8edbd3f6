"""The built-ins are DSL programs: ucxx_go.language.builtins gives, byte for byte, the
golden plans of core/builtin/testdata, which core/builtin's TestGoldens ties to the
Go generators, so DSL == goldens == Go. With a Go toolchain at hand, also
alltoallv and shapes beyond the goldens against the Go generators themselves.
And the collectives the built-ins add (Broadcast, Reduce with their root,
AllToAllV), the DSL's no_fusion and asked-for nops they need, and
allreduce_pipelined (Loop).

If test_goldens_are_fresh fails, the DSL programs and the goldens (and so the Go
generators) have drifted apart: fix the side that is wrong, then regenerate with
``python -m ucxx_go.language.builtins --write`` or ``go test ./core/builtin -run
TestGoldens -update`` and check that the other side agrees.
"""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ucxx_go.language import (
    CollectiveProgram,
    MemoryChannel,
    PlanCheckError,
    Rank,
    check_plan,
    no_fusion,
)
from ucxx_go.language import builtins, collectives
from ucxx_go.language.builtins import Options
from ucxx_go.language.builtins_golden import plan_difference, plan_text

# The repository this test file is in (the package may be installed elsewhere).
GOLDEN_DIR = Path(__file__).resolve().parents[1] / "core" / "builtin" / "testdata"


@pytest.fixture(autouse=True)
def fresh_context():
    """Overrides conftest's: these tests open no ucxx_go context."""
    yield


def test_goldens_are_fresh():
    """Every golden file is, byte for byte, what its DSL program emits (each plan passes
    the checker: compiling runs it), and every file has a program."""
    assert len(builtins.golden_files()) == 274
    stale = builtins.stale_goldens(GOLDEN_DIR)
    assert not stale, (f"{len(stale)} golden plan(s) in {GOLDEN_DIR} are stale against the DSL built-ins "
                       "(python -m ucxx_go.language.builtins --write regenerates them; go test ./core/builtin "
                       "-run TestGoldens must then agree):\n  " + "\n  ".join(f"{f}: {why}" for f, why in stale))


def test_every_algorithm_and_option_is_covered():
    """The goldens reach each algorithm in place and not, and each option it has."""
    cases = builtins.golden_files().values()
    for a in builtins.ALGORITHMS:
        mine = [o for key, n, o in cases if key == a.key]
        assert {o.inplace for o in mine} == {False, True}, a.key
        assert any(o.lanes > 1 for o in mine) or a.key in ("broadcast.chain", "reduce.chain"), a.key
        if a.pipelined:
            assert any(o.chunks > 1 for o in mine), a.key
        if a.rooted:
            assert any(o.root > 0 for o in mine), a.key
        if a.grouped:
            assert any(o.peers_per_lane < 8 for o in mine), a.key
    assert any(".c13." in f for f in builtins.golden_files())  # segment lanes


def _subset(monkeypatch, names):
    files = {f: v for f, v in builtins.golden_files().items() if f in names}
    monkeypatch.setattr(builtins, "golden_files", lambda: files)
    return files


def test_write_and_check_commands(tmp_path, monkeypatch, capsys):
    """--write DIR writes the goldens (and drops files no case makes); --check DIR names
    the stale ones and fails."""
    names = ["ucxxgo.allreduce.ring.n3.c2.inplace.json", "ucxxgo.reduce.tree.n4.root1.c2.outofplace.json",
             "ucxxgo.alltoall.pairwise.n5.g2.inplace.json"]
    _subset(monkeypatch, names)
    (tmp_path / "ucxxgo.gone.n2.outofplace.json").write_text("{}")
    assert builtins.main(["--write", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)
    for f in names:
        assert (tmp_path / f).read_bytes() == (GOLDEN_DIR / f).read_bytes()
    assert builtins.main(["--check", str(tmp_path)]) == 0
    capsys.readouterr()
    plan = json.loads((tmp_path / names[1]).read_text())
    plan["gpus"][2]["threadblocks"][0]["ops"][5]["src_buff"][1]["index"] = 3
    (tmp_path / names[1]).write_text(plan_text(plan))
    assert builtins.main(["--check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert names[1] in out and "ops[5].src_buff[1].index: 0, want 3" in out
    assert names[0] not in out


def test_alltoallv_is_the_pairwise_alltoall_with_blocks_per_call():
    """core/builtin's AllToAllV(n) is alltoall.pairwise's out-of-place plan on one lane,
    renamed, with collective "alltoallv" and "ucxxgo_variable_blocks" (algorithms.go);
    the DSL's alltoallv gives exactly that, and Go parses it."""
    import ucxx_go

    for n in (2, 3, 4, 5, 8):
        golden = json.loads((GOLDEN_DIR / f"ucxxgo.alltoall.pairwise.n{n}.outofplace.json").read_text())
        want = {"name": f"ucxxgo.alltoallv.pairwise.n{n}", "collective": "alltoallv"}
        want.update((k, v) for k, v in golden.items() if k not in want)
        want["ucxxgo_variable_blocks"] = True
        text = builtins.alltoallv(n)
        got = json.loads(text)
        assert plan_difference(got, want) is None, plan_difference(got, want)
        p = ucxx_go.ExecutionPlan.from_json(text)
        assert p.collective == "alltoallv" and p.ranks == n and not p.in_place


# A Go program that writes core/builtin's plans into the current directory: AllToAllV(n)
# for 2..9 ranks, and Generate for the shapes given on stdin (JSON).
GO_DUMP = """package main

import (
\t"encoding/json"
\t"fmt"
\t"os"
\t"strings"

\t"github.com/ucxx-go/ucxx-go/core/builtin"
)

type shape struct {
\tKey                                    string
\tN, Lanes, Chunks, Root, Peers, Align   int
\tInPlace                                bool
}

func main() {
\tfor n := 2; n <= 9; n++ {
\t\tjs, _, err := builtin.AllToAllV(n)
\t\tif err != nil {
\t\t\tpanic(err)
\t\t}
\t\tos.WriteFile(fmt.Sprintf("ucxxgo.alltoallv.pairwise.n%d.json", n), js, 0o644)
\t}
\tvar shapes []shape
\tif err := json.NewDecoder(os.Stdin).Decode(&shapes); err != nil {
\t\tpanic(err)
\t}
\tfor _, s := range shapes {
\t\tc, name, _ := strings.Cut(s.Key, ".")
\t\ta, _ := builtin.Lookup(c, name)
\t\to := builtin.Options{InPlace: s.InPlace, Lanes: s.Lanes, Chunks: s.Chunks, Root: s.Root, PeersPerLane: s.Peers,
\t\t\tAlignment: s.Align}
\t\tjs, _, err := a.Generate(s.N, o)
\t\tif err != nil {
\t\t\tpanic(err)
\t\t}
\t\tos.WriteFile(a.PlanName(s.N, o)+".json", js, 0o644)
\t}
}
"""


def _more_shapes():
    """(key, n, Options) beyond the goldens: TestAllShapes' option sets, the defaults
    at 6 and 7 ranks and at 6 also three lanes with four pieces and a middle root, in
    place, and two lanes, 25 pieces, the last root, three peers per lane, 16-byte
    alignment; but the ring only with the defaults: its many segment lanes take the
    compiler seconds (the pruning of its semaphores between them), a minute for 25
    pieces on 7 ranks."""
    shapes = []
    for n in (6, 7):
        for a in builtins.ALGORITHMS:
            opts = [Options(inplace=False), Options(inplace=True)]
            if a.key != "allreduce.ring" and n == 6:
                opts.append(Options(lanes=3, chunks=4, root=n // 2, inplace=True))
                opts.append(Options(lanes=2, chunks=25, root=n - 1, peers_per_lane=3, alignment=16))
            shapes += [(a.key, n, o) for o in opts]
    return shapes


@pytest.fixture(scope="module")
def go_plans(tmp_path_factory):
    """{file name: text} of the plans the Go generators make (GO_DUMP), or a skip when no
    Go toolchain with the module's dependencies is at hand."""
    import os

    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain")
    d = tmp_path_factory.mktemp("go_plans")
    root = GOLDEN_DIR.parents[2]
    (d / "main.go").write_text(GO_DUMP)
    (d / "go.mod").write_text("module builtindump\n\ngo 1.26\n\nrequire github.com/ucxx-go/ucxx-go v0.0.0\n\n"
                              f"replace github.com/ucxx-go/ucxx-go => {root}\n")
    shutil.copy(root / "go.sum", d / "go.sum")
    shapes = [{"Key": key, "N": n, "Lanes": o.lanes, "Chunks": o.chunks, "Root": o.root, "Peers": o.peers_per_lane,
               "Align": o.alignment, "InPlace": o.inplace} for key, n, o in _more_shapes()]
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOPROXY": "off", "CGO_ENABLED": "0"}
    run = subprocess.run([go, "run", "."], cwd=d, env=env, input=json.dumps(shapes), capture_output=True, text=True,
                         timeout=300)
    if run.returncode != 0:
        pytest.skip(f"cannot build core/builtin here: {run.stderr.strip()[-300:]}")
    return {p.name: p.read_text() for p in d.glob("ucxxgo.*.json")}


def test_alltoallv_equals_go(go_plans):
    """The DSL's alltoallv plan is the text of Go's AllToAllV(n), 2..9 ranks."""
    for n in range(2, 10):
        want = go_plans[f"ucxxgo.alltoallv.pairwise.n{n}.json"]
        got = plan_text(json.loads(builtins.alltoallv(n)))
        assert got == want, plan_difference(json.loads(got), json.loads(want))


def test_more_shapes_equal_go(go_plans):
    """Beyond the goldens too, each DSL program gives the Go generator's plan."""
    differ = []
    for key, n, o in _more_shapes():
        fname = builtins.lookup(key).plan_name(n, o) + ".json"
        got = plan_text(builtins.builtin_plan(key, n, o))
        if got != go_plans[fname]:
            differ.append(f"{fname}: the DSL's {plan_difference(json.loads(got), json.loads(go_plans[fname]))}")
    assert not differ, "\n".join(differ)


@pytest.mark.parametrize("key,n,o", [("broadcast.tree", 5, Options(root=1, chunks=2)),
                                     ("reduce.chain", 4, Options(root=3, inplace=True)),
                                     ("reduce.direct", 5, Options(root=2, peers_per_lane=2))])
def test_rooted_results_are_checked_against_their_root(key, n, o):
    """The checker proves a broadcast or reduce for the root it is given, and no other."""
    plan = builtins.builtin_plan(key, n, o)
    check_plan(plan, root=o.root)
    with pytest.raises(PlanCheckError) as e:
        check_plan(plan, root=(o.root + 1) % n)
    assert e.value.kind == "result"
    assert any("not checked" in note for note in check_plan(plan).notes)


def test_options_out_of_range():
    for key, n, o in (("allreduce.ring", 1, Options()), ("broadcast.chain", 4, Options(root=4)),
                      ("alltoall.pairwise", 4, Options(peers_per_lane=9)), ("allgather.allpairs", 3, Options(lanes=0))):
        with pytest.raises(ValueError):
            builtins.builtin_program(key, n, o)
    with pytest.raises(ValueError, match="no built-in"):
        builtins.lookup("allreduce.tree")


def _two_waits(fused):
    """Rank r waits on two channels from its peer in a row, with or without no_fusion."""
    with CollectiveProgram("waits", collectives.TestCollective(2, 2, 2), 2, buffer_alignment=1) as prog:
        for r in range(2):
            p, rank = 1 - r, Rank(r)
            a, b = MemoryChannel(p, r), MemoryChannel(p, r)
            rank.copy(rank.get_output_buffer()[0:2], rank.get_input_buffer()[0:2], tb=0)
            for ch in (a, b):
                ch.signal(tb=0, data_sync="none")
            if fused:
                a.wait(tb=0, data_sync="none")
                b.wait(tb=0, data_sync="none")
            else:
                with no_fusion():
                    a.wait(tb=0, data_sync="none")
                    b.wait(tb=0, data_sync="none")
        return prog.compile()[0]


def test_no_fusion_keeps_ops_apart():
    names = lambda plan: [op["name"] for op in plan["gpus"][0]["threadblocks"][0]["ops"]]  # noqa: E731
    assert names(_two_waits(True)) == ["copy", "signal", "wait"]
    assert names(_two_waits(False)) == ["copy", "signal", "wait", "wait"]


def test_asked_for_nop_stays_before_a_barrier():
    """A nop the program writes (a barrier of one lane) before a barrier of several is
    kept, as core/builtin writes it; the compiler's own nops there are dropped."""
    plan = builtins.builtin_plan("allreduce.allpairs", 5, Options(peers_per_lane=2))
    ops = [op["name"] for op in plan["gpus"][0]["threadblocks"][0]["ops"]]
    assert ops[6:12] == ["wait", "nop", "barrier", "re", "nop", "barrier"]


@pytest.mark.parametrize("n,inplace", [(2, True), (3, False), (4, True)])
def test_allreduce_pipelined_with_loop(n, inplace):
    """The all-pairs allreduce written inside a Loop: one pipeline op per lane, passes
    the checker, parses in Go and gives numpy's answer window by window (16-byte
    windows of 64-byte blocks: four)."""
    import ucxx_go
    from test_language import run_reference

    plan, _ = builtins.program("allreduce_pipelined", n, inplace=inplace, chunks=2, unit=16).compile()
    for tb in plan["gpus"][0]["threadblocks"]:
        assert [op["name"] for op in tb["ops"]] == ["rlxsignal", "rlxwait", "nop", "pipeline"]
    assert ucxx_go.ExecutionPlan.from_json(json.dumps(plan)).ranks == n
    run_reference(plan, elems=8, calls=2, seed=n)
