"""ucxx_go: asyncio messaging over UCX with a Go core, compatible with RAPIDS UCXX's asyncio API.

    import asyncio, numpy as np, ucxx_go

    async def main():
        async def handler(ep):
            buf = np.empty(1 << 20, dtype="u1")
            await ep.recv(buf)
            await ep.send(buf)
            await ep.close()

        listener = ucxx_go.create_listener(handler)
        ep = await ucxx_go.create_endpoint("127.0.0.1", listener.port)
        msg = np.arange(1 << 20, dtype="u1")
        out = np.empty_like(msg)
        await ep.send(msg)
        await ep.recv(out)
        await ep.close()
        listener.close()

    asyncio.run(main())
"""

import asyncio
import functools
import ipaddress
import json
import logging
import re
import socket

from . import _context, _tags, debug, exceptions, types
from ._address import UCXAddress, get_address, get_ucx_address_from_buffer, get_worker_address
from ._bridge import call, ext
from ._buffers import buffer_info
from ._context import init, reset
from ._endpoint import Endpoint, _abort_handle
from ._frames import CudaFrame
from ._listener import Listener
from ._onesided import Region, RemoteRegion, RemoteSemaphore, Semaphore, register
from ._request import INLINE_DONE, INLINE_LENGTH, Request, may_wait_inline, submit
from .exceptions import *  # noqa: F401,F403

__version__ = "0.1.0"
try:  # the commit of a built distribution (setup.py writes it), as UCXX's
    from ._git_commit import GIT_COMMIT as __git_commit__
except ImportError:
    __git_commit__ = ""

__all__ = [
    "init", "reset", "create_listener", "create_endpoint", "create_endpoint_from_worker_address",
    "get_ucx_version", "get_config", "get_address", "get_worker_address",
    "get_ucx_address_from_buffer", "recv", "progress", "stop_notifier_thread", "info",
    "get_ucp_context_info", "get_ucp_worker_info", "get_active_transports", "get_ucp_worker",
    "get_ucxx_worker", "continuous_ucx_progress", "get_ucxpy_logger",
    "Endpoint", "Listener", "UCXAddress", "CudaFrame", "progress_mode", "exceptions", "types",
    "register", "Region", "RemoteRegion", "Semaphore", "RemoteSemaphore", "warm_up", "debug",
] + exceptions.__all__


def create_listener(callback_func, port=None, endpoint_error_handling=True, connect_timeout=5.0, ip=""):
    """Listen for connections; ``callback_func(endpoint)`` (plain or async) runs for each.

    Parameters
    ----------
    callback_func : callable
        Called with each connected Endpoint; a coroutine function runs as a task. An
        exception it raises is logged, and the listener goes on.
    port : int, optional
        The port to bind; any free port when None or 0.
    endpoint_error_handling : bool
        Whether the endpoints this listener accepts have UCX's peer error handling
        (default True). False: a peer that closes or dies is not detected, and
        receives from it wait until cancelled or until the endpoint is closed or
        aborted (see ``create_endpoint``). Clients should connect with the same setting.
    ip : str
        The address to bind; all interfaces when empty.

    Raises
    ------
    TypeError
        ``callback_func`` is not callable.
    UCXError
        The port is taken (UCXBusyError) or UCX could not listen.
    """
    return Listener(
        _context.get(ipv6=_is_ipv6(ip)), callback_func, ip, int(port or 0),
        endpoint_error_handling=bool(endpoint_error_handling),
    )


def _is_ipv6(ip):
    try:
        return ipaddress.ip_address(ip).version == 6
    except ValueError:
        return False


async def _resolve(host):
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
        if not infos:
            raise OSError(f"cannot resolve {host!r}")
        return infos[0][4][0]


async def create_endpoint(ip_address, port, endpoint_error_handling=True, connect_timeout=None):
    """Connect to a listener and return the Endpoint once the tag handshake is done.

    Parameters
    ----------
    ip_address : str
        The listener's address or host name.
    port : int
        The listener's port.
    endpoint_error_handling : bool
        Whether the endpoint has UCX's peer error handling (default True), as in UCXX.
        Two processes on one host use shared memory either way (ucxx_go sets UCX's
        ``MM_ERROR_HANDLING=y`` unless ``UCX_MM_ERROR_HANDLING`` says otherwise; with
        UCX's own ``n``, error handling leaves them TCP on loopback). With False, a
        peer that closes or dies is not detected: no error reaches the endpoint,
        receives from it wait until cancelled or until the endpoint is closed or
        aborted (``close()`` and ``abort()`` still end on time and cancel them), and a
        rendezvous send the peer never receives stays in flight. The listener should
        use the same setting. With ``UCXGO_CONNECT=manager`` (UCX's connection
        manager instead of ucxx_go's exchange of worker addresses, the default),
        connecting through a listener needs ``tcp`` in ``UCX_TLS`` either way;
        ``"sm,self,tcp"`` keeps the data on shared memory.
    connect_timeout : float, optional
        Seconds to wait for the connection (default: init's, 5 s).

    Raises
    ------
    UCXTimedOutError
        No connection within ``connect_timeout`` seconds.
    UCXError
        Another subclass for why UCX could not connect (nobody listening, say, or
        UCXUnreachableError: no transport reaches the peer, e.g. ``UCX_TLS=sm,self``).
    """
    ip = await _resolve(ip_address)
    ctx = _context.get(ipv6=_is_ipv6(ip))
    if connect_timeout is None:
        connect_timeout = ctx.connect_timeout
    rid = submit(ext.pybridge_Connect, ip, int(port), int(connect_timeout * 1000), bool(endpoint_error_handling))
    # A connection that completes after create_endpoint was cancelled is aborted.
    handle = await Request(ctx, rid, "create_endpoint", release=functools.partial(_abort_handle, ctx))
    return Endpoint._from_handle(ctx, handle)


