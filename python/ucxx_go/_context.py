"""The process's ucxx_go context: one Go engine (UCP context, worker, progress thread),
its completion queue, and the endpoints and listeners made from it.

UCXX's asyncio API has one implicit context, created on first use or by init(), and
torn down by reset(); so does ucxx_go.
"""

import asyncio
import atexit
import gc
import json
import logging
import os
import threading
import weakref

from . import _completions, _loop_progress, _ucx_log
from ._constants import EVENT_ENDPOINT_ERROR, EVENT_LISTENER_ACCEPT
from ._bridge import call, ext, translate
from .exceptions import UCXError

# UCXX's progress modes, and what each means for ucxx_go's progress engine. Our
# progress thread always owns the worker (no mode lets the application thread call
# UCX); what the mode picks is how that thread waits.
PROGRESS_MODES = {
    "thread": "blocking",  # UCXX's default: progress thread waiting on events
    "blocking": "blocking",  # UCXX: the application progresses on events; ours: the same wait
    "thread-polling": "polling",  # progress thread spinning
    "polling": "polling",  # UCXX: the application polls; ours: the progress thread spins
}

LIMIT_KEYS = (
    "max_frames", "max_frame_bytes", "max_message_bytes", "max_outstanding_bytes", "max_endpoint_outstanding_bytes",
    "max_unexpected_bytes",
)

_lock = threading.Lock()
_context = None


def _env_flag(name, default):
    """A UCXX variable read as UCXX reads it: set to anything but "0", it is on
    (`UCXPY_ENABLE_DELAYED_SUBMISSION=n` is on there, and here); we also take "false",
    "no" and "off" (any case) for off. Our own switches use _env_switch."""
    v = os.environ.get(name)
    if v is None or v == "":
        return default
    return v.strip().lower() not in ("0", "false", "no", "off")


def _env_switch(name):
    """A switch that is off unless the environment turns it on: "1", "true", "yes", "on"
    or "y" (any case); unset, "", "0", "false", "no", "off" or "n" leave it off, and
    anything else is refused, so that a misspelt value cannot turn on what is off by
    default for safety."""
    v = os.environ.get(name, "").strip().lower()
    if v in ("1", "true", "yes", "on", "y"):
        return True
    if v in ("", "0", "false", "no", "off", "n"):
        return False
    raise ValueError(f"{name}={os.environ[name]!r}: use 1 or 0")


class Context:
    """The running engine. Use the module functions rather than this class."""

    def __init__(self, options, progress_mode, delayed_submission, completion_mode, connect_timeout, limits,
                 warm_up="", engine_progress="thread", one_sided=False):
        self.progress_mode = progress_mode
        self.engine_progress = engine_progress
        self.connect_timeout = connect_timeout
        self.limits = limits
        engine_mode = "loop" if engine_progress == "loop" else PROGRESS_MODES[progress_mode]
        try:
            res = call(ext.pybridge_Start, json.dumps(options), engine_mode, delayed_submission, json.dumps(limits),
                       warm_up, one_sided)
        finally:
            _ucx_log.forward()  # what UCX said while starting (why it refused), now
        address, size, fd, queue = (int(x) for x in res.split())
        self.delayed_submission = delayed_submission
        try:
            self.completions = _completions.Completions(address, size, fd, queue, completion_mode, self._on_event)
        except BaseException:
            ext.pybridge_Stop(1000)
            ext.pybridge_FreeQueue(queue)
            raise
        self.pending = self.completions.pending  # request id -> Request
        self.loop_progress = None
        if engine_progress == "loop":
            self.loop_progress = _loop_progress.LoopProgress(ext.pybridge_PollFD(), self.completions)
            try:
                self.loop_progress.bind(asyncio.get_running_loop())
            except RuntimeError:
                pass  # no loop runs yet: the first request's binds
        self.endpoints = weakref.WeakValueDictionary()  # handle -> Endpoint
        self.listeners = weakref.WeakValueDictionary()  # handle -> Listener
        self.closed = False

    # -- requests (_request.Request) ---------------------------------------------------

    def loop(self):
        """The running event loop, to which completions are delivered from now on."""
        loop = asyncio.get_running_loop()
        if loop is not self.completions.loop:
            self.completions.bind(loop)
            if self.loop_progress is not None:
                self.loop_progress.bind(loop)
        return loop

    # -- events ------------------------------------------------------------------------

    def _on_event(self, rid, status, value):
        if rid & EVENT_ENDPOINT_ERROR:
            ep = self.endpoints.get(rid & ~EVENT_ENDPOINT_ERROR)
            if ep is not None:
                ep._on_error(status)
        elif rid & EVENT_LISTENER_ACCEPT:
            listener = self.listeners.get(rid & ~EVENT_LISTENER_ACCEPT)
            if listener is None:
                call(ext.pybridge_AbortEndpoint, value)
                return
            listener._on_accept(value)

    # -- teardown ----------------------------------------------------------------------

    def live_objects(self):
        eps = [ep for ep in list(self.endpoints.values()) if not ep.closed]
        return eps, [lst for lst in self.listeners.values() if not lst.closed]

    def shutdown(self, timeout=5.0):
        if self.closed:
            return
        self.closed = True
        stopped = False
        try:
            ext.pybridge_Stop(int(timeout * 1000))
            stopped = True
        except RuntimeError as e:
            raise translate(e) from None
        finally:
            if self.loop_progress is not None:
                self.loop_progress.stop()
            self.completions.join(timeout)
            # A stop that failed (gave up on a busy progress thread) may leave
            # operations in flight: their buffers are kept for good.
            self.completions.stop(abandon=not stopped)
            self.completions.release()
            ext.pybridge_FreeQueue(self.completions.queue)
            _ucx_log.forward()  # what UCX said while shutting down


