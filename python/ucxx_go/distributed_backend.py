"""A Dask `distributed` comm backend over ucxx_go: the `ucxgo://` scheme.

Registered through the `distributed.comm.backends` entry point, so a scheduler, nanny or
worker process finds it by name with no import by the user:

    LocalCluster(protocol="ucxgo"), dask scheduler --protocol ucxgo, dask worker ucxgo://host:port

A message is one `send_multi` (distributed's frames as they are, however many) and is
read with one `recv_multi`. Each host frame arrives in writable memory of its own, as
tcp's: from 64 KiB up (_OWN_HOST_MIN) the engine's allocation of that frame alone,
received into without a copy, its receive posted the moment the header is in (an
allocator of ours would cost a trip through the event loop first, and the frame would
land in UCX's unexpected queue and be copied again); below that copied from the
message's shared block into distributed's `host_array`. So a small frame kept alive
keeps only its own bytes, and a large one is freed once dropped.
UCX errors become CommClosedError where distributed expects it.
"""

import logging
import os

import dask
from distributed.comm.addressing import parse_host_port, unparse_host_port
from distributed.comm.core import BaseListener, Comm, CommClosedError, Connector
from distributed.comm.registry import Backend
from distributed.comm.utils import ensure_concrete_host, from_frames, to_frames
from distributed.protocol.utils import host_array
from distributed.utils import ensure_ip, get_ip, nbytes

import ucxx_go
from ucxx_go.exceptions import UCXError

logger = logging.getLogger("ucxx_go.distributed")

SCHEME = "ucxgo"
_PREFIX = SCHEME + "://"

# Host frames from this size are received into allocations of their own
# (recv_multi's own_host_min); smaller ones are copied out of the message's block.
_OWN_HOST_MIN = 64 << 10


def _owning(frame):
    """`frame` in memory of its own, a host frame as a memoryview (as tcp's): one that
    recv_multi left in the message's shared block (under _OWN_HOST_MIN bytes) is
    copied into a host_array, one in an allocation of its own is viewed; CUDA frames
    are returned as they are."""
    if not hasattr(frame, "base"):
        return frame
    if frame.nbytes >= _OWN_HOST_MIN:
        return frame.data
    own = host_array(frame.nbytes)
    own[:] = frame
    return own


def _concrete_host(host):
    """The address peers use to reach a listener on `host`. For a wildcard, an address
    UCX may use: when UCX_NET_DEVICES (as the context read it) names network
    interfaces, the first of them that is not a loopback and has an address of the
    host's family, or the loopback's address when loopbacks are all it names (UCX
    then reaches no other host, and the host's outward address, tcp's choice, is one
    it may not use); otherwise tcp's choice."""
    if host not in ("", "0.0.0.0", "::"):
        return ensure_concrete_host(host)
    ipv6 = host == "::"
    try:
        devices = ucxx_go.get_config().get("NET_DEVICES", "all")
    except UCXError:
        devices = "all"
    parts = [d for d in devices.split(",") if d]
    if not parts or "all" in parts:
        return ensure_concrete_host(host)
    names = [d.split(":")[0] for d in parts]
    loopbacks = [n for n in names if n == "lo" or n.startswith("lo:")]
    for name in (n for n in names if n not in loopbacks):
        try:
            return ucxx_go.get_address(ifname=name, use_ipv6=ipv6)
        except OSError:
            continue  # not a network interface (an InfiniBand device), or no address
    if loopbacks:
        return "::1" if ipv6 else "127.0.0.1"
    return ensure_concrete_host(host)


def _canonical(cfg):
    """dask config keys as written with hyphens: dask keeps what it was given, and
    DASK_DISTRIBUTED__COMM__UCXGO__... variables arrive with underscores."""
    return {k.replace("_", "-"): v for k, v in (cfg or {}).items()}


def _init_from_config(host=""):
    """Initialise ucxx_go from dask config (distributed.comm.ucxgo.*) the first time;
    for an IPv6 `host`, with UCX's TCP on IPv6 (unless the config or the environment
    says otherwise), as ucxx_go does for a first listener or connection on IPv6."""
    from . import _context

    if _context._context is not None:
        return
    cfg = _canonical(dask.config.get("distributed.comm.ucxgo", default={}))
    options = dict(cfg.get("ucx-options", {}) or {})
    if cfg.get("tls"):
        options.setdefault("TLS", cfg["tls"])
    options = _context.address_family_options(options, ":" in host)
    limits = {k.replace("-", "_"): v for k, v in _canonical(cfg.get("multi-buffer-limits")).items()}
    try:
        ucxx_go.init(
            options=options,
            env_takes_precedence=True,
            progress_mode=cfg.get("progress-mode"),
            completion_mode=cfg.get("completion-mode"),
            multi_buffer_limits=limits or None,
            engine_progress=_engine_progress(cfg),
            warm_up=cfg.get("warm-up"),  # None: UCXGO_WARM_UP decides
        )
    except RuntimeError:
        pass  # initialised meanwhile


