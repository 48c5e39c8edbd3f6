"""The arguments of collective calls: element types and reduction operators as the Go
core numbers them (core/reduce, through _constants)."""

from . import _constants as C

__all__ = ["dtype_code", "op_code"]

_DTYPES = {
    "int8": C.DTYPE_INT8, "int16": C.DTYPE_INT16, "int32": C.DTYPE_INT32, "int64": C.DTYPE_INT64,
    "uint8": C.DTYPE_UINT8, "uint16": C.DTYPE_UINT16, "uint32": C.DTYPE_UINT32, "uint64": C.DTYPE_UINT64,
    "float16": C.DTYPE_FLOAT16, "bfloat16": C.DTYPE_BFLOAT16, "float32": C.DTYPE_FLOAT32,
    "float64": C.DTYPE_FLOAT64,
}
# memoryview formats (struct module, native sizes on the 64-bit platforms we build for).
_FORMATS = {
    "b": "int8", "B": "uint8", "h": "int16", "H": "uint16", "i": "int32", "I": "uint32",
    "l": "int64", "L": "uint64", "q": "int64", "Q": "uint64", "e": "float16", "f": "float32",
    "d": "float64", "c": "uint8",
}
_OPS = {"sum": C.REDUCE_SUM, "prod": C.REDUCE_PROD, "min": C.REDUCE_MIN, "max": C.REDUCE_MAX}
# Codes of the dtype objects seen so far (numpy's, torch's, cupy's): a dtype's name is
# computed on every access (microseconds a call), a dict hit is not. Bounded: only the
# first _BY_DTYPE_MAX distinct dtypes are remembered.
_BY_DTYPE = {}
_BY_DTYPE_MAX = 64


def _name(obj):
    dt = getattr(obj, "dtype", None)
    if dt is not None:
        if not getattr(dt, "isnative", True):  # numpy's byte-swapped types: the reductions are native-endian
            return None
        name = getattr(dt, "name", None) or str(dt)
        return name.rsplit(".", 1)[-1]  # torch.float32 -> float32
    if isinstance(obj, (bytes, bytearray)):
        return "uint8"
    try:
        return _FORMATS.get(memoryview(obj).format.lstrip("@=<"), None)
    except TypeError:
        return None


def dtype_code(obj, dtype=None):
    """Return the Go code of the element type: `dtype` (a name, or anything with a
    ``name``/``dtype``) if given, else the buffer's own.

    Raises
    ------
    TypeError
        The type is not one collectives reduce over.
    """
    if dtype is None:
        dt = getattr(obj, "dtype", None)
        if dt is not None:
            try:
                return _BY_DTYPE[dt]
            except (KeyError, TypeError):
                pass
        name = _name(obj)
        code = _DTYPES.get(name)
        if code is not None and dt is not None and len(_BY_DTYPE) < _BY_DTYPE_MAX:
            try:
                _BY_DTYPE[dt] = code
            except TypeError:  # an unhashable dtype
                pass
    elif isinstance(dtype, str):
        name = dtype
    elif hasattr(dtype, "shape") or isinstance(dtype, (bytes, bytearray, memoryview)):  # an array: its type
        return dtype_code(dtype)  # through the cache of dtypes seen (allgather, reduce_scatter pass one)
    else:  # numpy.dtype, numpy.float32, torch.float32, ...
        name = getattr(dtype, "name", None) or getattr(dtype, "__name__", None) or str(dtype).rsplit(".", 1)[-1]
    code = _DTYPES.get(name)
    if code is None:
        raise TypeError(f"collectives take int8..int64, uint8..uint64, float16, bfloat16, float32 and float64; "
                        f"got {name!r}")
    return code


def op_code(op):
    """Return the Go code of a reduction operator name: "sum", "prod", "min" or "max".

    Raises
    ------
    ValueError
        Another name.
    """
    code = _OPS.get(op)
    if code is None:
        raise ValueError(f"op must be one of {sorted(_OPS)}, got {op!r}")
    return code
