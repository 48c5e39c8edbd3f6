"""Listener: accepts connections and hands each to the user's handler as an Endpoint."""

import asyncio
import inspect
import logging
import weakref

from ._bridge import call, ext
from ._endpoint import Endpoint
from .exceptions import UCXError

logger = logging.getLogger("ucxx_go")
ucx_logger = logging.getLogger("ucx")  # UCXX's logger, which its users watch


class _Handlers:
    """The listener's handler tasks still running. Held by the tasks' callbacks rather
    than the listener, so that a running handler does not keep its listener alive."""

    __slots__ = ("tasks",)

    def __init__(self):
        self.tasks = set()

    def done(self, task):
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("Uncaught listener callback error", exc_info=task.exception())


def _stop_listening(ctx, handle, handlers=None):
    """Close the Go listener `handle`: Listener.close, or the listener's finalizer
    (then, as UCXX, warn when handlers still run)."""
    if handlers is not None and handlers.tasks:
        ucx_logger.warning(
            "Listener object is being destroyed, but %d client handler(s) is(are) still alive. "
            "This usually indicates the Listener was prematurely destroyed.", len(handlers.tasks),
        )
    ctx.listeners.pop(handle, None)
    if not ctx.closed:
        try:
            ext.pybridge_CloseListener(handle)
        except RuntimeError:
            pass


class Listener:
    """A listening socket address; create with create_listener(). As UCXX's, it
    listens until close() or until the object is deleted, whichever comes first."""

    def __init__(self, ctx, handler, ip, port, endpoint_error_handling=True):
        if not callable(handler):
            raise TypeError(f"the listener's handler must be callable, got {type(handler).__name__}")
        res = call(ext.pybridge_Listen, ip, port, bool(endpoint_error_handling))
        handle, bound = (int(x) for x in res.split())
        self._ctx = ctx
        self._handler = handler
        self._handle = handle
        self._ip = ip or "0.0.0.0"
        self._port = bound
        self._endpoint_error_handling = bool(endpoint_error_handling)
        self._closed = False
        self._handlers = _Handlers()
        ctx.listeners[handle] = self  # weakly: deleting the listener stops it
        self._finalizer = weakref.finalize(self, _stop_listening, ctx, handle, self._handlers)
        # Accepts are delivered on the event loop the listener was made in (UCXX's
        # create_listener is synchronous but called from async code), which watches
        # the ring from now on; outside a loop, on whichever loop drains.
        try:
            self._loop = ctx.loop()
        except RuntimeError:
            self._loop = None

    @property
    def port(self):
        return self._port

    @property
    def ip(self):
        return self._ip

    @property
    def closed(self):
        return self._closed

    @property
    def endpoint_error_handling(self):
        """Whether the endpoints this listener accepts have UCX's peer error handling."""
        return self._endpoint_error_handling

    @property
    def active_clients(self):
        """How many of this listener's handler coroutines are still running, as UCXX's."""
        return len(self._handlers.tasks)

    def _on_accept(self, handle):
        loop = self._loop
        if loop is not None and loop is not asyncio._get_running_loop() and not loop.is_closed():
            loop.call_soon_threadsafe(self._on_accept_here, handle)
            return
        self._on_accept_here(handle)

    def _on_accept_here(self, handle):
        try:
            ep = Endpoint._from_handle(self._ctx, handle)
        except UCXError:  # closed before it could be handed on (the engine stopping)
            return
        if self._closed:
            ep.abort()
            return
        try:
            result = self._handler(ep)
        except Exception:
            logger.exception("Uncaught listener callback error")
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self._handlers.tasks.add(task)
            task.add_done_callback(self._handlers.done)

    def close(self):
        """Stop accepting connections. Endpoints already accepted stay open."""
        if self._closed:
            return
        self._closed = True
        self._finalizer.detach()
        _stop_listening(self._ctx, self._handle)

    def __repr__(self):
        return f"<ucxx_go.Listener {self._ip}:{self._port}{' closed' if self._closed else ''}>"
