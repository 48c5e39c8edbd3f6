"""Kernel signatures in GrCUDA's syntax, and CUDA C compiled to PTX with NVRTC.

A signature lists a kernel's parameters in order, as GrCUDA's ``buildkernel`` and
``bindkernel`` take them, in either of its two syntaxes:

* NFI: ``"pointer, const pointer, sint32"``: ``pointer`` is an array the kernel reads
  and writes, ``const pointer`` one it only reads, and a scalar type a value;
* NIDL: ``"y: out pointer float, x: in pointer float, n: sint32"``: ``in`` is read,
  ``out`` and ``inout`` are written (GrCUDA treats them alike), then the element type.

Scalar types: ``bool char sint8 uint8 char8 sint16 uint16 char16 sint32 uint32 char32
wchar sint64 uint64 sll64 ull64 float double`` (GrCUDA's names). A call's arguments are
checked against the signature before anything is scheduled: a wrong count, an array
where a scalar belongs or the reverse, or a value out of its type's range is a
TypeError.
"""

import ctypes
import ctypes.util
import os
import re
import struct

# GrCUDA's scalar type names -> struct format of the value (little-endian).
_SCALARS = {
    "bool": "?", "char": "b", "sint8": "b", "uint8": "B", "char8": "B",
    "sint16": "h", "uint16": "H", "char16": "H",
    "sint32": "i", "uint32": "I", "char32": "I", "wchar": "i",
    "sint64": "q", "uint64": "Q", "sll64": "q", "ull64": "Q",
    "float": "f", "double": "d",
}

READ, WRITE = "read", "write"


_SLOT = struct.Struct("<Q")


class Param:
    """One parameter: a pointer with its access (READ or WRITE), or a scalar with its
    struct format."""

    __slots__ = ("name", "pointer", "access", "fmt", "_pack")

    def __init__(self, name, pointer, access=None, fmt=None):
        self.name, self.pointer, self.access, self.fmt = name, pointer, access, fmt
        if fmt is not None:  # the value, then zeros to 8 bytes
            self._pack = struct.Struct(f"<{fmt}{8 - struct.calcsize('<' + fmt)}x").pack

    def __repr__(self):
        what = f"{self.access} pointer" if self.pointer else f"scalar {self.fmt}"
        return f"Param({self.name or '?'}: {what})"

    def slot(self, value, index):
        """The value's 8-byte argument slot (a scalar) as an int, checked: TypeError when
        it does not fit the type (naming the parameter, or its position index)."""
        try:
            return _SLOT.unpack(self._pack(value))[0]
        except (struct.error, TypeError) as e:
            raise TypeError(f"argument {self.name or index} ({self.name or self.fmt}): {value!r} is not a "
                            f"{self.fmt!r} value: {e}") from None


_NIDL = re.compile(r"^\s*(\w+)\s*:\s*(?:(in|out|inout)\s+)?(pointer\s+)?(\w+)\s*$")


def parse_signature(signature):
    """The parameters of a GrCUDA signature (NFI or NIDL), in order.

    Raises
    ------
    ValueError
        An unknown type or a malformed parameter.
    """
    if not isinstance(signature, str):
        raise TypeError(f"a kernel signature is a string, not {type(signature).__name__}")
    params = []
    body = signature.strip()
    if body == "":
        return params
    for i, part in enumerate(body.split(",")):
        words = part.split()
        m = _NIDL.match(part)
        if ":" in part:
            if not m:
                raise ValueError(f"kernel signature, parameter {i}: {part.strip()!r} is not 'name: [in|out|inout] [pointer] type'")
            name, direction, pointer, typ = m.groups()
            if pointer:
                if typ not in _SCALARS and typ != "void":
                    raise ValueError(f"kernel signature, parameter {i}: unknown element type {typ!r}")
                params.append(Param(name, True, READ if direction == "in" else WRITE))
            else:
                if direction:
                    raise ValueError(f"kernel signature, parameter {i}: {direction!r} on a scalar")
                params.append(_scalar(name, typ, i))
        elif words == ["pointer"]:
            params.append(Param(None, True, WRITE))
        elif words == ["const", "pointer"]:
            params.append(Param(None, True, READ))
        elif len(words) == 1:
            params.append(_scalar(None, words[0], i))
        else:
            raise ValueError(f"kernel signature, parameter {i}: {part.strip()!r} is not a type")
    return params


