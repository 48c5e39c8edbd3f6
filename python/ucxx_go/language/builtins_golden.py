"""The built-ins' golden plans: which are kept, their text, and how two plans differ.

core/builtin/testdata holds one JSON file per golden case. The Go generators
(core/builtin, TestGoldens) and the DSL programs (ucxx_go.language.builtins) must
both give exactly these files: ``python -m ucxx_go.language.builtins --write``
rewrites them from the DSL, ``go test ./core/builtin -run TestGoldens`` checks the
Go side and tests/test_language_builtins.py the DSL side.

GOLDEN_CASES mirrors goldenCases() of core/builtin/builtin_test.go; plan_text
writes a plan in the layout of core/builtin's marshal (one op per line), so that
the files the DSL writes are byte for byte those Go writes.
"""

from __future__ import annotations

import json

from .builtins_common import Options

__all__ = ["GOLDEN_NS", "golden_cases", "plan_difference", "plan_text"]

GOLDEN_NS = (2, 3, 4, 5, 8, 10)  # the rank counts every algorithm's goldens cover


def golden_cases(keys):
    """[(key, n, Options)] of every golden plan, in TestGoldens' order: each of `keys`
    (the algorithms' "collective.name", in table order) at every GOLDEN_NS with the
    default options, and at some n the shapes the defaults do not reach there:
    pipelining, several lanes, other roots, several peer groups, segment lanes. Each
    out of place, then in place."""
    cases = []

    def add(key, n, **kw):
        for inplace in (False, True):
            cases.append((key, n, Options(inplace=inplace, **kw)))

    for n in GOLDEN_NS:
        for key in keys:
            add(key, n)
        add("allreduce.ring", n, chunks=2)
        add("broadcast.chain", n, root=n - 1, chunks=3)
        add("broadcast.tree", n, root=1, chunks=2)
        add("reduce.direct", n, root=n - 1)
        add("reduce.chain", n, root=n - 1, chunks=3)
        add("reduce.tree", n, root=1, chunks=2)
    for n in (3, 4):
        for key in ("allreduce.allpairs", "allreduce.direct", "allreduce.ring", "allgather.allpairs",
                    "reducescatter.allpairs", "alltoall.pairwise", "reduce.direct", "broadcast.tree", "reduce.tree"):
            add(key, n, lanes=2, root=1)
    for n in (5, 8):
        for key in ("allreduce.allpairs", "allreduce.direct", "allgather.allpairs", "reducescatter.allpairs",
                    "alltoall.pairwise", "reduce.direct"):
            add(key, n, peers_per_lane=2, root=2)
        add("allreduce.allpairs", n, peers_per_lane=3, lanes=2)
    add("allreduce.ring", 2, chunks=13)  # segments cut inside a step
    add("broadcast.chain", 3, chunks=13, root=2)
    add("reduce.chain", 3, chunks=13, root=1)
    return cases


def _enc(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


_OP_KEYS = ("name", "src_buff", "dst_buff", "channel_ids", "channel_type", "barrier_id", "num_threadblocks")
_REF_KEYS = ("type", "buffer_id", "index", "size")


def _ordered(d, keys):
    """d with the keys core/builtin writes first, in its order, then any others."""
    out = {k: d[k] for k in keys if k in d}
    out.update((k, v) for k, v in d.items() if k not in out)
    return out


def _op(op):
    op = _ordered(op, _OP_KEYS)
    for lst in ("src_buff", "dst_buff"):
        if lst in op:
            op[lst] = [_ordered(ref, _REF_KEYS) for ref in op[lst]]
    if "ops" in op:
        op["ops"] = [_op(x) for x in op["ops"]]
    return op


def plan_text(plan):
    """The plan as core/builtin writes it: top-level fields on the first line, each
    rank's and each lane's head on its own, one op per line, then the rest."""
    w = [f'{{"name":{_enc(plan["name"])},"collective":{_enc(plan["collective"])},'
         f'"protocol":{_enc(plan["protocol"])},"inplace":{_enc(plan["inplace"])},'
         f'"reuse_resources":{_enc(plan["reuse_resources"])},']
    known = {"name", "collective", "protocol", "inplace", "reuse_resources", "gpus", "num_threads_per_block",
             "use_double_scratch_buffer", "buffer_alignment", "min_message_size", "max_message_size"}
    for k, v in plan.items():  # extensions ("ucxxgo_variable_blocks")
        if k not in known:
            w.append(f"{_enc(k)}:{_enc(v)},")
    w.append('\n"gpus":[')
    for ri, g in enumerate(plan["gpus"]):
        w.append("," if ri else "")
        w.append(f'\n{{"id":{g["id"]},"input_chunks":{g["input_chunks"]},"output_chunks":{g["output_chunks"]},'
                 f'"scratch_chunks":{g["scratch_chunks"]},\n "threadblocks":[')
        for li, tb in enumerate(g["threadblocks"]):
            w.append("," if li else "")
            w.append(f'\n  {{"id":{tb["id"]},"ops":[')
            for oi, op in enumerate(tb["ops"]):
                w.append(("," if oi else "") + "\n   " + _enc(_op(op)))
            w.append(f'],\n   "channels":{_enc(tb["channels"])},'
                     f'"remote_buffer_refs":{_enc(tb["remote_buffer_refs"])}}}')
        w.append(f'],\n "channels":{_enc(g["channels"])},\n "remote_buffers":{_enc(g["remote_buffers"])},'
                 f'\n "semaphores":{_enc(g["semaphores"])}}}')
    w.append(f'],\n"num_threads_per_block":{plan["num_threads_per_block"]},'
             f'"use_double_scratch_buffer":{_enc(plan["use_double_scratch_buffer"])},'
             f'"buffer_alignment":{plan["buffer_alignment"]},"min_message_size":{plan["min_message_size"]},'
             f'"max_message_size":{plan["max_message_size"]}}}\n')
    return "".join(w)


def plan_difference(got, want, path="plan"):
    """Where plan `got` first differs from plan `want` (both parsed JSON, compared
    field by field with no field ignored; key order does not count), as
    "path: got ... want ...", or None when they are equal."""
    if isinstance(got, dict) and isinstance(want, dict):
        for k in list(want) + [k for k in got if k not in want]:
            if k not in got:
                return f"{path}.{k}: missing, want {_short(want[k])}"
            if k not in want:
                return f"{path}.{k}: {_short(got[k])}, want no such field"
            d = plan_difference(got[k], want[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(got, list) and isinstance(want, list):
        for i, (x, y) in enumerate(zip(got, want)):
            d = plan_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        if len(got) != len(want):
            return f"{path}: {len(got)} entries, want {len(want)}"
        return None
    if got == want and type(got) is type(want):
        return None
    return f"{path}: {_short(got)}, want {_short(want)}"


def _short(v, limit=200):
    s = _enc(v)
    return s if len(s) <= limit else s[:limit] + "..."
