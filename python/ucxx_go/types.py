"""UCXX's tag types: plain ints here, named for code that imports them."""


class Tag(int):
    """A 64-bit UCX tag."""


class TagMask(int):
    """A 64-bit mask applied when matching tags."""


TagMaskFull = TagMask((1 << 64) - 1)
