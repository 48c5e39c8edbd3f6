"""The UCXError family, with RAPIDS UCXX's names: one subclass per UCS status.

Every failure ucxx_go reports is a UCXError. Match the subclass to tell a peer that
went away (UCXConnectionResetError, UCXEndpointTimeoutError, ...) from work we
cancelled (UCXCanceledError), from use after close (UCXCloseError) and from use in a
child forked after the parent used ucxx_go (UCXForkError).
"""

__all__ = [
    "UCXError", "UCXNoMessageError", "UCXNoResourceError", "UCXIOError", "UCXNoMemoryError",
    "UCXInvalidParamError", "UCXUnreachableError", "UCXInvalidAddrError",
    "UCXNotImplementedError", "UCXMessageTruncatedError", "UCXNoProgressError",
    "UCXBufferTooSmallError", "UCXNoElemError", "UCXSomeConnectsFailedError",
    "UCXNoDeviceError", "UCXBusyError", "UCXCanceledError", "UCXShmemSegmentError",
    "UCXAlreadyExistsError", "UCXOutOfRangeError", "UCXTimedOutError",
    "UCXExceedsLimitError", "UCXUnsupportedError", "UCXRejectedError",
    "UCXNotConnectedError", "UCXConnectionResetError", "UCXFirstLinkFailureError",
    "UCXLastLinkFailureError", "UCXFirstEndpointFailureError", "UCXEndpointTimeoutError",
    "UCXLastEndpointFailureError", "UCXCloseError", "UCXConfigError", "UCXForkError", "UCXCanceled",
    "UCXMsgTruncated", "exception_for_status",
    "CollectiveError", "CollectiveMismatchError", "RankFailedError", "CollectiveTimeoutError",
    "CommunicatorBrokenError", "CollectiveUnsupportedError", "PlanError",
]


class UCXError(Exception):
    """Base class of every ucxx_go error. `status` is the UCS status, when there is one."""

    status = None


# Where UCXX raises a class for a case in which ours is more precise, ours is a
# subclass of UCXX's: pending operations of an endpoint whose peer went away fail with
# UCXConnectionResetError here, UCXCanceledError in UCXX (it cancels them).
_UCXX_BASES = {"UCXConnectionResetError": "UCXCanceledError"}


def _make(name, status, doc):
    base = globals()[_UCXX_BASES[name]] if name in _UCXX_BASES else UCXError
    cls = type(name, (base,), {"__doc__": doc, "status": status})
    globals()[name] = cls
    return cls


# (class name, UCS status, UCX's description)
_STATUSES = [
    ("UCXNoMessageError", -1, "No pending message"),
    ("UCXNoResourceError", -2, "No resources are available to initiate the operation"),
    ("UCXIOError", -3, "Input/output error"),
    ("UCXNoMemoryError", -4, "Out of memory"),
    ("UCXInvalidParamError", -5, "Invalid parameter"),
    ("UCXUnreachableError", -6, "Destination is unreachable"),
    ("UCXInvalidAddrError", -7, "Address not valid"),
    ("UCXNotImplementedError", -8, "Function not implemented"),
    ("UCXMessageTruncatedError", -9, "Message truncated"),
    ("UCXNoProgressError", -10, "No progress"),
    ("UCXBufferTooSmallError", -11, "Provided buffer is too small"),
    ("UCXNoElemError", -12, "No such element"),
    ("UCXSomeConnectsFailedError", -13, "Failed to connect some of the requested endpoints"),
    ("UCXNoDeviceError", -14, "No such device"),
    ("UCXBusyError", -15, "Device is busy"),
    ("UCXCanceledError", -16, "Request canceled"),
    ("UCXShmemSegmentError", -17, "Shared memory error"),
    ("UCXAlreadyExistsError", -18, "Element already exists"),
    ("UCXOutOfRangeError", -19, "Index out of range"),
    ("UCXTimedOutError", -20, "Operation timed out"),
    ("UCXExceedsLimitError", -21, "User-defined limit was reached"),
    ("UCXUnsupportedError", -22, "Unsupported operation"),
    ("UCXRejectedError", -23, "Operation rejected by remote peer"),
    ("UCXNotConnectedError", -24, "Endpoint is not connected"),
    ("UCXConnectionResetError", -25, "Connection reset by remote peer"),
    ("UCXFirstLinkFailureError", -40, "First link failure"),
    ("UCXLastLinkFailureError", -59, "Last link failure"),
    ("UCXFirstEndpointFailureError", -60, "First endpoint failure"),
    ("UCXEndpointTimeoutError", -80, "Endpoint timeout"),
    ("UCXLastEndpointFailureError", -89, "Last endpoint failure"),
]

