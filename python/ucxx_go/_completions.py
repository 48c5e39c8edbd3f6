"""Completions: reading the Go core's completion ring and resolving Futures.

The progress thread writes (id, status, length, tag) entries into a ring in memory
that this module reads in place (layout: notifier/queue.go), so a whole batch of
completions costs no call into Go. Two ways bring the event loop to the ring:

- "reader" (the default): the ring's eventfd is registered with loop.add_reader, so
  the loop wakes by itself, with no thread hop;
- "thread" (UCXX's design): a notifier thread blocks in Go (GIL released) until the
  ring has entries, then schedules one drain on the loop.

Either way drains run on the event loop's thread, which is also where requests are
registered, so a completion can never be read before its Future is registered.
"""

import asyncio
import ctypes
import logging
import threading

from . import _constants as C
from . import _ucx_log
from ._bridge import ext
from .exceptions import UCXCanceledError, exception_for_status

logger = logging.getLogger("ucxx_go")

# Word indexes (u64) into the ring, and into an entry (notifier/queue.go).
_HEAD, _TAIL, _CAPACITY, _ENTRIES = C.RING_HEAD_WORD, C.RING_TAIL_WORD, C.RING_CAPACITY_WORD, C.RING_ENTRIES_WORD
_LOG = C.RING_LOG_WORD  # set while UCX log records wait (_ucx_log)
_ENTRY_WORDS = C.COMPLETION_WORDS
_ID, _STATUS, _LENGTH = C.COMPLETION_ID_WORD, C.COMPLETION_STATUS_WORD, C.COMPLETION_LENGTH_WORD

# A completion whose id has one of these bits is an event (core/engine.go).
_EVENT_MASK = C.EVENT_ENDPOINT_ERROR | C.EVENT_LISTENER_ACCEPT
# The status is an int64 read as a u64 word.
_SIGN = 1 << 63
_WRAP = 1 << 64

_WAIT_READY, _WAIT_CLOSED = C.WAIT_READY, C.WAIT_CLOSED

MODES = ("thread", "reader")

# The Future pool: creating an asyncio Future costs ~540 ns, taking one from a list
# ~115 ns. In thread mode the notifier thread refills the pool (to _POOL_FULL when
# below _POOL_LOW, as UCXX does), so creation leaves the event loop's thread; in
# reader mode the loop creates them in batches when the pool runs dry.
_POOL_LOW, _POOL_FULL, _POOL_BATCH = 50, 100, 32

_PyBUF_WRITE = 0x200
_from_memory = ctypes.pythonapi.PyMemoryView_FromMemory
_from_memory.restype = ctypes.py_object
_from_memory.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int)


def _memory_view(address, size):
    """A writable byte memoryview of memory Go mapped (not owned by Python)."""
    return _from_memory(address, size, _PyBUF_WRITE)