def init(
    options=None,
    env_takes_precedence=False,
    progress_mode=None,
    enable_delayed_submission=None,
    enable_python_future=None,
    connect_timeout=None,
    completion_mode=None,
    multi_buffer_limits=None,
    keepalive_timeout=None,
    warm_up=None,
    engine_progress=None,
    one_sided=None,
):
    """Initialise ucxx_go's UCX context and progress engine.

    Optional: every API function initialises with defaults on first use.

    Parameters
    ----------
    options : dict
        UCX configuration, keys without the ``UCX_`` prefix, e.g. ``{"TLS": "tcp"}``.
    env_takes_precedence : bool
        Drop options whose ``UCX_<KEY>`` environment variable is set.
    progress_mode : str
        UCXX's names: "thread" (default), "thread-polling", "blocking", "polling"; also
        ``UCXPY_PROGRESS_MODE``. ucxx_go's progress thread always owns the worker;
        "thread" and "blocking" make it sleep on UCX events, "thread-polling" and
        "polling" make it spin.
    enable_delayed_submission : bool
        Batch submissions on the progress thread (default on; ``UCXPY_ENABLE_DELAYED_SUBMISSION``).
        Off, each call waits until the progress thread has posted the operation.
    enable_python_future : bool
        Accepted for UCXX compatibility: completions always resolve asyncio Futures.
    connect_timeout : float
        Seconds create_endpoint waits for the connection and handshake (default 5).
    multi_buffer_limits : dict
        Bounds on what a peer may announce to ``recv_multi``: ``max_frames`` (default
        100000 frames per message), ``max_frame_bytes`` (64 GiB), ``max_message_bytes``
        (128 GiB), ``max_outstanding_bytes`` (16 GiB being received at once; a message
        waits for room), ``max_endpoint_outstanding_bytes`` (half of that: what one
        endpoint's messages may hold of it, so that peers announcing messages they
        never send cannot stall the others). Also ``UCXGO_MAX_FRAMES``,
        ``UCXGO_MAX_FRAME_BYTES``, ``UCXGO_MAX_MESSAGE_BYTES``,
        ``UCXGO_MAX_OUTSTANDING_BYTES``, ``UCXGO_MAX_ENDPOINT_OUTSTANDING_BYTES``.
    completion_mode : str
        "reader" (default: the event loop watches the completion queue's eventfd) or
        "thread" (a notifier thread wakes the loop, as in UCXX); also
        ``UCXGO_COMPLETION_MODE``. Reader mode measured faster (benchmarks/foundation.md).
    multi_buffer_limits : dict
        Bounds on what peers may make this process hold: ``max_frames``,
        ``max_frame_bytes``, ``max_message_bytes``, ``max_outstanding_bytes``,
        ``max_endpoint_outstanding_bytes``, ``max_unexpected_bytes`` (see the README's
        "Bounds"); also ``UCXGO_<KEY>`` in upper case.
    keepalive_timeout : float
        Seconds an endpoint with error handling may hear nothing from its peer before
        it fails with UCXTimedOutError (default 30; 0 or negative: no keepalive); also
        ``UCXGO_KEEPALIVE_TIMEOUT``. Both sides must keep alive for it to run.
    warm_up : bool or str
        Warm up in the background as soon as the engine has started (see
        ``warm_up()``): True for loopback ("127.0.0.1"), or the local IP address to
        warm up through; default off. Also ``UCXGO_WARM_UP`` ("1" or an address).
    engine_progress : str
        Who progresses the UCP worker: "thread" (default: the engine's progress
        thread), "loop" (no progress thread: the event loop of the thread that
        initialised drives the worker, for processes with fewer cores than busy
        threads) or "auto" (see ``choose_engine_progress``); also
        ``UCXGO_PROGRESS_MODE``. Loop mode forces completion_mode "reader".
    one_sided : bool
        Turn on one-sided transfers (``Region.pack``, ``unpack_remote``, ``put``,
        ``get``, semaphores, the execution context's transfers; ``register`` for the
        process's own use works either way), which both ends need; also
        ``UCXGO_ONE_SIDED`` ("1"). Off by default: with it on, UCX serves the puts and
        gets it emulates in software (over TCP, for one) at whatever address the peer
        names, so every peer with an endpoint to this process can read and write any of
        its memory (README, "What UCX itself trusts"). Off, those operations raise
        UCXUnsupportedError.

    Raises
    ------
    RuntimeError
        Already initialised (call reset() first).
    UCXConfigError
        UCX rejected an option.
    """
    global _context
    with _lock:
        if _context is not None:
            raise RuntimeError("ucxx_go is already initialised; call ucxx_go.reset() first")
        options = {str(k).removeprefix("UCX_"): str(v) for k, v in (options or {}).items()}
        if env_takes_precedence:
            options = {k: v for k, v in options.items() if f"UCX_{k}" not in os.environ}
        if progress_mode is None:
            progress_mode = os.environ.get("UCXPY_PROGRESS_MODE", "thread")
        if progress_mode not in PROGRESS_MODES:
            raise ValueError(f"progress_mode must be one of {sorted(PROGRESS_MODES)}, got {progress_mode!r}")
        if enable_delayed_submission is None:
            enable_delayed_submission = _env_flag("UCXPY_ENABLE_DELAYED_SUBMISSION", True)
        if engine_progress is None:
            engine_progress = os.environ.get("UCXGO_PROGRESS_MODE", "") or "thread"
        if engine_progress not in _loop_progress.MODES:
            raise ValueError(f"engine_progress must be one of {_loop_progress.MODES}, got {engine_progress!r}")
        if engine_progress == "auto":
            engine_progress = choose_engine_progress()
        if completion_mode is None:
            completion_mode = os.environ.get("UCXGO_COMPLETION_MODE", "reader")
        if engine_progress == "loop":
            completion_mode = "reader"  # the loop drains the ring itself
        if completion_mode not in _completions.MODES:
            raise ValueError(f"completion_mode must be one of {_completions.MODES}, got {completion_mode!r}")
        if connect_timeout is None:
            connect_timeout = float(os.environ.get("UCXPY_CONNECT_TIMEOUT", 5.0))
        limits = {}
        for key in LIMIT_KEYS:
            env = os.environ.get(f"UCXGO_{key.upper()}")
            if env:
                limits[key] = int(env)
        for key, value in (multi_buffer_limits or {}).items():
            if key not in LIMIT_KEYS:
                raise ValueError(f"unknown multi-buffer limit {key!r}; known: {LIMIT_KEYS}")
            if int(value) < 0:
                raise ValueError(f"multi-buffer limit {key} must be positive, got {value}")
            limits[key] = int(value)
        if keepalive_timeout is None and os.environ.get("UCXGO_KEEPALIVE_TIMEOUT"):
            keepalive_timeout = float(os.environ["UCXGO_KEEPALIVE_TIMEOUT"])
        if keepalive_timeout is not None:
            limits["keepalive_timeout_ms"] = int(keepalive_timeout * 1000) if keepalive_timeout > 0 else -1
        if warm_up is None:
            warm_up = os.environ.get("UCXGO_WARM_UP", "")
        if one_sided is None:
            one_sided = _env_switch("UCXGO_ONE_SIDED")
        _context = Context(options, progress_mode, bool(enable_delayed_submission), completion_mode, connect_timeout, limits,
                           warm_up_address(warm_up), engine_progress, bool(one_sided))
        if not one_sided and not call(ext.pybridge_RMAGuard):
            logging.getLogger("ucx").warning(
                "ucxx_go: UCX %s is not one the RMA guard knows: peers whose UCX uses one-sided rendezvous "
                "(UCX_RMA_PPLN_ENABLE=y, GPU memory) can read and write this process's memory; README, "
                "'What UCX itself trusts'", call(ext.pybridge_Version))
        # As UCXX, say on its "ucx" logger how progress runs.
        logging.getLogger("ucx").info(
            "Starting progress in '%s' mode (ucxx_go: %s, completions by %s)",
            progress_mode,
            "the event loop drives the worker" if engine_progress == "loop" else "the engine's progress thread",
            _context.completions.mode,
        )


