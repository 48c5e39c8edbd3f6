"""docs/dsl.md's Python examples run, and say what they do.

Every ```python block of the guide runs here, unless an HTML comment on the line
before its fence says otherwise. The comment is ``<!-- doc-test: WORDS -->``:

* (no comment): the block runs in this process, in a namespace of its own; every
  plan it compiles must pass the checker and, for a collective, give numpy's answer
  in the reference interpreter (tests/plan_reference.py) over two calls.
* ``ranks=N``: the block is a rank script; it runs on N processes under
  ``python -m ucxx_go.launch`` and must exit 0 on every rank (its asserts are its
  claims).
* ``continues``: the block goes on from the python block before it (in the same
  namespace, or, with ranks=N, as the end of one script).
* ``raises=ValueError``: the block must raise that; the fenced block after it
  holds the documented message, which must match (whitespace aside).
* ``file=NAME.py``: the block runs as file NAME.py (its first line is line 1), so
  that the lines its messages name are the ones the guide shows. Otherwise it runs
  as dsl.md with the guide's own line numbers.
* ``output`` (on the fenced block after a python block): what the block prints.
* ``fragment``: not a program; not run. Kept few (FRAGMENTS_AT_MOST).
"""

import contextlib
import io
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from _support import LAUNCH, rank_script
from test_language import run_reference
from ucxx_go import language as lang

DOC = Path(__file__).resolve().parent.parent / "docs" / "dsl.md"
FRAGMENTS_AT_MOST = 3
KNOWN = {"fragment", "continues", "output", "ranks", "raises", "file"}
COLLECTIVES = {"allreduce", "allgather", "reducescatter", "alltoall"}


@pytest.fixture(autouse=True)
def fresh_context():
    """Overrides conftest's: the in-process blocks open no ucxx_go context."""
    yield


@dataclass
class Block:
    line: int  # the doc's line of the block's first code line
    lang: str
    code: str
    opts: dict = field(default_factory=dict)
    after: "Block | None" = None  # the fenced block right after it (its output, its error)
    prev: "Block | None" = None  # the python block before it

    @property
    def name(self):
        return f"dsl.md:{self.line}"


def parse(text):
    """The fenced blocks of a markdown text, with their doc-test options."""
    lines = text.splitlines()
    out, i, pending = [], 0, None
    while i < len(lines):
        s = lines[i].strip()
        m = re.fullmatch(r"<!--\s*doc-test:(.*?)-->", s)
        if m:
            pending = {}
            for word in m.group(1).split():
                key, _, value = word.partition("=")
                pending[key] = value or True
            i += 1
            continue
        if s.startswith("```"):
            indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
            body, j = [], i + 1
            while j < len(lines) and lines[j].strip() != "```":
                body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
                j += 1
            out.append(Block(i + 2, s[3:].strip(), "\n".join(body) + "\n", pending or {}))
            pending = None
            i = j + 1
            continue
        if s:
            pending = None  # a comment counts only right before a fence
        i += 1
    prev_py = None
    for k, b in enumerate(out):
        if k + 1 < len(out):
            b.after = out[k + 1]
        if b.lang == "python":
            b.prev = prev_py
            prev_py = b
    return out


BLOCKS = parse(DOC.read_text())
PYTHON = [b for b in BLOCKS if b.lang == "python"]
IN_PROCESS = [b for b in PYTHON if not b.opts.get("fragment") and not b.opts.get("ranks")]
ON_RANKS = [b for b in PYTHON if b.opts.get("ranks")]