class Completions:
    """The ring, the pending requests, and the delivery mode that drains one into the other."""

    def __init__(self, address, size, fd, mode, on_event):
        if mode not in MODES:
            raise ValueError(f"completion mode must be one of {MODES}, got {mode!r}")
        self._words = _memory_view(address, size).cast("Q")
        self._mask = self._words[_CAPACITY] - 1
        self._fd = fd
        self.mode = mode
        self._on_event = on_event
        # request id -> its _request.Request, until its completion is drained
        self.pending = {}
        self._loop = None
        self._scheduled = False
        self._thread = None
        self._stopped = False
        self._pool = []

    # -- binding to an event loop ----------------------------------------------------

    def bind(self, loop):
        """Deliver to `loop` from now on (the first loop, or a new one after asyncio.run)."""
        if loop is self._loop:
            return
        old, self._loop = self._loop, loop
        if self.mode == "reader":
            if old is not None and not old.is_closed():
                try:
                    old.remove_reader(self._fd)
                except (RuntimeError, ValueError):
                    pass
            loop.add_reader(self._fd, self._on_readable)
        elif self._thread is None:
            self._thread = threading.Thread(target=self._notifier, name="ucxx_go-notifier", daemon=True)
            self._thread.start()
        self._scheduled = False
        self._pool = []  # Futures of the old loop are useless
        # Entries may have arrived while no loop was bound.
        loop.call_soon(self.drain)

    @property
    def loop(self):
        return self._loop

    def future(self):
        """A Future of the bound loop, from the pool."""
        try:
            return self._pool.pop()
        except IndexError:
            loop = self._loop
            self._pool = [loop.create_future() for _ in range(_POOL_BATCH)]
            return loop.create_future()

    def _refill(self, loop):
        """Top the pool up from the notifier thread (Future creation is thread-safe:
        it touches no loop state)."""
        pool = self._pool
        if len(pool) < _POOL_LOW:
            fresh = [asyncio.Future(loop=loop) for _ in range(_POOL_FULL - len(pool))]
            if self._loop is loop:
                pool.extend(fresh)

    # -- delivery modes --------------------------------------------------------------

    def _notifier(self):
        """The notifier thread: wait in Go without the GIL, then have the loop drain."""
        wait = ext.pybridge_NotifierWait
        while True:
            try:
                r = wait(1000)
            except RuntimeError:
                r = _WAIT_CLOSED
            loop = self._loop
            if r == _WAIT_CLOSED:
                self._call_soon(loop, self.drain)
                return
            if r == _WAIT_READY and not self._scheduled and loop is not None:
                self._scheduled = True
                self._call_soon(loop, self._scheduled_drain)
            if loop is not None and not loop.is_closed():
                self._refill(loop)

    @staticmethod
    def _call_soon(loop, fn):
        if loop is not None:
            try:
                loop.call_soon_threadsafe(fn)
            except RuntimeError:
                pass  # the loop closed; the next bound loop drains

    def _scheduled_drain(self):
        self._scheduled = False
        self.drain()

    def _on_readable(self):
        # Go empties the eventfd and then clears the wake flag with a full fence: the
        # order the wake-up protocol needs, which Python cannot express (see
        # notifier/queue.go). One call per wake-up, however many completions it drains.
        try:
            ext.pybridge_ConsumeWake()
        except RuntimeError:
            return
        self.drain()

    # -- draining --------------------------------------------------------------------

    def drain(self):
        """Resolve the Future of every completion in the ring."""
        if self._stopped:
            return
        w = self._words
        mask = self._mask
        pending = self.pending
        tail = w[_TAIL]
        while True:
            head = w[_HEAD]
            if tail == head:
                break
            while tail != head:
                i = _ENTRIES + (tail & mask) * _ENTRY_WORDS
                rid, status, length = w[i + _ID], w[i + _STATUS], w[i + _LENGTH]
                tail += 1
                if rid & _EVENT_MASK:
                    self._event(rid, status, length)
                    continue
                req = pending.pop(rid, None)
                if req is None:
                    continue
                fut = req.future
                if fut.done():
                    # Cancelled: the buffer is released now that Go is done with it, and
                    # what the request owns (a message that arrived anyway) goes to its
                    # release, since this awaiter will not take it.
                    if status == 0:
                        req.unclaimed(length)
                    try:
                        req.settle()
                    except RuntimeError:
                        pass  # its loop is closed
                    continue
                try:
                    if status == 0:
                        fut.set_result(length)
                    else:
                        status = status - _WRAP if status & _SIGN else status
                        fut.set_exception(exception_for_status(status, req.where))
                except RuntimeError:
                    # The Future's loop is closed.
                    if status == 0:
                        req.unclaimed(length)
            w[_TAIL] = tail
        if w[_LOG]:
            _ucx_log.forward()

    def _event(self, rid, status, length):
        status = status - _WRAP if status & _SIGN else status
        try:
            self._on_event(rid, status, length)
        except Exception:  # an event handler must not stop the drain
            logger.exception("ucxx_go: error handling event %#x", rid)

    def stop(self):
        """Final drain after the engine stopped; later drains do nothing."""
        if self.mode == "reader" and self._loop is not None and not self._loop.is_closed():
            try:
                self._loop.remove_reader(self._fd)
            except (RuntimeError, ValueError):
                pass
        try:
            self.drain()
        finally:
            self._stopped = True
        for req in self.pending.values():
            fut = req.future
            if not fut.done():
                try:
                    fut.set_exception(exception_for_status(UCXCanceledError.status, "ucxx_go was reset"))
                except RuntimeError:
                    pass
        self.pending.clear()

    def join(self, timeout):
        if self._thread is not None:
            self._thread.join(timeout)

    def release(self):
        """Drop the view of the ring before Go unmaps it."""
        self._words.release()
        self._words = None