_BY_STATUS = {status: _make(name, status, text) for name, status, text in _STATUSES}
_TEXT = {status: text for _, status, text in _STATUSES}

# What ucxx_go adds to UCX's description where the status usually comes from ucxx_go
# itself: ExceedsLimit is one of the bounds on what a peer may make this process hold.
_HINTS = {
    -21: "a bound on what a peer may make this process hold: max_unexpected_bytes "
         "(UCXGO_MAX_UNEXPECTED_BYTES) for messages sent with no receive posted, "
         "multi_buffer_limits for recv_multi",
}


class UCXCloseError(UCXError):
    """The endpoint or listener was closed, or ucxx_go was reset, before the call."""


class UCXConfigError(UCXInvalidParamError):  # noqa: F821 (made by _make above)
    """A UCX configuration option or value was rejected (UCXX raises
    UCXInvalidParamError, of which this is a subclass)."""


class UCXForkError(UCXError):
    """ucxx_go was used in a child forked after the parent had used it: the Go runtime
    does not survive fork(). Start children with the 'spawn' or 'forkserver' method, or
    fork before ucxx_go's first use."""


class CollectiveError(UCXError):
    """A collective call (Communicator.allreduce, execute, ...) failed. `rank` is the
    other rank involved (the one waited for, written to or read from), or None."""

    rank = None


class CollectiveMismatchError(CollectiveError):
    """The ranks did not make the same call (collective, plan, size, type, operator or
    root), or a rank's call failed its own checks. Every rank gets it before any byte
    moves; the communicator stays usable."""


class RankFailedError(CollectiveError):
    """Another rank died, or misbehaved, during the call (`rank` names it). The
    communicator is broken afterwards: make a new one."""


class CollectiveTimeoutError(CollectiveError, UCXTimedOutError):  # noqa: F821 (made by _make above)
    """A rank did not come within the communicator's timeout (`rank` names it). The
    communicator is broken afterwards."""


class CommunicatorBrokenError(CollectiveError):
    """An earlier call failed part-way (a rank died or timed out), so the ranks' states
    may differ: every later call fails with this. Make a new communicator."""


class CollectiveUnsupportedError(CollectiveError, NotImplementedError):
    """The call or plan needs something not built yet (ranks on several hosts, GPU
    memory, an element type or operator)."""


class PlanError(CollectiveError, ValueError):
    """The execution plan is malformed, or does not fit the call (sizes that do not
    divide into its chunks, buffers that do not follow its in-place convention)."""


# UCXX's aliases.
UCXCanceled = UCXCanceledError  # noqa: F821 (made by _make above)
UCXMsgTruncated = UCXMessageTruncatedError  # noqa: F821


def exception_for_status(status, where=""):
    """Return the UCXError instance for a UCS status, with `where` as context.

    Statuses inside UCX's link and endpoint failure ranges map to the class of the
    range's first code, as UCX's own status checks do.
    """
    cls = _BY_STATUS.get(status)
    if cls is None:
        if -59 <= status <= -40:
            cls = _BY_STATUS[-40]
        elif -89 <= status <= -60:
            cls = _BY_STATUS[-60]
        else:
            cls = UCXError
    text = _TEXT.get(status, f"UCS status {status}")
    if status in _HINTS:
        text = f"{text} ({_HINTS[status]})"
    exc = cls(f"{where}: {text}" if where else text)
    exc.status = status
    return exc