def test_every_python_block_is_run_or_marked():
    assert len(PYTHON) >= 4, [b.name for b in PYTHON]
    for b in BLOCKS:
        assert set(b.opts) <= KNOWN, (b.name, b.opts)
        if b.opts.get("output"):
            assert b.lang != "python", b.name
        if b.lang != "python":
            assert set(b.opts) <= {"output"}, (b.name, "doc-test options on a block that is not python")
        if b.opts.get("continues"):
            assert b.prev is not None, b.name
        if b.opts.get("raises"):
            assert b.after is not None and b.after.lang == "", (b.name, "no message block after it")
    assert sum(1 for b in PYTHON if b.opts.get("fragment")) <= FRAGMENTS_AT_MOST
    assert ON_RANKS, "no example runs on ranks"


def _compile(b, relative):
    code = b.code
    if relative:
        return compile(code, b.opts["file"], "exec")
    return compile("\n" * (b.line - 1) + code, "dsl.md", "exec")


def _run_in_process(b, ns, monkeypatch):
    """Run b (after its predecessors when it continues); the plans it compiled and
    what it printed."""
    plans = []
    orig = lang.CollectiveProgram.compile

    def compile_and_keep(self):
        plan, prov = orig(self)
        plans.append((self, plan, prov))
        return plan, prov

    monkeypatch.setattr(lang.CollectiveProgram, "compile", compile_and_keep)
    printed = io.StringIO()
    err = None
    with contextlib.redirect_stdout(printed):
        try:
            exec(_compile(b, "file" in b.opts), ns)
        except Exception as e:  # noqa: BLE001 (compared with what the guide says below)
            err = e
    return plans, printed.getvalue(), err


def _words(text):
    return " ".join(text.split())


@pytest.mark.parametrize("b", IN_PROCESS, ids=[b.name for b in IN_PROCESS])
def test_example_runs_and_does_what_it_says(b, monkeypatch):
    ns = {"__name__": "__doc_example__"}
    chain = []
    p = b
    while p.opts.get("continues"):
        p = p.prev
        chain.append(p)
    for p in reversed(chain):
        _, _, err = _run_in_process(p, ns, monkeypatch)
        assert err is None, (p.name, err)
    plans, printed, err = _run_in_process(b, ns, monkeypatch)
    want_err = b.opts.get("raises")
    if want_err:
        assert err is not None and type(err).__name__ == want_err, (b.name, "raised", repr(err))
        assert _words(f"{type(err).__name__}: {err}") == _words(b.after.code), (b.name, str(err))
        return
    if err is not None:
        raise AssertionError(f"{b.name}: the example raised {type(err).__name__}: {err}") from err
    if b.after is not None and b.after.opts.get("output"):
        assert printed == b.after.code, (b.name, printed)
    for prog, plan, prov in plans:
        lang.check_plan(plan, provenance=prov)  # also when the example turned the check off
        if plan["collective"] in COLLECTIVES:
            run_reference(plan)


@pytest.mark.parametrize("b", ON_RANKS, ids=[b.name for b in ON_RANKS])
def test_example_runs_on_ranks(b, tmp_path):
    n = int(b.opts["ranks"])
    assert 2 <= n <= 4, b.name
    parts = [b.code]
    p = b
    while p.opts.get("continues"):
        p = p.prev
        parts.insert(0, p.code)
    script = rank_script(tmp_path, "\n".join(parts))
    r = subprocess.run(LAUNCH + ["-n", str(n), "--timeout", "60", script], timeout=90, capture_output=True,
                       text=True)
    assert r.returncode == 0, (b.name, r.stdout[-3000:], r.stderr[-3000:])


def test_parse_reads_the_markers():
    doc = "\n".join([
        "text", "<!-- doc-test: ranks=3 continues -->", "```python", "x = 1", "```", "",
        "  ```python", "  y = 2", "  ```", "<!-- doc-test: output -->", "```", "2", "```",
    ])
    a, b, c = parse(doc)
    assert (a.line, a.code, a.opts) == (4, "x = 1\n", {"ranks": "3", "continues": True})
    assert (b.line, b.code, b.opts, b.prev) == (8, "y = 2\n", {}, a)
    assert (c.lang, c.code, c.opts) == ("", "2\n", {"output": True})
    assert b.after is c
