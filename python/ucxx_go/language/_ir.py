"""The program as recorded: one Op per DSL call (per thread block for a thread-block
group), in program order, with where in the user's source it was made."""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass, field

from .types import SyncType

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))

# DSL-level op kinds
DATA_KINDS = {"copy", "reduce", "put", "get", "switch_reduce", "switch_broadcast"}
CHANNEL_SYNC_KINDS = {"signal", "wait", "flush"}
SEM_KINDS = {"sem_acquire", "sem_release"}


def caller_where():
    """'file:line' of the innermost frame outside this package (the user's DSL line)."""
    f = sys._getframe(1)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not fn.startswith(_PKG_DIR + os.sep):
            return f"{os.path.basename(fn)}:{f.f_lineno}"
        f = f.f_back
    return "?"


_WHERE = "_ucxx_go_dsl_where"  # set on an exception once a DSL call has named its line


def _call_name(fn, args):
    """What the user called: "MemoryChannel.put", "Rank", "buffer slice"..."""
    name = fn.__name__
    owner = fn.__qualname__.rsplit(".", 1)[0] if "." in fn.__qualname__ else ""
    if name == "__new__" and args and isinstance(args[0], type):
        return args[0].__name__
    if args and owner and any(k.__name__ == owner for k in type(args[0]).__mro__):
        cls = type(args[0]).__name__
        if name == "__init__":
            return cls
        if name == "__getitem__":
            return "buffer slice"
        if name == "__enter__":
            return f"with {cls}"
        return f"{cls}.{name}"
    return fn.__qualname__


def dsl_call(fn=None, *, records=True):
    """Decorates a DSL entry point: a ValueError or TypeError raised inside it (the
    user's mistake) gets the user's file:line and the call's name in front of its
    message, and marks the current program as failed, so that it emits nothing
    (CollectiveProgram.compile raises). ``records=False`` for constructors of the
    program itself, which have no program to mark yet."""
    if fn is None:
        return functools.partial(dsl_call, records=records)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (ValueError, TypeError) as e:
            if getattr(e, _WHERE, None) is None and len(e.args) == 1 and isinstance(e.args[0], str):
                where = caller_where()
                e.args = (f"{where}: {_call_name(fn, args)}: {e.args[0]}",)
                setattr(e, _WHERE, where)
                if records:
                    from . import program

                    if program._current is not None:
                        program._current._fail(e.args[0])
            raise

    return call


@dataclass(eq=False)
class Op:
    """One recorded operation of one rank.

    kind: copy, reduce, put, get, signal, wait, flush, sem_acquire, sem_release,
    barrier, nop, switch_reduce, switch_broadcast. src/dst: Chunks (a chunk of
    another rank is remote). tb: the pinned thread block, or None for the compiler
    to choose.
    """

    kind: str
    rank: int
    tb: int | None
    src: list = field(default_factory=list)
    dst: list = field(default_factory=list)
    channel: object = None
    relaxed: bool = False
    sync: SyncType = SyncType.none
    reduce_op: str = "sum"
    to_packet: bool = False
    from_packet: bool = False
    with_signal: bool = False
    with_flush: bool = False
    tbg: tuple | None = None  # (index in group, group size)
    loop: object = None
    sems: list = field(default_factory=list)
    tb_list: list | None = None  # barrier members (None: every lane the rank has then)
    fuse: bool = True  # False: the op keeps a plan op of its own (fusion.no_fusion)
    where: str = "?"
    seq: int = 0
    # switch ops
    switch_index: int = 0
    switch_size: int = 0

    def describe(self):
        name = self.kind
        if self.kind == "put":
            name = "put_packets" if self.to_packet and not self.from_packet else (
                "read_put_packets" if self.from_packet else (
                    "put_with_signal_and_flush" if self.with_flush else (
                        "put_with_signal" if self.with_signal else "put")))
        if self.kind in ("signal", "wait") and self.relaxed:
            name = "relaxed " + name
        return name