def usable_cpus():
    """The CPUs this process may run on: its affinity, bounded by a cgroup CPU quota."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()
        if quota != "max":
            n = min(n, max(1, int(int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return n


def choose_engine_progress():
    """``engine_progress="auto"``: "loop" where a progress thread would have no core of
    its own, else "thread". A process cannot see how many busy threads the machine
    will have; it takes the two signs it can read: it may use at most two CPUs (a
    thread mode process alone keeps two threads busy), or the machine's runnable
    threads (the one-minute load average) already fill its CPUs."""
    cpus = usable_cpus()
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    return "loop" if cpus <= 2 or load >= (os.cpu_count() or cpus) else "thread"


def warm_up_address(value):
    """The address init's ``warm_up`` (or ``UCXGO_WARM_UP``) names: "" for off (False,
    "", "0", "false", "no", "off"), "127.0.0.1" for on (True, "1", "true", "yes",
    "on"), else the string itself, a local IP address."""
    if isinstance(value, bool):
        return "127.0.0.1" if value else ""
    text = str(value).strip()
    if text.lower() in ("", "0", "false", "no", "off"):
        return ""
    if text.lower() in ("1", "true", "yes", "on"):
        return "127.0.0.1"
    return text


def get(ipv6=False):
    """The running context, initialised with defaults if needed.

    ``ipv6``: the first use is a listener or connection on an IPv6 address, so a
    context made here gets UCX's TCP transport on IPv6 (``TCP_AF_PRIO=inet6``) unless
    ``UCX_TCP_AF_PRIO`` says otherwise. A context speaks one address family over TCP;
    with ``UCXGO_CONNECT=manager`` a listener or connection of the other one is refused
    with UCXUnsupportedError (see the README).
    """
    ctx = _context
    if ctx is None:
        try:
            init(options=address_family_options({}, ipv6) or None)
        except RuntimeError:
            pass  # initialised by another thread meanwhile
        ctx = _context
    return ctx


def address_family_options(options, ipv6):
    """`options` for a context whose first listener or connection is on IPv6 (`ipv6`):
    with UCX's TCP on IPv6 (``TCP_AF_PRIO=inet6``) unless they or ``UCX_TCP_AF_PRIO``
    say otherwise. A context speaks one address family over TCP (see the README)."""
    named = {"TCP_AF_PRIO", "UCX_TCP_AF_PRIO"} & set(options) or "UCX_TCP_AF_PRIO" in os.environ
    if ipv6 and not named:
        options = dict(options, TCP_AF_PRIO="inet6")
    return options


def reset():
    """Stop the progress engine and drop the context, as UCXX's reset().

    Raises
    ------
    UCXError
        Endpoints or listeners were still open. As UCXX's, the context is reset all
        the same (they are aborted and closed), so the next init() starts afresh.
    """
    global _context
    with _lock:
        ctx = _context
        if ctx is None:
            return
        gc.collect()  # endpoints and listeners dropped in reference cycles close now
        eps, listeners = ctx.live_objects()
        _context = None
    for ep in eps:
        ep.abort()
    for listener in listeners:
        listener.close()
    ctx.shutdown()
    if eps or listeners:
        raise UCXError(
            "Trying to reset UCX but not all Endpoints and/or Listeners are closed(). "
            f"Open: {len(eps)} endpoint(s), {len(listeners)} listener(s)"
        )


def _at_exit():
    global _context
    ctx, _context = _context, None
    if ctx is not None:
        try:
            ctx.shutdown(timeout=1.0)
        except Exception:
            pass


atexit.register(_at_exit)


def _after_fork_in_child():
    """A forked child has none of the parent's Go engine: it drops the context it
    inherited, which stays marked closed so that the finalizers and close() of the
    endpoints and listeners it inherited make no Go calls. Any new use of ucxx_go then
    starts a context, which raises UCXForkError (_bridge). The lock is made afresh: a
    thread of the parent may have held it at fork() time."""
    global _context, _lock
    _lock = threading.Lock()
    ctx, _context = _context, None
    if ctx is not None:
        ctx.closed = True


os.register_at_fork(after_in_child=_after_fork_in_child)
