"""Requests: an operation of the Go core, from its gopy call to its completion.

An operation starts with one gopy call (``submit``). A transfer's result may be its
outcome already: ``INLINE_DONE`` set, the length in the low bits, no completion to
come. Otherwise it is a request id, whose completion comes through the ring
(_completions): a ``Request`` waits for it, holding what the operation needs until then.

    rid = submit(ext.pybridge_TagRecv, handle, addr, n, tag, mask, mem, stream, may_wait_inline(n, mem))
    n = rid & INLINE_LENGTH if rid & INLINE_DONE else await Request(ctx, rid, "Endpoint.recv", buffer, keep)
"""

import asyncio

from ._bridge import call, ext
from ._buffers import MEMORY_HOST
from ._constants import INLINE_DONE

__all__ = ["INLINE_DONE", "INLINE_LENGTH", "Request", "may_wait_inline", "submit"]

# The length of an operation that ended within its call, under INLINE_DONE.
INLINE_LENGTH = INLINE_DONE - 1


# Submitting an operation is one gopy call, whose failure raises the UCXError subclass
# for it: _bridge.call. Its result is a request id or, for a transfer, possibly
# INLINE_DONE | length.
submit = call


# Host transfers from this size take longer (100 µs and more) than a completion's way
# through the queue costs the caller; smaller ones usually end within the wait.
# Measured with four sends in flight between two processes on one host
# (benchmarks/RESULTS.md, session 25): skipping the wait lost at 8 B and 64 KiB on the
# 2-core VM and at 256 KiB on a 32-core host (won there on the VM), won at 1 and 4 MiB
# on the VM and at 1 MiB on the 32-core host.
_NO_WAIT_HOST_MIN = 1 << 20


def may_wait_inline(nbytes, mem):
    """1 when a transfer of ``nbytes`` of memory type ``mem`` may wait for its end
    within its call (the inline wait), 0 when it should not: it moves CUDA memory (a
    device copy takes 10 µs at least) or at least _NO_WAIT_HOST_MIN bytes, and the
    running event loop has other callbacks ready. Transfers started together
    (asyncio.gather) then each post at once, their ends coming through the queue,
    instead of each waiting for its own before the next is posted. An event loop
    without asyncio's ready queue (uvloop) always waits."""
    if mem == MEMORY_HOST and nbytes < _NO_WAIT_HOST_MIN:
        return 1
    try:
        ready = asyncio.get_running_loop()._ready
    except (RuntimeError, AttributeError):
        return 1
    return 0 if ready else 1


class Completed:
    """What a submission that ended within its call (``INLINE_DONE``) gives in place of
    a Request: awaiting it gives ``value`` at once; nothing is left to cancel."""

    __slots__ = ("future",)

    def __init__(self, loop, value=None):
        self.future = loop.create_future()
        self.future.set_result(value)

    def __await__(self):
        return self.future.__await__()


class Request:
    """A request in flight in the Go core, registered with the context's completions
    until its completion comes; ``await`` it for its result (a length, a block's
    address, an endpoint handle: the completion's value).

    Parameters
    ----------
    ctx : _context.Context
        The running context.
    rid : int
        The request id ``submit`` returned.
    where : str
        The operation, named in its errors (``"Endpoint.send"``).
    buffer, keep
        The buffer whose memory UCX uses, and what pins it (a memoryview export, the
        CUDA array...): both stay referenced until the completion, even after the
        awaiting task was cancelled, since until then UCX may still use the memory.
    release : callable, optional
        For an operation whose result is something Python then owns (a received
        block, a connected endpoint): how to free it, ``release(value)``, when the
        request succeeds but nobody takes the result (cancelled, or its event loop
        closed). The request owns the result until it is delivered.
    on_result : callable, optional
        Run on the completion's value where the completion is delivered, on the
        Future's loop, before any task wakes: ``on_result(value)`` gives the Future's
        result, or raises its exception. For work that must follow a completion at
        once (allocating a message's frames the moment its header is in), not a
        wake-up later.
    """

    __slots__ = ("id", "where", "future", "buffer", "keep", "release", "on_result", "settled", "_ctx")

    def __init__(self, ctx, rid, where, buffer=None, keep=None, release=None, on_result=None):
        loop = ctx.loop()
        self.id = rid
        self.where = where
        self.future = ctx.completions.future(loop)
        self.buffer = buffer
        self.keep = keep
        self.release = release
        self.on_result = on_result
        # Made by cancel() while the request is still in Go: resolved once its
        # completion came and what it owned was released (settle).
        self.settled = None
        self._ctx = ctx
        # Registered after the operation was submitted: another event loop's thread may
        # have drained its completion already, which then waits in `early`.
        ctx.completions.register(self)

    def __await__(self):
        """The completion's value.

        Raises
        ------
        UCXError
            The subclass for the UCS status the request failed with.
        asyncio.CancelledError
            The awaiting task was cancelled: so is the request (``cancel``).
        """
        try:
            return (yield from self.future)
        except asyncio.CancelledError:
            self.cancel()
            raise

    def cancel(self):
        """Give the request up: cancel its Future and, while its completion has not come,
        the request in Go (the completion still comes, and the request keeps its buffer
        until then). A result that came and that nobody took is released."""
        fut = self.future
        fut.cancel()
        ctx = self._ctx
        if ctx.pending.get(self.id) is self:
            self.settled = fut.get_loop().create_future()
            if not ctx.closed:
                try:
                    ext.pybridge_Cancel(self.id)
                except RuntimeError:
                    pass
        elif not fut.cancelled() and fut.exception() is None:
            self.unclaimed(fut.result())

    def forget(self):
        """Stop waiting for the completion, for a request whose completion may never
        come (no cancel in Go)."""
        pending = self._ctx.pending
        if pending.get(self.id) is self:
            del pending[self.id]

    def unclaimed(self, value):
        """The request succeeded with ``value`` and nobody takes it: release what it owns."""
        release, self.release = self.release, None
        if release is not None:
            release(value)

    def settle(self):
        """The completion of a cancelled request came (and ``unclaimed`` ran if it
        succeeded): wake whoever waits for that (``settled``)."""
        if self.settled is not None and not self.settled.done():
            self.settled.set_result(None)