def _scalar(name, typ, i):
    fmt = _SCALARS.get(typ)
    if fmt is None:
        raise ValueError(f"kernel signature, parameter {i}: unknown type {typ!r}")
    return Param(name, False, fmt=fmt)


# -- NVRTC --------------------------------------------------------------------------

_nvrtc = None


def _load_nvrtc():
    """libnvrtc: from the nvidia-cuda-nvrtc wheel (the `gpu` extra), a CUDA toolkit, or
    the loader's path."""
    global _nvrtc
    if _nvrtc is not None:
        return _nvrtc
    candidates = []
    try:
        import nvidia.cuda_nvrtc as wheel  # the gpu extra  # noqa: PLC0415

        for d in getattr(wheel, "__path__", []):
            for sub in ("lib", "bin"):
                p = os.path.join(d, sub)
                if os.path.isdir(p):
                    candidates += [os.path.join(p, f) for f in sorted(os.listdir(p)) if f.startswith("libnvrtc.so")]
    except ImportError:
        pass
    for root in filter(None, [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]):
        candidates += [os.path.join(root, "lib64", n) for n in ("libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12")]
    candidates += ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]
    found = ctypes.util.find_library("nvrtc")
    if found:
        candidates.append(found)
    for c in candidates:
        try:
            lib = ctypes.CDLL(c)
        except OSError:
            continue
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        _nvrtc = lib
        return lib
    raise RuntimeError("NVRTC not found: install ucxx-go[gpu] (the nvidia-cuda-nvrtc wheel) or a CUDA toolkit")


def compile_kernel(source, kernel, options=()):
    """Compile CUDA C source to PTX with NVRTC, with ``kernel`` as a name expression, so
    that a C++ kernel (mangled, or a template instance) is found as well as an
    ``extern "C"`` one; (ptx bytes, the kernel's lowered name).

    Raises
    ------
    RuntimeError
        NVRTC is missing, or the source does not compile (with NVRTC's log).
    """
    return _nvrtc_compile(source, f"{kernel}.cu", options, kernel)


def compile_ptx(source, name="kernel.cu", options=()):
    """Compile CUDA C source to PTX with NVRTC; the PTX as bytes.

    Raises
    ------
    RuntimeError
        NVRTC is missing, or the source does not compile (with NVRTC's log).
    """
    return _nvrtc_compile(source, name, options, None)[0]


def _nvrtc_compile(source, name, options, expression):
    lib = _load_nvrtc()
    prog = ctypes.c_void_p()

    def check(r, what):
        if r != 0:
            raise RuntimeError(f"NVRTC {what}: {lib.nvrtcGetErrorString(r).decode()}")

    check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None), "nvrtcCreateProgram")
    try:
        if expression is not None:
            check(lib.nvrtcAddNameExpression(prog, expression.encode()), "nvrtcAddNameExpression")
        opts = [o.encode() for o in options]
        arr = (ctypes.c_char_p * len(opts))(*opts)
        r = lib.nvrtcCompileProgram(prog, len(opts), arr)
        if r != 0:
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(prog, log)
            raise RuntimeError(f"NVRTC could not compile {name}: {lib.nvrtcGetErrorString(r).decode()}\n"
                               f"{log.value.decode(errors='replace')}")
        size = ctypes.c_size_t()
        check(lib.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
        ptx = ctypes.create_string_buffer(size.value)
        check(lib.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
        lowered = None
        if expression is not None:
            out = ctypes.c_char_p()
            check(lib.nvrtcGetLoweredName(prog, expression.encode(), ctypes.byref(out)), "nvrtcGetLoweredName")
            lowered = out.value.decode()
        return ptx.raw.rstrip(b"\0"), lowered
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