async def warm_up(ip_address="127.0.0.1"):
    """Have UCX make its endpoint configurations and select their protocols now rather
    than on the first connection; return when that is done.

    A first connection costs UCX's making of each endpoint configuration it uses, with
    its protocol selection, once per process, on each side. By address exchange (the
    default) that is the configuration towards another process of this host (a few
    milliseconds on the dev VM, tens on a GPU machine, against under one later): the
    warm-up makes it with a second worker of the engine's own standing in for such a
    process, then destroys that worker; ``ip_address`` must be an address of this host.
    Connections to other hosts take another configuration, which this cannot make.
    With ``UCXGO_CONNECT=manager`` (UCX's connection manager), the connection's own
    configurations with UCX's TCP transport cost tens of milliseconds to over a hundred
    on each side (see benchmarks/RESULTS.md, section 3): the warm-up connects to a
    listener of its own on ``ip_address`` (a local address: loopback by default, or
    this host's address on the interface peers are reached through) and closes both
    ends; later connections through that device then cost about what later ones do
    (the last configuration, towards the actual peer, is still chosen on first use).
    The application sees none of it. It takes CPU time on the progress thread (11-15
    ms on the dev VM by address exchange, 25-42 through the manager), so it is worth it
    where there is time before the first connection (a server before its clients
    come), on both sides. An engine warms up once: a later call waits for
    the one running or returns at once after one succeeded, whatever ``ip_address``
    (after one failed, it tries again). ``init(warm_up=...)`` starts it with the
    engine.

    Raises
    ------
    UCXError
        The subclass for what stopped it, e.g. UCXInvalidAddrError when no device of
        this host has ``ip_address`` (UCXUnreachableError through the manager, when no
        enabled device, ``UCX_NET_DEVICES``, has it); UCXCanceledError when the
        context was reset meanwhile.
    """
    ctx = _context.get(ipv6=_is_ipv6(ip_address))
    rid = submit(ext.pybridge_WarmUp, str(ip_address))
    await Request(ctx, rid, "warm_up")


def get_ucx_version():
    """UCX's version as a tuple of ints, e.g. (1, 22, 0). Needs no init."""
    return tuple(int(x) for x in call(ext.pybridge_Version).split(".")[:3])


def progress_mode():
    """The progress mode of the running context (UCXX's names)."""
    return _context.get().progress_mode


def info():
    """A dict describing the running context, the machine's GPUs and what is in use.

    Keys: ``ucx_version``, ``progress_mode``, ``engine_wait`` ("blocking", "polling",
    or "loop": no progress thread), ``engine_progress`` ("thread" or "loop"), ``delayed_submission``,
    ``completion_mode``; ``gpus`` (index, name, uuid, bus_id, memory_bytes, numa_node,
    cpu_affinity: NVML's, empty without an NVIDIA driver) and ``gpu_topology`` (the
    link between each pair of GPUs: "NVLINK", "PIX", "PHB", "SYS"..., "+p2p" when
    peer reads work); ``progress_thread`` (the CPUs it may run on, and whether it was
    pinned near the GPU it drives); ``transports``: for each open endpoint (by uid),
    the transports UCX uses, e.g. ``["tcp:lo"]``, ``["posix:memory", "cuda_ipc:cuda"]``;
    ``rma_guard``: whether peers' one-sided rendezvous is dropped while one-sided
    transfers are off (README, "What UCX itself trusts").
    """
    ctx = _context.get()
    mode, delayed = call(ext.pybridge_Settings).split()
    gpu = json.loads(call(ext.pybridge_GPUInfo))
    eps, _ = ctx.live_objects()
    transports = {}
    for ep in eps:
        try:
            transports[ep.uid] = ep.get_active_transports()
        except UCXError:
            pass  # closed meanwhile
    return {
        "ucx_version": call(ext.pybridge_Version),
        "progress_mode": ctx.progress_mode,
        "engine_wait": mode,
        "engine_progress": ctx.engine_progress,
        "delayed_submission": delayed == "true",
        "completion_mode": ctx.completions.mode,
        "gpus": gpu["gpus"],
        "gpu_topology": gpu["topology"],
        "progress_thread": json.loads(call(ext.pybridge_ProgressCPUs)),
        "transports": transports,
        "rma_guard": bool(call(ext.pybridge_RMAGuard)),
    }


