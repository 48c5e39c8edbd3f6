"""Loop progress: the event loop drives the Go engine's worker (no progress thread).

In loop mode (``UCXGO_PROGRESS_MODE=loop``, see _context and docs/progress-modes.md)
the thread that started the engine owns the UCP worker. Its own calls into the engine
dispatch and progress inline; everything else (UCX's events, submissions from other
threads, deadlines) makes one file descriptor readable, which the owner's event loop
watches: the callback runs one pass of the engine (``pybridge.Progress``), then drains
the completions it produced.
"""

import threading

from ._bridge import ext

MODES = ("thread", "loop", "auto")


class LoopProgress:
    """The reader on the engine's poll fd, on the owner thread's running loop."""

    def __init__(self, fd, completions):
        self.fd = fd
        self.owner = threading.get_ident()  # the thread that started the engine
        self.completions = completions
        self.loop = None
        self.stopped = False

    def bind(self, loop):
        """Watch the poll fd on `loop` if it runs on the owner thread (the only thread
        that may progress the engine); a loop on another thread is served by the
        owner's loop, through the engine's submission pool."""
        if loop is self.loop or self.stopped or threading.get_ident() != self.owner:
            return
        self._unbind()
        self.loop = loop
        loop.add_reader(self.fd, self._on_readable)
        loop.call_soon(self._on_readable)  # what came while no loop watched

    def _on_readable(self):
        if self.stopped:
            return
        try:
            stopped = ext.pybridge_Progress()
        except RuntimeError:
            stopped = True
        if stopped:
            self.stop()
        self.completions.drain()

    def _unbind(self):
        loop, self.loop = self.loop, None
        if loop is not None and not loop.is_closed():
            try:
                loop.remove_reader(self.fd)
            except (RuntimeError, ValueError):
                pass

    def stop(self):
        """The engine stopped: stop watching (its fd is closed or about to be)."""
        self.stopped = True
        self._unbind()