def _engine_progress(cfg):
    """Who progresses the worker in a Dask process: UCXGO_PROGRESS_MODE, else
    distributed.comm.ucxgo.engine-progress, else "auto". Unlike a plain ucxx_go process
    (thread mode unless told), Dask's processes choose by default: a worker per core
    leaves a progress thread no core of its own, and there the event loop driving the
    worker does better (benchmarks/RESULTS.md, "Dask and the progress modes")."""
    return os.environ.get("UCXGO_PROGRESS_MODE") or cfg.get("engine-progress") or "auto"


def _endpoint_error_handling():
    """distributed.comm.ucxgo.endpoint-error-handling (default True), UCXX's
    endpoint_error_handling for every endpoint the backend creates or accepts.

    False: a peer that closes or dies is not detected, and a read from it waits until
    the comm is closed or aborted (workers on one host use shared memory either way).
    As an environment variable: DASK_DISTRIBUTED__COMM__UCXGO__ENDPOINT_ERROR_HANDLING=False.
    """
    value = dask.config.get("distributed.comm.ucxgo.endpoint-error-handling", default=True)
    if isinstance(value, str):  # from YAML or the environment as text, e.g. "false"
        return value.strip().lower() not in ("false", "no", "off", "0", "")
    return bool(value)


# frame_split_size for distributed's serialisation: larger than any frame.
_NO_SHARDS = 1 << 62


def _address(host_port):
    """A "host:port" of ucxx_go (an IPv6 host unbracketed) as distributed writes it."""
    host, _, port = host_port.rpartition(":")
    return unparse_host_port(host, int(port))


def _comm_closed(exc, what):
    return CommClosedError(f"ucxgo: {what}: {type(exc).__name__}: {exc}")


class UCXGoComm(Comm):
    """One connection: reads and writes whole distributed messages.

    As distributed's tcp and inproc comms, ``write`` returns once the message is
    queued (UCX holds it), not when the peer has read it, so one task may write and
    then read. Until UCX is done with a message its frames stay referenced; a write
    that fails after it returned fails the comm's next write, read or close with
    CommClosedError.
    """

    def __init__(self, ep, local_addr, peer_addr, deserialize=True):
        super().__init__(deserialize=deserialize)
        self._ep = ep
        self._local_addr = local_addr
        self._peer_addr = peer_addr
        self._closed = False
        self._write_error = None  # a write that failed after returning, not yet reported
        self._failure_reported = False  # an operation raised for the comm's failure

    def _write_ended(self, future):
        if future.cancelled() or future.exception() is None:
            return
        if self._write_error is None and not self._failure_reported:
            self._write_error = future.exception()
        self.abort()

    def _raise_write_error(self, what):
        """Report a write that failed after it returned, once, unless an operation
        already reported the comm's failure."""
        error, self._write_error = self._write_error, None
        if error is not None:
            self._failed(error, f"{what} after a failed write")

    def _failed(self, exc, what):
        """Abort the comm and raise CommClosedError for exc."""
        self._failure_reported, self._write_error = True, None
        self.abort()
        raise _comm_closed(exc, what) from exc

    @property
    def local_address(self):
        return self._local_addr

    @property
    def peer_address(self):
        return self._peer_addr

    async def write(self, msg, serializers=("cuda", "dask", "pickle", "error"), on_error="message"):
        self._raise_write_error("write")
        if self.closed():
            raise CommClosedError("ucxgo: write on a closed comm")
        frames = await to_frames(
            msg,
            allow_offload=self.allow_offload,
            serializers=serializers,
            on_error=on_error,
            context={"sender": self.local_info, "recipient": self.remote_info, **self.handshake_options},
            # A UCX message may be any size: frames are not cut into shards, which the
            # receiver could only join again by copying.
            frame_split_size=_NO_SHARDS,
        )
        if self.closed():  # closed while the frames were made
            raise CommClosedError("ucxgo: write on a closed comm")
        try:
            request = self._ep._start_send_multi(frames)
        except UCXError as e:
            self._failed(e, "write")
        except BaseException:
            self.abort()  # as tcp's: a write that failed leaves no usable comm
            raise
        request.future.add_done_callback(self._write_ended)
        return sum(map(nbytes, frames))

    async def read(self, deserializers=None):
        # Only our own close stops reads: after the peer's close, what it wrote before
        # is still delivered (recv_multi drains it) and the read after that fails.
        self._raise_write_error("read")
        if self._closed:
            raise CommClosedError("ucxgo: read on a closed comm")
        try:
            frames = [_owning(f) for f in await self._ep.recv_multi(own_host_min=_OWN_HOST_MIN)]
        except UCXError as e:
            self._failed(e, "read")
        except BaseException:
            self.abort()
            raise
        try:
            return await from_frames(
                frames, deserialize=self.deserialize, deserializers=deserializers,
                allow_offload=self.allow_offload,
            )
        except EOFError as e:
            self.abort()
            raise CommClosedError("ucxgo: truncated message") from e

    async def close(self):
        """Close, telling the peer: its pending read fails with CommClosedError (with
        endpoint-error-handling on; without it the peer is not told)."""
        if not self._closed:
            self._closed = True
            try:
                await self._ep.close()
            except UCXError:
                pass
        self._raise_write_error("close")

    def abort(self):
        if not self._closed:
            self._closed = True
            self._ep.abort()

    def closed(self):
        return self._closed or self._ep.closed


