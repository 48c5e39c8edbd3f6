"""Loads the Go extension on first use and turns its errors into UCXError subclasses.

Loading the extension starts the Go runtime, which does not survive fork(): so
importing ucxx_go loads nothing, and ``ext`` loads the extension at its first
attribute access. A child forked before that loads its own; a child forked after
gets UCXForkError from every access to ``ext`` instead of a hang in Go.

The extension links against libucp from the libucx wheel. libucx.load_library() loads
it first, so the extension's dependency resolves by soname wherever the wheels are
installed (no LD_LIBRARY_PATH). The extension is opened with lazy binding: go-nvml
leaves NVML's symbols unresolved until it has opened the driver's libnvidia-ml at run
time, which on a machine without a GPU never happens.
"""

import os
import re
import sys
import threading

from . import _constants as C
from .exceptions import (
    CollectiveError, CollectiveMismatchError, CollectiveTimeoutError, CollectiveUnsupportedError,
    CommunicatorBrokenError, PlanError, RankFailedError, UCXCloseError, UCXConfigError, UCXError, UCXForkError,
    exception_for_status,
)

# Loading: one thread loads, others wait (sys.setdlopenflags is process-wide). The lock
# is made afresh in a forked child, which a thread loading at fork() time would
# otherwise leave locked.
_lock = threading.Lock()
_loaded_by = None  # the pid that loaded (or began loading) the extension


class _Unloaded:
    """The extension before its first use: any attribute loads it."""

    def __getattr__(self, name):
        if name.startswith("__"):  # copy, pickle and inspect probe these: don't load for them
            raise AttributeError(name)
        _load()
        return getattr(self, name)

    def __repr__(self):
        return "<ucxx_go extension, not loaded>"


class _Loaded:
    """The loaded extension: its functions in the instance dict. No __getattr__, so an
    attribute access is a plain dict hit that the interpreter specialises, as cheap as
    the module's own."""

    def __repr__(self):
        return "<ucxx_go extension>"


class _Forked:
    """The extension in a child forked after the parent loaded it: unusable."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise UCXForkError(
            f"ucxx_go was used before fork() (process {_loaded_by} loaded its Go runtime, "
            "which does not survive fork()), so it cannot be used in this forked child. "
            "Start child processes with the 'spawn' or 'forkserver' start method "
            "(multiprocessing.get_context('spawn')), or fork before ucxx_go's first use."
        )

    def __repr__(self):
        return "<ucxx_go extension, unusable after fork()>"


ext = _Unloaded()


def _load():
    """Load the extension (libucp first, then the extension with lazy, local binding)
    and put its functions on ``ext``."""
    global _loaded_by
    with _lock:
        if type(ext) is not _Unloaded:
            return  # another thread loaded it meanwhile
        _loaded_by = os.getpid()
        try:
            import libucx

            _set_load_defaults()
            libucx.load_library()
            flags = sys.getdlopenflags()
            sys.setdlopenflags(os.RTLD_LAZY | os.RTLD_LOCAL)
            try:
                from . import _pybridge as module
            finally:
                sys.setdlopenflags(flags)
        except BaseException:
            _loaded_by = None
            raise
        ext.__dict__.update((k, v) for k, v in vars(module).items() if not k.startswith("__"))
        ext.__class__ = _Loaded


def _set_load_defaults():
    """Our defaults of the UCX settings read when its libraries load (core's
    UCXLoadDefaults), where the environment does not set them."""
    from . import _constants

    for pair in filter(None, _constants.UCX_LOAD_DEFAULTS.split(",")):
        key, value = pair.split("=", 1)
        os.environ.setdefault("UCX_" + key, value)


def _after_fork_in_child():
    """In a forked child: if the parent had loaded the extension (or was loading it),
    drop its functions, so that the next access raises UCXForkError."""
    global _lock
    _lock = threading.Lock()
    if _loaded_by is not None:
        ext.__dict__.clear()
        ext.__class__ = _Forked


os.register_at_fork(after_in_child=_after_fork_in_child)

# The errors' prefixes (pybridge/bridge.go): ERROR_PREFIX_STATUS, a status,
# ERROR_PREFIX_END; or ERROR_PREFIX_CLOSED.
_PREFIX = re.compile(
    "^(?:" + re.escape(C.ERROR_PREFIX_STATUS) + "(-?\\d+)" + re.escape(C.ERROR_PREFIX_END)
    + "|(" + re.escape(C.ERROR_PREFIX_CLOSED) + "))"
)


# A collective's failure (pybridge/collectives.go): ERROR_PREFIX_COLLECTIVE, its kind, a
# space, the rank involved (-1: none), ERROR_PREFIX_END.
_COLLECTIVE = re.compile(
    "^" + re.escape(C.ERROR_PREFIX_COLLECTIVE) + "(\\w+) (-?\\d+)" + re.escape(C.ERROR_PREFIX_END)
)
_COLLECTIVE_ERRORS = {
    C.COLLECTIVE_MISMATCH: CollectiveMismatchError,
    C.COLLECTIVE_RANK_FAILED: RankFailedError,
    C.COLLECTIVE_TIMEOUT: CollectiveTimeoutError,
    C.COLLECTIVE_BROKEN: CommunicatorBrokenError,
    C.COLLECTIVE_UNSUPPORTED: CollectiveUnsupportedError,
    C.COLLECTIVE_PLAN: PlanError,
}


def translate(err):
    """Return the UCXError for a RuntimeError raised by the extension."""
    msg = str(err)
    m = _COLLECTIVE.match(msg)
    if m is not None:
        exc = _COLLECTIVE_ERRORS.get(m.group(1), CollectiveError)(msg[m.end():])
        rank = int(m.group(2))
        exc.rank = rank if rank >= 0 else None
        return exc
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
