"""Completions: reading the Go core's completion ring and resolving Futures.

The progress thread writes (id, status, length, tag) entries into a ring in memory
that this module reads in place (layout: notifier/queue.go), so a whole batch of
completions costs no call into Go. Two ways bring the event loop to the ring:

- "reader" (the default): the ring's eventfd is registered with loop.add_reader, so
  the loop wakes by itself, with no thread hop;
- "thread" (UCXX's design): a notifier thread blocks in Go (GIL released) until the
  ring has entries, then schedules one drain on the loop.

Either way drains run on an event loop's thread, and a request is registered before
its operation is submitted, so a completion can never be read before its Request.

Several event loops (threads each running asyncio.run, say) may use the library at
once: every loop that made a request watches the ring (reader mode: its own reader on
the eventfd; thread mode: the notifier thread wakes the most recent live one), one
drain runs at a time, and each completion is resolved on the loop its Future belongs
to (call_soon_threadsafe when that is another loop). So a loop that goes away never
leaves another's completions unread.
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

# The most completions kept for requests not registered yet (see register).
_EARLY_MAX = 4096
# Requests whose engine did not stop (a reset that timed out): UCX may still write
# into their buffers, which therefore live as long as the process.
_ABANDONED = []

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


def _fail(fut, exc):
    if not fut.done():
        fut.set_exception(exc)


def _resolve(req, status, length):
    """Resolve a request's Future with its completion, on the Future's loop."""
    fut = req.future
    if fut.done():
        # Cancelled: the buffer is released now that Go is done with it, and what the
        # request owns (a message that arrived anyway) goes to its release, since this
        # awaiter will not take it.
        if status == 0:
            req.unclaimed(length)
        try:
            req.settle()
        except RuntimeError:
            pass  # its loop is closed
        return
    try:
        if status == 0:
            if req.on_result is None:
                fut.set_result(length)
            else:
                _resolve_through(req, fut, length)
        else:
            status = status - _WRAP if status & _SIGN else status
            fut.set_exception(exception_for_status(status, req.where))
    except RuntimeError:
        # The Future's loop is closed.
        if status == 0:
            req.unclaimed(length)


def _resolve_through(req, fut, value):
    """Resolve fut with req.on_result(value): its result, or the exception it raised."""
    try:
        result = req.on_result(value)
    except Exception as exc:  # the awaiting task raises it
        fut.set_exception(exc)
    else:
        fut.set_result(result)


class Completions:
    """The ring, the pending requests, and the delivery mode that drains one into the other."""

    def __init__(self, address, size, fd, queue, mode, on_event):
        if mode not in MODES:
            raise ValueError(f"completion mode must be one of {MODES}, got {mode!r}")
        self.queue = queue  # names the queue to the bridge (NotifierWait, ConsumeWake, FreeQueue)
        self._words = _memory_view(address, size).cast("Q")
        self._mask = self._words[_CAPACITY] - 1
        self._fd = fd
        self.mode = mode
        self._on_event = on_event
        # request id -> its _request.Request, until its completion is drained
        self.pending = {}
        # Completions drained before their Request was registered (another loop's
        # thread drained them between submit and register): id -> (status, length).
        self._early = {}
        self._registering = threading.Lock()  # guards the pending/early hand-over
        self._loop = None  # the most recently attached loop
        self._loops = []  # every loop attached and not closed
        self._draining = threading.Lock()  # one drain at a time, whichever thread
        self._binding = threading.Lock()  # guards _loops
        self._scheduled = False
        self._thread = None
        self._stopped = False
        # The Future pool: (loop, Futures of that loop). Replaced whole, never mixed:
        # a Future of another loop would resolve where nobody awaits it.
        self._pool = (None, [])

    # -- binding to an event loop ----------------------------------------------------

    def bind(self, loop):
        """Have `loop` watch the ring too (its requests' completions reach it whichever
        loop drains)."""
        if loop is self._loop:
            return
        with self._binding:
            self._loop = loop
            self._loops = [lp for lp in self._loops if not lp.is_closed()]
            if loop in self._loops:
                return
            self._loops.append(loop)
            if self.mode == "reader":
                loop.add_reader(self._fd, self._on_readable)
            elif self._thread is None:
                self._thread = threading.Thread(target=self._notifier, name="ucxx_go-notifier", daemon=True)
                self._thread.start()
            self._scheduled = False
        # Entries may have arrived while no loop watched.
        loop.call_soon(self.drain)

    @property
    def loop(self):
        return self._loop

    def future(self, loop):
        """A Future of `loop` (the running one), from the pool."""
        pool_loop, pool = self._pool
        if pool_loop is loop:
            try:
                return pool.pop()
            except IndexError:
                pass
        self._pool = (loop, [loop.create_future() for _ in range(_POOL_BATCH)])
        return loop.create_future()

    def _refill(self, loop):
        """Top the pool up from the notifier thread (Future creation is thread-safe:
        it touches no loop state)."""
        pool_loop, pool = self._pool
        if pool_loop is loop and len(pool) < _POOL_LOW:
            pool.extend(asyncio.Future(loop=loop) for _ in range(_POOL_FULL - len(pool)))

    # -- delivery modes --------------------------------------------------------------

    def _notifier(self):
        """The notifier thread: wait in Go without the GIL, then have the loop drain."""
        wait, queue = ext.pybridge_NotifierWait, self.queue
        while True:
            try:
                r = wait(queue, 1000)
            except RuntimeError:
                r = _WAIT_CLOSED
            loop = self._live_loop()
            if r == _WAIT_CLOSED:
                self._call_soon(loop, self.drain)
                return
            if r == _WAIT_READY and not self._scheduled and loop is not None:
                self._scheduled = True
                self._call_soon(loop, self._scheduled_drain)
            if loop is not None and not loop.is_closed():
                self._refill(loop)

    def _live_loop(self):
        """The most recently attached loop that is not closed (thread mode's drainer)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            return loop
        for lp in reversed(self._loops):
            if not lp.is_closed():
                return lp
        return None

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
            ext.pybridge_ConsumeWake(self.queue)
        except RuntimeError:
            return
        self.drain()

    # -- draining --------------------------------------------------------------------

    def drain(self):
        """Resolve the Future of every completion in the ring."""
        if self._stopped:
            return
        with self._draining:
            self._drain()

    def _drain(self):
        here = asyncio._get_running_loop()
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
                    with self._registering:
                        req = pending.pop(rid, None)
                        if req is None:
                            self._keep_early(rid, status, length)
                            continue
                loop = req.future.get_loop()
                if loop is here or here is None:
                    _resolve(req, status, length)
                    continue
                try:
                    loop.call_soon_threadsafe(_resolve, req, status, length)
                except RuntimeError:  # its loop is closed: nobody takes the result
                    if status == 0:
                        req.unclaimed(length)
            w[_TAIL] = tail
        if w[_LOG]:
            _ucx_log.forward()

    def register(self, req):
        """Register a submitted request for its completion, or resolve it now if a drain
        already read its completion."""
        with self._registering:
            early = self._early.pop(req.id, None) if self._early else None
            if early is None:
                self.pending[req.id] = req
                return
        _resolve(req, *early)

    def _keep_early(self, rid, status, length):
        early = self._early
        if len(early) >= _EARLY_MAX:  # ids nobody registers (forgotten requests)
            del early[next(iter(early))]
        early[rid] = (status, length)

    def _event(self, rid, status, length):
        status = status - _WRAP if status & _SIGN else status
        try:
            self._on_event(rid, status, length)
        except Exception:  # an event handler must not stop the drain
            logger.exception("ucxx_go: error handling event %#x", rid)

    def stop(self, abandon=False):
        """Final drain after the engine stopped; later drains do nothing. The requests
        still pending fail; with `abandon` (the engine did not stop: operations may
        still be in flight) their buffers are kept referenced for the process's life."""
        if self.mode == "reader":
            for loop in self._loops:
                if not loop.is_closed():
                    try:
                        loop.remove_reader(self._fd)
                    except (RuntimeError, ValueError):
                        pass
        try:
            self.drain()
        finally:
            self._stopped = True
        here = asyncio._get_running_loop()

        def on_loop_of(future, fn, *args):
            # fn(*args) now if future's loop is this thread's (or none runs here), else
            # on that loop; nothing if it is closed.
            try:
                if future.get_loop() is here or here is None:
                    fn(*args)
                else:
                    future.get_loop().call_soon_threadsafe(fn, *args)
            except RuntimeError:
                pass  # its loop is closed

        for req in self.pending.values():
            fut = req.future
            if not fut.done():
                on_loop_of(fut, _fail, fut, exception_for_status(UCXCanceledError.status, "ucxx_go was reset"))
            elif req.settled is not None and not req.settled.done():
                # Cancelled here, its completion never came (the stop gave up): whoever
                # waits for it to settle (Endpoint._earlier) goes on.
                on_loop_of(req.settled, req.settle)
        if abandon:
            _ABANDONED.extend(self.pending.values())
        self.pending.clear()

    def join(self, timeout):
        if self._thread is not None:
            self._thread.join(timeout)

    def release(self):
        """Drop the view of the ring before Go unmaps it."""
        self._words.release()
        self._words = None
