"""Tags: UCXX's per-endpoint tags, and a user tag mixed into them deterministically.

A UCX tag's layout is the Go core's (core/tags.go): bit 63 marks multi-buffer
traffic, bits 32-62 are the receiving endpoint's id (its receive tag, which it told
the peer), and the low USER_TAG_BITS bits are the user's tag, hashed. So the engine
knows which endpoint an early message belongs to and bounds what each peer makes it
hold.

UCXX mixes a user's tag into the endpoint's tag with Python's hash(), which is salted
per process for str and bytes: string tags then only match across processes that
share PYTHONHASHSEED. We hash a stable encoding instead (BLAKE2b), so the same tag
matches in every process.
"""

import hashlib
import struct

from ._constants import MULTI_TAG_BIT, USER_TAG_BITS

MASK64 = (1 << 64) - 1
# The multi-buffer traffic's bit (core.MultiTagBit): tags mixed from user tags keep it
# clear, so a plain message can never match a multi-buffer receive or vice versa.
MASK63 = MASK64 & ~MULTI_TAG_BIT
_USER_MASK = (1 << USER_TAG_BITS) - 1
_cache = {}


def _encode(tag):
    if isinstance(tag, bool):
        raise TypeError("a tag must be an int, str, bytes or a tuple of those, not bool")
    if isinstance(tag, int):
        return b"i" + tag.to_bytes(16, "little", signed=True)
    if isinstance(tag, str):
        return b"s" + tag.encode()
    if isinstance(tag, (bytes, bytearray)):
        return b"b" + bytes(tag)
    if isinstance(tag, tuple):
        return b"t" + b"".join(struct.pack("<I", len(p)) + p for p in map(_encode, tag))
    raise TypeError(f"a tag must be an int, str, bytes or a tuple of those, not {type(tag).__name__}")


def mix(base, tag, force_tag):
    """The 64-bit UCX tag for user tag `tag` on an endpoint whose own tag is `base`.

    None means the endpoint's tag; otherwise the tag's hash takes the low USER_TAG_BITS
    bits (never 0, which is the endpoint's own tag). With force_tag an int is used as it
    is (as in UCXX); other tags are hashed alone, into bits 0-62.
    """
    if tag is None:
        return base
    if force_tag:
        if isinstance(tag, int) and not isinstance(tag, bool):
            if not 0 <= tag <= MASK64:
                raise ValueError(f"a forced tag must fit in 64 bits, got {tag}")
            return tag
        base = None
    key = (base, tag)
    t = _cache.get(key)
    if t is None:
        h = int.from_bytes(hashlib.blake2b(_encode(tag), digest_size=8).digest(), "little")
        if base is None:
            t = h & MASK63
        else:
            t = base | ((h & _USER_MASK) or 1)
        if len(_cache) > 4096:
            _cache.clear()
        _cache[key] = t
    return t