async def create_endpoint_from_worker_address(address, endpoint_error_handling=True):
    """Connect to the worker whose address is ``address`` (``get_worker_address()`` of
    the peer). No tags are exchanged: pass ``tag=..., force_tag=True`` on both sides.

    ``endpoint_error_handling`` is as for ``create_endpoint``. With ``UCX_TLS=sm,self``
    only shared memory is left, which takes error handling only with UCX's
    ``MM_ERROR_HANDLING=y`` (ucxx_go's default).

    Raises
    ------
    UCXInvalidAddrError
        ``address`` is not a worker address.
    UCXUnreachableError
        No transport reaches the peer: e.g. ``UCX_TLS=sm,self`` with error handling and
        ``UCX_MM_ERROR_HANDLING=n``.
    """
    ctx = _context.get()
    address = UCXAddress.from_buffer(address)
    handle = call(ext.pybridge_ConnectWorkerAddress, address.hex(), bool(endpoint_error_handling))
    return Endpoint._from_handle(ctx, handle)


async def recv(buffer, tag):
    """Receive into ``buffer`` the next message with exactly ``tag`` from any endpoint
    (UCXX's worker-level receive: no tag mixing, the full mask)."""
    ctx = _context.get()
    addr, n, keep, mem, stream = buffer_info(buffer, writable=True)
    rid = submit(ext.pybridge_TagRecv, 0, addr, n, int(tag), _tags.MASK64, mem, stream, may_wait_inline(n, mem))
    if rid & INLINE_DONE:
        return rid & INLINE_LENGTH
    return await Request(ctx, rid, "recv", buffer, keep)


def get_config():
    """UCX's configuration of the running context: a dict of name (no ``UCX_`` prefix)
    to value, e.g. ``get_config()["TLS"]``."""
    _context.get()
    return json.loads(call(ext.pybridge_Config))


def get_ucp_context_info():
    """UCX's description of the UCP context (ucp_context_print_info)."""
    _context.get()
    return call(ext.pybridge_UCXInfo, "context")


def get_active_transports():
    """The names of the transports UCX's context may use, e.g. {"tcp", "posix", "self"}
    (UCXX's get_active_transports, read from ``get_ucp_context_info()``)."""
    lines = re.findall(r"^#.*resource.*md.*dev.*flags.*$", get_ucp_context_info(), re.M)
    return {line.split()[-1].split("/")[0] for line in lines}


def get_ucp_worker():
    """UCX's ucp_worker_h of the running context's worker, as an int (UCXX's accessor)."""
    _context.get()
    return int(call(ext.pybridge_WorkerHandle))


def get_ucxx_worker():
    """As ``get_ucp_worker``: ucxx_go has no C++ UCXX worker object."""
    return get_ucp_worker()


def continuous_ucx_progress(event_loop=None):
    """Compatibility with UCXX: the engine's progress thread always progresses the
    worker, and completions reach every event loop that awaits them."""
    _context.get()


def get_ucxpy_logger():
    """UCXX's "ucx" logger, to which ucxx_go forwards what UCX logs and says how it
    starts."""
    return logging.getLogger("ucx")


def __getattr__(name):
    # Loaded on first use, not at import (see "fork" in the README).
    if name == "__ucx_version__":
        return "%d.%d.%d" % get_ucx_version()
    raise AttributeError(f"module 'ucxx_go' has no attribute {name!r}")


def get_ucp_worker_info():
    """UCX's description of the UCP worker (ucp_worker_print_info)."""
    _context.get()
    return call(ext.pybridge_UCXInfo, "worker")


def progress():
    """Compatibility with UCXX: ucxx_go's progress thread always progresses the worker,
    so there is nothing for the application to do."""


def stop_notifier_thread():
    """Compatibility with UCXX: ucxx_go's notifier stops by itself with reset() and at
    exit, so there is nothing to stop by hand."""


# GrCUDA's run-time DAG (_execution): nothing of Go starts until an ExecutionContext is made.
from ._execution import (  # noqa: E402
    ConfiguredKernel, DeviceArray, ExecutionContext, Kernel, Vertex, VertexFailedError,
)

__all__ += ["ExecutionContext", "DeviceArray", "Vertex", "Kernel", "ConfiguredKernel", "VertexFailedError"]

# Collectives (_communicator): nothing of Go starts until a Communicator is made.
from ._communicator import Communicator  # noqa: E402
from ._plan import ExecutionPlan  # noqa: E402

__all__ += ["Communicator", "ExecutionPlan"]
