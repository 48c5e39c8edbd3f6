"""ExecutionPlan: an MSCCL++ execution plan (the JSON its DSL emits), read and checked by Go.

    plan = ucxx_go.ExecutionPlan.load("allreduce.json")
    await comm.execute(plan, x, out)

The plan is parsed and validated once (core/plan): a malformed plan, or one that asks
for more than the documented limits, raises PlanError here, before any rank runs it.
"""

import ctypes
import json
import os

from ._bridge import call, ext

__all__ = ["ExecutionPlan"]


class ExecutionPlan:
    """A validated execution plan; make one with ``load`` or ``from_json``."""

    __slots__ = ("_h", "_info", "__weakref__")

    def __init__(self, handle, info):
        self._h, self._info = handle, info

    @classmethod
    def load(cls, path):
        """Read a plan from a JSON file.

        Raises
        ------
        OSError
            The file cannot be read.
        PlanError
            The plan is malformed or exceeds a limit.
        """
        with open(os.fspath(path), "rb") as f:
            return cls.from_json(f.read())

    @classmethod
    def from_json(cls, data):
        """Read a plan from JSON text (str or bytes) or an already decoded dict.

        Raises
        ------
        PlanError
            The plan is malformed or exceeds a limit.
        """
        if isinstance(data, dict):
            data = json.dumps(data)
        if isinstance(data, str):
            data = data.encode()
        buf = ctypes.create_string_buffer(bytes(data), len(data))
        h = call(ext.pybridge_PlanParse, ctypes.addressof(buf), len(data))
        return cls(h, json.loads(call(ext.pybridge_PlanInfo, h)))

    name = property(lambda self: self._info["name"], doc="The plan's name.")
    collective = property(lambda self: self._info["collective"], doc='The collective it implements ("allreduce", ...).')
    protocol = property(lambda self: self._info["protocol"], doc='"Simple" or "LL" (packets).')
    in_place = property(lambda self: self._info["inplace"], doc="Whether its send buffer lies in its receive buffer.")
    ranks = property(lambda self: len(self._info["ranks"]), doc="The number of ranks it is written for.")
    min_message_size = property(lambda self: self._info["min_message_size"], doc="Smallest message it takes (bytes).")
    max_message_size = property(lambda self: self._info["max_message_size"], doc="Largest message it takes (bytes).")
    buffer_alignment = property(lambda self: self._info["buffer_alignment"], doc="The unit chunks are measured in.")

    def chunks(self, rank):
        """Return (input, output, scratch) chunk counts of a rank: message sizes must
        divide into them, in units of buffer_alignment."""
        r = self._info["ranks"][rank]
        return r["input_chunks"], r["output_chunks"], r["scratch_chunks"]

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h:
            try:
                ext.pybridge_PlanFree(h)
            except Exception:  # interpreter shutdown, fork: nothing to free
                pass

    def __repr__(self):
        return f"<ExecutionPlan {self.name!r}: {self.collective}, {self.ranks} ranks, {self.protocol}>"
