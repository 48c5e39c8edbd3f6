"""Loads the Go extension and turns its errors into UCXError subclasses.

The extension links against libucp from the libucx wheel. libucx.load_library() loads
it first, so the extension's dependency resolves by soname wherever the wheels are
installed (no LD_LIBRARY_PATH). The extension is opened with lazy binding: go-nvml
leaves NVML's symbols unresolved until it has opened the driver's libnvidia-ml at run
time, which on a machine without a GPU never happens.
"""

import os
import re
import sys

import libucx

from .exceptions import UCXCloseError, UCXConfigError, UCXError, exception_for_status

libucx.load_library()
_flags = sys.getdlopenflags()
sys.setdlopenflags(os.RTLD_LAZY | os.RTLD_LOCAL)
try:
    from . import _pybridge as ext
finally:
    sys.setdlopenflags(_flags)

_PREFIX = re.compile(r"^\[(?:ucs (-?\d+)|(closed))\] ")


def translate(err):
    """Return the UCXError for a RuntimeError raised by the extension."""
    msg = str(err)
    m = _PREFIX.match(msg)
    if m is None:
        return UCXError(msg)
    text = msg[m.end():]
    if m.group(2):
        return UCXCloseError(text)
    status = int(m.group(1))
    if "ucp_config_modify" in text:
        exc = UCXConfigError(text)
        exc.status = status
        return exc
    exc = exception_for_status(status)
    exc.args = (text,)
    return exc


def call(fn, *args):
    """Call an extension function, raising a UCXError subclass on failure."""
    try:
        return fn(*args)
    except RuntimeError as e:
        raise translate(e) from None
