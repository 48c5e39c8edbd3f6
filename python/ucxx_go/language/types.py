"""Enums and the chunk type of the language (the names MSCCL++ 0.9's DSL uses).

A chunk is a slice of one rank's input, output or scratch buffer, counted in
abstract chunks: the executor turns chunk indices into bytes at run time
(docs/plan-format.md section 8).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = [
    "BufferType",
    "ChannelType",
    "Chunk",
    "DataAccessType",
    "ReduceOperationType",
    "ReplicationPolicy",
    "SyncType",
]


class SyncType(Enum):
    """Where a thread-block-wide ``nop`` goes around a synchronisation op."""

    none = "none"
    before = "before"
    after = "after"
    both = "both"

    def __str__(self):
        return self.value

    def _bits(self):
        return {"none": 0, "before": 1, "after": 2, "both": 3}[self.value]

    @classmethod
    def _of(cls, bits):
        return [cls.none, cls.before, cls.after, cls.both][bits]

    def __or__(self, other):
        if not isinstance(other, SyncType):
            return NotImplemented
        return SyncType._of(self._bits() | other._bits())

    def __and__(self, other):
        if not isinstance(other, SyncType):
            return NotImplemented
        return SyncType._of(self._bits() & other._bits())

    def __xor__(self, other):
        if not isinstance(other, SyncType):
            return NotImplemented
        return SyncType._of(self._bits() ^ other._bits())

    @classmethod
    def coerce(cls, value, default):
        """A SyncType from a SyncType, its name ("before"...), None (none), or the default."""
        if value is _DEFAULT:
            return default
        if value is None:
            return cls.none
        if isinstance(value, cls):
            return value
        if isinstance(value, str) and value in cls.__members__:
            return cls[value]
        raise ValueError(f"sync {value!r}: want one of none, before, after, both")


_DEFAULT = object()


class ReduceOperationType(Enum):
    sum = "sum"
    min = "min"
    max = "max"
    prod = "prod"

    def __str__(self):
        return self.value

    @classmethod
    def coerce(cls, value):
        if isinstance(value, cls):
            return value
        if isinstance(value, str) and value in cls.__members__:
            return cls[value]
        raise ValueError(f"reduce op {value!r}: want one of sum, prod, min, max")


class BufferType(Enum):
    input = "i"
    output = "o"
    scratch = "s"

    def __str__(self):
        return self.value

    def __lt__(self, other):
        return self.value < other.value


class ChannelType(Enum):
    port = "port"
    memory = "memory"
    switch = "switch"
    none = "none"

    def __str__(self):
        return self.value


class DataAccessType(Enum):
    read = "r"
    write = "w"
    both = "b"


class ReplicationPolicy(Enum):
    interleaved = "interleaved"
    none = "none"

    def __str__(self):
        return self.value


@dataclass(frozen=True)
class Chunk:
    """Chunks [index, index + size) of buffer `buffer` of rank `rank`."""

    rank: int
    buffer: BufferType
    index: int
    size: int

    def to_dict(self):
        return {"rank": self.rank, "type": self.buffer.value, "index": self.index, "size": self.size}

    def __repr__(self):
        return f"Chunk(rank {self.rank}, {self.buffer.name}[{self.index}:{self.index + self.size}])"