class UCXGoConnector(Connector):
    async def connect(self, address, deserialize=True, **connection_args):
        ip, port = parse_host_port(address)
        _init_from_config(ip)
        try:
            ep = await ucxx_go.create_endpoint(ip, port, endpoint_error_handling=_endpoint_error_handling())
        except UCXError as e:
            # An OSError: distributed retries it until its connect timeout.
            raise _comm_closed(e, f"connect to {address}") from e
        local = _address(ep.local_address) if ep.local_address else unparse_host_port(get_ip(ip), 0)
        return UCXGoComm(ep, _PREFIX + local, _PREFIX + unparse_host_port(ip, port), deserialize=deserialize)


class UCXGoListener(BaseListener):
    """Accepts connections; as distributed's TCP listener, a connection accepted
    before stop() whose handshake has not finished is aborted, never handed on."""

    prefix = _PREFIX
    comm_class = UCXGoComm

    def __init__(self, address, comm_handler, deserialize=False, allow_offload=True, **connection_args):
        super().__init__()
        if not address.startswith(_PREFIX):
            address = _PREFIX + address
        host, self._input_port = parse_host_port(address[len(_PREFIX):], default_port=0)
        # As distributed's TCP: no host means every interface, a name means its address.
        self.ip = ensure_ip(host) if host else "0.0.0.0"
        self.comm_handler = comm_handler
        self.deserialize = deserialize
        self.allow_offload = allow_offload
        self._listener = None
        self._stopped = False

    @property
    def port(self):
        return self.get_host_port()[1]

    @property
    def address(self):
        return _PREFIX + unparse_host_port(*self.get_host_port())

    def get_host_port(self):
        """The listening address as a (host, port) tuple."""
        if self._listener is None:
            raise ValueError("invalid operation on non-started UCXGoListener")
        return self.ip, self._listener.port

    async def start(self):
        _init_from_config(self.ip)

        async def serve(ep):
            if self._stopped:
                # Accepted just before stop(): the handshake would never be aborted.
                ep.abort()
                return
            peer = _address(ep.peer_address) if ep.peer_address else "0.0.0.0:0"
            local = _PREFIX + _address(ep.local_address) if ep.local_address else self.address
            comm = UCXGoComm(ep, local, _PREFIX + peer, deserialize=self.deserialize)
            comm.allow_offload = self.allow_offload
            try:
                await self.on_connection(comm)
            except CommClosedError:
                logger.debug("ucxgo: connection closed before the handshake")
                return
            await self.comm_handler(comm)

        self._listener = ucxx_go.create_listener(
            serve, port=self._input_port, ip=self.ip, endpoint_error_handling=_endpoint_error_handling()
        )

    def stop(self):
        self._stopped = True
        if self._listener is not None:
            self._listener.close()

    @property
    def listen_address(self):
        return self.address

    @property
    def contact_address(self):
        host, port = parse_host_port(self.address[len(_PREFIX):])
        return _PREFIX + unparse_host_port(_concrete_host(host), port)


class UCXGoBackend(Backend):
    def get_connector(self):
        return UCXGoConnector()

    def get_listener(self, loc, handle_comm, deserialize, **connection_args):
        return UCXGoListener(loc, handle_comm, deserialize, **connection_args)

    def get_address_host(self, loc):
        return parse_host_port(loc)[0]

    def get_address_host_port(self, loc):
        return parse_host_port(loc)

    def resolve_address(self, loc):
        host, port = parse_host_port(loc)
        return unparse_host_port(ensure_ip(host), port)

    def get_local_address_for(self, loc):
        host, port = parse_host_port(loc)
        return unparse_host_port(get_ip(ensure_ip(host)), None)
